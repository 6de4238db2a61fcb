/*
 * cuda-kernels.cu - the conversion kernel: uint8 pixels to float32,
 * float16 or bfloat16, normalised per channel, from either layout to
 * either layout, in one pass. The only device code of libringfeed-cuda;
 * cuda-convert.c checks the arguments and fills the parameters.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda-kernels.h"
#include "ringfeed/cuda.h"

namespace
{

/* Threads per block, and at most this many blocks: the kernel strides over
 * the rest, so any batch size launches. */
constexpr unsigned kThreads = 256;
constexpr uint64_t kMaxBlocks = 65536;

template <typename T> __device__ T from_float(float x);

template <> __device__ float from_float<float>(float x)
{
    return x;
}

template <> __device__ __half from_float<__half>(float x)
{
    return __float2half_rn(x);
}

template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

/* One thread per pixel and all of its channels: neighbouring threads read
 * neighbouring pixels and write neighbouring elements of each plane (or of
 * the interleaved row), so both sides coalesce in either layout. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const rf__convert_params p)
{
    T *const dst = static_cast<T *>(p.dst);
    const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    for (uint64_t i =
             static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         i < p.pixels; i += step) {
        const uint64_t n = i / p.plane, pixel = i - n * p.plane;
        const uint64_t from = n * p.src_sample + pixel * p.src_pixel;
        const uint64_t to = n * p.dst_sample + pixel * p.dst_pixel;
#pragma unroll
        for (uint32_t c = 0; c < RF__CONVERT_MAX_CHANNELS; c++) {
            if (c < p.channels) {
                const float v = p.src[from + c * p.src_channel];
                dst[to + c * p.dst_channel] =
                    from_float<T>(fmaf(v, p.scale[c], p.bias[c]));
            }
        }
    }
}

template <typename T>
cudaError_t launch(const rf__convert_params *p, cudaStream_t stream)
{
    uint64_t blocks = (p->pixels + kThreads - 1) / kThreads;
    if (blocks > kMaxBlocks)
        blocks = kMaxBlocks;
    rf__convert_params copy = *p;
    void *args[] = {&copy};
    return cudaLaunchKernel(reinterpret_cast<const void *>(&convert_kernel<T>),
                            dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                            args, 0, stream);
}

} // namespace

extern "C" cudaError_t rf__cuda_launch_convert(const rf__convert_params *p,
                                               cudaStream_t stream)
{
    switch (p->dtype) {
    case RF_CUDA_FLOAT32:
        return launch<float>(p, stream);
    case RF_CUDA_FLOAT16:
        return launch<__half>(p, stream);
    case RF_CUDA_BFLOAT16:
        return launch<__nv_bfloat16>(p, stream);
    default:
        return cudaErrorInvalidValue;
    }
}
