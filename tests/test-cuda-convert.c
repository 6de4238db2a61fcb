/*
 * test-cuda-convert.c - rf_cuda_convert() against the real CUDA runtime
 * and real producers: every dtype and layout, normalised or not, matches
 * a CPU reference in double within the output type's rounding; bad
 * arguments are refused. Each case skips without a GPU.
 */
#include "config.h"

#include <math.h>

#include <cuda_runtime_api.h>

#include "cuda-fixtures.h"

/* ---- conversion -------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    const int exponent = (h >> 10) & 31, mantissa = h & 1023;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (exponent == 0)
        return sign * ldexpf((float)mantissa, -24);
    if (exponent == 31)
        return mantissa ? NAN : sign * INFINITY;
    return sign * ldexpf((float)(1024 + mantissa), exponent - 25);
}

static float bfloat16_to_float(uint16_t b)
{
    const uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static double element(const void *out, rf_cuda_dtype dtype, size_t i)
{
    if (dtype == RF_CUDA_FLOAT32)
        return ((const float *)out)[i];
    const uint16_t bits = ((const uint16_t *)out)[i];
    return dtype == RF_CUDA_FLOAT16 ? half_to_float(bits)
                                    : bfloat16_to_float(bits);
}

/*
 * The tolerance: one unit in the last place of the output type (2^-10 of
 * the value for float16, 2^-7 for bfloat16: twice the rounding error, for
 * results that land next to a rounding boundary), plus 4e-6 (1 + |value|)
 * for the float32 arithmetic (one fused multiply-add with a scale and a
 * bias rounded to float: about 3e-7 per unit of the operands).
 */
static double tolerance(rf_cuda_dtype dtype, double expected)
{
    const double ulp = dtype == RF_CUDA_FLOAT16    ? ldexp(1, -10)
                       : dtype == RF_CUDA_BFLOAT16 ? ldexp(1, -7)
                                                   : 0;
    return ulp * fabs(expected) + 4e-6 * (1 + fabs(expected));
}

static size_t offset_of(rf_layout layout, const rf_cuda_batch *b, uint32_t n,
                        uint32_t c, size_t pixel)
{
    const size_t plane = (size_t)b->height * b->width;
    if (layout == RF_LAYOUT_NCHW)
        return ((size_t)n * b->channels + c) * plane + pixel;
    return ((size_t)n * plane + pixel) * b->channels + c;
}

struct conversion {
    rf_cuda_dtype dtype;
    rf_layout layout;
    const float *mean, *std;
};

/* Compares every element with (pixel / 255 - mean) / std in double;
 * returns the largest error. */
static double check_conversion(const rf_cuda_batch *b, const uint8_t *pixels,
                               const void *out, const struct conversion *cv)
{
    double worst = 0;
    const size_t plane = (size_t)b->height * b->width;
    for (uint32_t n = 0; n < b->samples; n++)
        for (uint32_t c = 0; c < b->channels; c++)
            for (size_t p = 0; p < plane; p++) {
                const double m = cv->mean ? cv->mean[c] : 0;
                const double s = cv->std ? cv->std[c] : 1;
                const double want =
                    (pixels[offset_of(b->layout, b, n, c, p)] / 255.0 - m) / s;
                const double got =
                    element(out, cv->dtype, offset_of(cv->layout, b, n, c, p));
                const double error = fabs(got - want);
                if (!(error <= tolerance(cv->dtype, want))) {
                    fprintf(stderr,
                            "dtype %d layout %d: sample %u channel %u pixel "
                            "%zu is %.9g, want %.9g\n",
                            (int)cv->dtype, (int)cv->layout, n, c, p, got,
                            want);
                    exit(1);
                }
                if (error > worst)
                    worst = error;
            }
    return worst;
}

