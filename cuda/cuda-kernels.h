/*
 * cuda-kernels.h - what the C half of libringfeed-cuda (cuda-convert.c)
 * shares with its CUDA half (cuda-kernels.cu): the conversion kernel's
 * parameters and its launcher. Plain C, so that both gcc and nvcc read
 * it.
 */
#ifndef RF_CUDA_KERNELS_H
#define RF_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Channels the conversion handles (RF_PARAM_CHANNELS allows 1..4). */
#define RF__CONVERT_MAX_CHANNELS 4

/*
 * One conversion, passed by value to the kernel. Element k of channel c of
 * pixel p (0..plane-1) of sample n is at n * sample + p * pixel + c *
 * channel, in elements, on both sides: so one kernel serves NHWC and NCHW
 * in and out.
 */
struct rf__convert_params {
    const uint8_t *src;
    void *dst;
    uint64_t pixels; /* samples * plane: one thread step per pixel */
    uint64_t plane;  /* height * width */
    uint64_t src_sample, src_pixel, src_channel;
    uint64_t dst_sample, dst_pixel, dst_channel;
    uint32_t channels;
    uint32_t dtype; /* rf_cuda_dtype */
    /* dst = src * scale[c] + bias[c], the normalisation folded into one
     * fused multiply-add. */
    float scale[RF__CONVERT_MAX_CHANNELS];
    float bias[RF__CONVERT_MAX_CHANNELS];
};

/* Queues the conversion on stream; returns cudaLaunchKernel's status. The
 * caller has checked every field. */
cudaError_t rf__cuda_launch_convert(const struct rf__convert_params *p,
                                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RF_CUDA_KERNELS_H */
