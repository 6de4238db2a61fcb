/*
 * cuda-convert.c - rf_cuda_convert(): checks a conversion, folds the
 * normalisation into one scale and one offset per channel, and launches
 * the kernel of cuda-kernels.cu on the caller's stream.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuda-kernels.h"
#include "cuda-loader.h"

static const char *const dtype_names[] = {
    [RF_CUDA_FLOAT32] = "float32",
    [RF_CUDA_FLOAT16] = "float16",
    [RF_CUDA_BFLOAT16] = "bfloat16",
};
static const size_t dtype_sizes[] = {
    [RF_CUDA_FLOAT32] = 4,
    [RF_CUDA_FLOAT16] = 2,
    [RF_CUDA_BFLOAT16] = 2,
};

static bool layout_exists(rf_layout layout)
{
    return layout == RF_LAYOUT_NHWC || layout == RF_LAYOUT_NCHW;
}

static int check_batch(rf_cuda_loader *gpu, const rf_cuda_batch *b)
{
    if (b->channels < 1 || b->channels > RF__CONVERT_MAX_CHANNELS ||
        !layout_exists(b->layout))
        return rf__cuda_fail(gpu, -EINVAL,
                             "batch %" PRIu64 " has %" PRIu32
                             " channels and layout %d; the conversion takes "
                             "1 to %d channels, NHWC or NCHW",
                             b->sequence, b->channels, (int)b->layout,
                             RF__CONVERT_MAX_CHANNELS);
    if (b->sample_bytes != (size_t)b->height * b->width * b->channels ||
        b->bytes != b->sample_bytes * b->samples)
        return rf__cuda_fail(
            gpu, -EINVAL,
            "batch %" PRIu64 " is not %" PRIu32 " whole samples of %" PRIu32
            "x%" PRIu32 "x%" PRIu32,
            b->sequence, b->samples, b->height, b->width, b->channels);
    return 0;
}

static int check_target(rf_cuda_loader *gpu, const void *dst,
                        rf_cuda_dtype dtype, rf_layout layout)
{
    if ((unsigned)dtype > RF_CUDA_BFLOAT16)
        return rf__cuda_fail(gpu, -EINVAL,
                             "dtype %d: RF_CUDA_FLOAT32, RF_CUDA_FLOAT16 or "
                             "RF_CUDA_BFLOAT16",
                             (int)dtype);
    if (!layout_exists(layout))
        return rf__cuda_fail(gpu, -EINVAL,
                             "layout %d: RF_LAYOUT_NHWC or RF_LAYOUT_NCHW",
                             (int)layout);
    if ((uintptr_t)dst % dtype_sizes[dtype] != 0)
        return rf__cuda_fail(gpu, -EINVAL,
                             "destination %p is not aligned to its %zu-byte "
                             "%s elements",
                             dst, dtype_sizes[dtype], dtype_names[dtype]);
    return 0;
}

/* scale = 1 / (255 std), bias = -mean / std, computed in double and
 * rounded once, so that the kernel's one fused multiply-add is within a
 * few float32 rounding steps of (pixel / 255 - mean) / std. */
static int fold_normalisation(rf_cuda_loader *gpu, uint32_t channels,
                              const float *mean, const float *std,
                              struct rf__convert_params *p)
{
    for (uint32_t c = 0; c < channels; c++) {
        const double m = mean ? mean[c] : 0.0, s = std ? std[c] : 1.0;
        if (!isfinite(m) || !isfinite(s) || s == 0.0)
            return rf__cuda_fail(gpu, -EINVAL,
                                 "channel %" PRIu32 ": mean %g and std %g; "
                                 "both must be finite and std not 0",
                                 c, m, s);
        p->scale[c] = (float)(1.0 / (255.0 * s));
        p->bias[c] = (float)(-m / s);
    }
    return 0;
}

/* Element strides of one sample, one pixel and one channel. */
static void set_strides(rf_layout layout, uint64_t plane, uint32_t channels,
                        uint64_t *sample, uint64_t *pixel, uint64_t *channel)
{
    *sample = plane * channels;
    *pixel = layout == RF_LAYOUT_NCHW ? 1 : channels;
    *channel = layout == RF_LAYOUT_NCHW ? plane : 1;
}

static int fill_params(rf_cuda_loader *gpu, const rf_cuda_batch *b, void *dst,
                       rf_cuda_dtype dtype, rf_layout layout, const float *mean,
                       const float *std, struct rf__convert_params *p)
{
    if (!b || !dst)
        return rf__cuda_fail(gpu, -EINVAL, "no batch or no destination");
    int rc = check_batch(gpu, b);
    if (rc == 0)
        rc = check_target(gpu, dst, dtype, layout);
    if (rc == 0)
        rc = fold_normalisation(gpu, b->channels, mean, std, p);
    if (rc < 0)
        return rc;
    p->src = b->data;
    p->dst = dst;
    p->plane = (uint64_t)b->height * b->width;
    p->pixels = p->plane * b->samples;
    p->channels = b->channels;
    p->dtype = (uint32_t)dtype;
    set_strides(b->layout, p->plane, b->channels, &p->src_sample, &p->src_pixel,
                &p->src_channel);
    set_strides(layout, p->plane, b->channels, &p->dst_sample, &p->dst_pixel,
                &p->dst_channel);
    return 0;
}

int rf_cuda_convert(rf_cuda_loader *gpu, const rf_cuda_batch *batch, void *dst,
                    rf_cuda_dtype dtype, rf_layout layout, const float *mean,
                    const float *std, cudaStream_t stream)
{
    if (!gpu)
        return -EINVAL;
    if (gpu->fatal) /* only rf_cuda_close() is left (cuda.h) */
        return gpu->fatal;
    /* a batch released may be under the next upload already */
    if (batch && !rf__cuda_held_buffer(gpu, batch))
        return rf__cuda_fail(gpu, -EINVAL,
                             "batch %" PRIu64 " is not held: convert a batch "
                             "before rf_cuda_release() gives it back",
                             batch->sequence);
    struct rf__convert_params p = {0};
    int rc = fill_params(gpu, batch, dst, dtype, layout, mean, std, &p);
    if (rc < 0 || p.pixels == 0)
        return rc;
    int previous = 0;
    rc = rf__cuda_enter(gpu, &previous);
    if (rc < 0)
        return rc;
    const cudaError_t err = rf__cuda_launch_convert(&p, stream);
    rf__cuda_leave(gpu, previous);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(
            gpu, err, "cudaLaunchKernel",
            "converting batch %" PRIu64 " to %s %s on the caller's stream, "
            "which must be a stream of the loader's device",
            batch->sequence, dtype_names[dtype],
            layout == RF_LAYOUT_NCHW ? "NCHW" : "NHWC");
    return 0;
}