static void convert_and_check(rf_cuda_loader *gpu, const rf_cuda_batch *b,
                              const uint8_t *pixels,
                              const struct conversion *cv, cudaStream_t stream)
{
    const size_t size = b->bytes * (cv->dtype == RF_CUDA_FLOAT32 ? 4 : 2);
    void *device = NULL, *host = malloc(size);
    CHECK(host);
    CHECK_CUDA(cudaMalloc(&device, size));
    CHECK_CUDA(cudaMemsetAsync(device, 0xff, size, stream)); /* NaN */
    CHECK_GPU(gpu, rf_cuda_convert(gpu, b, device, cv->dtype, cv->layout,
                                   cv->mean, cv->std, stream));
    CHECK_CUDA(
        cudaMemcpyAsync(host, device, size, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const double worst = check_conversion(b, pixels, host, cv);
    printf("convert %u channels %s -> dtype %d %s: largest error %.3g\n",
           b->channels, b->layout == RF_LAYOUT_NCHW ? "NCHW" : "NHWC",
           (int)cv->dtype, cv->layout == RF_LAYOUT_NCHW ? "NCHW" : "NHWC",
           worst);
    CHECK_CUDA(cudaFree(device));
    free(host);
}

static const float imagenet_mean[] = {0.485f, 0.456f, 0.406f, 0.5f};
static const float imagenet_std[] = {0.229f, 0.224f, 0.225f, 0.25f};

static void test_conversion(uint32_t channels, rf_layout from, bool normalise)
{
    require_devices(1);
    const struct shape s = {.samples = 10,
                            .batch = 5,
                            .height = 17,
                            .width = 23,
                            .channels = channels,
                            .layout = from,
                            .producers = 1,
                            .epochs = 1};
    rf_cuda_loader *gpu = open_gpu(open_synthetic(&s), 2, 0);
    cudaStream_t stream = new_stream();
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    struct host_copy h = download(&b, stream);
    check_contents(&b, &h);
    for (int dtype = RF_CUDA_FLOAT32; dtype <= RF_CUDA_BFLOAT16; dtype++)
        for (int to = RF_LAYOUT_NHWC; to <= RF_LAYOUT_NCHW; to++) {
            const struct conversion cv = {(rf_cuda_dtype)dtype, (rf_layout)to,
                                          normalise ? imagenet_mean : NULL,
                                          normalise ? imagenet_std : NULL};
            convert_and_check(gpu, &b, h.pixels, &cv, stream);
        }
    host_copy_free(&h);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaStreamDestroy(stream));
    rf_cuda_close(gpu);
}

TEST_CASE(test_conversion_refused, "convert", "bad arguments are refused")
{
    require_devices(1);
    rf_cuda_loader *gpu = open_small(2, 0);
    rf_cuda_batch b;
    CHECK_GPU(gpu, rf_cuda_next(gpu, &b));
    void *device = NULL;
    CHECK_CUDA(cudaMalloc(&device, b.bytes * 4));
    const float zero_std[] = {0.2f, 0.0f, 0.2f};
    const float nan_mean[] = {0.5f, NAN, 0.5f};
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, (rf_cuda_dtype)3, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "dtype 3");
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, (rf_layout)2,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, zero_std, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "channel 1");
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             nan_mean, NULL, 0),
             -EINVAL);
    CHECK_EQ(rf_cuda_convert(gpu, &b, (char *)device + 2, RF_CUDA_FLOAT32,
                             RF_LAYOUT_NCHW, NULL, NULL, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "not aligned");
    CHECK_EQ(rf_cuda_convert(gpu, NULL, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_GPU(gpu, rf_cuda_release(gpu, &b, 0));
    /* released: its buffer may be under the next upload already */
    CHECK_EQ(rf_cuda_convert(gpu, &b, device, RF_CUDA_FLOAT32, RF_LAYOUT_NCHW,
                             NULL, NULL, 0),
             -EINVAL);
    CHECK_CONTAINS(rf_cuda_error(gpu), "is not held");
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaFree(device));
    rf_cuda_close(gpu);
}
/* Case convert_<what>(): test_conversion() of CHANNELS channels from
 * LAYOUT, normalised or not, into every dtype and layout. */
#define CONVERT_CASE(fn, name, channels, layout, normalised)                   \
    TEST_CASE(fn, "convert", name)                                             \
    {                                                                          \
        test_conversion(channels, layout, normalised);                         \
    }

CONVERT_CASE(convert_rgb_nhwc,
             "RGB from NHWC, normalised, every dtype and layout", 3,
             RF_LAYOUT_NHWC, true)
CONVERT_CASE(convert_rgb_nchw,
             "RGB from NCHW, normalised, every dtype and layout", 3,
             RF_LAYOUT_NCHW, true)
CONVERT_CASE(convert_grey_nhwc, "grey from NHWC, every dtype and layout", 1,
             RF_LAYOUT_NHWC, false)
CONVERT_CASE(convert_rgba_nchw,
             "4 channels from NCHW, normalised, every dtype and layout", 4,
             RF_LAYOUT_NCHW, true)
int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
