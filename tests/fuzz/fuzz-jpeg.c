/*
 * fuzz-jpeg.c - a JPEG file from its bytes to a slot, as a producer decodes
 * it: lib/jpeg.c (header, checks, EXIF orientation, DCT scale, cropped
 * scanlines, CMYK conversion) with the crop lib/transform.c picks, and
 * lib/resize.c writing exactly out_height x out_width x channels bytes.
 * The leading JPEG_PARAM_BYTES bytes (fuzz.h) choose the transform, the
 * output size and layout, flip, seed and crop parameters; the rest is the
 * file. One decoder serves every input, as in a producer, so that state
 * left behind by a failed image is exercised too.
 */
#include "config.h"

#include <stdlib.h>

#include "fuzz.h"
#include "common/internal.h"
#include "decode/jpeg.h"
#include "decode/transform.h"

/* Small enough that a little input declaring a huge image cannot make one
 * run take seconds; the limit itself is what is tested. */
#define FUZZ_MAX_PIXELS (UINT64_C(1) << 22)
/* Below what the largest progressive image under that limit needs (24
 * MiB at 4:4:4), so that the memory check is reached as well. */
#define FUZZ_MAX_DECODE_MEMORY (UINT64_C(16) << 20)

struct crop_request {
    struct rf__transform_spec spec;
    uint64_t seed, index;
};

static void choose_crop(void *user, uint32_t width, uint32_t height,
                        struct rf__crop *crop)
{
    const struct crop_request *r = user;
    rf__transform_crop(&r->spec, r->seed, 0, r->index, width, height, crop);
}

/* The parameters a loader would hold, from the leading bytes. */
static void read_params(struct fuzz_bytes *in, int64_t *p,
                        struct rf__jpeg_options *opt)
{
    const uint8_t bits = fuzz_take(in);
    const unsigned transform = bits & JPEG_TRANSFORM_MASK;
    p[RF_PARAM_TRANSFORM] =
        transform > RF_TRANSFORM_EVAL ? RF_TRANSFORM_TRAIN : transform;
    p[RF_PARAM_FLIP] = (bits & JPEG_FLIP) != 0;
    p[RF_PARAM_LAYOUT] = bits & JPEG_NCHW ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC;
    p[RF_PARAM_CHANNELS] = bits & JPEG_GRAY ? 1 : 3;
    p[RF_PARAM_HEIGHT] = fuzz_take(in) % 64 + 1;
    p[RF_PARAM_WIDTH] = fuzz_take(in) % 64 + 1;
    p[RF_PARAM_MIN_SCALE_PPM] = (fuzz_take(in) + 1) * 1000000 / 256;
    p[RF_PARAM_RESIZE] = (int64_t)fuzz_take(in) * 2;
    p[RF_PARAM_SEED] = fuzz_take(in);
    p[RF_PARAM_SEED] |= fuzz_take(in) << 8;
    *opt = (struct rf__jpeg_options){
        .max_pixels = FUZZ_MAX_PIXELS,
        .max_scans = 100,
        .max_decode_memory = FUZZ_MAX_DECODE_MEMORY,
        .warnings_are_errors = !(bits & JPEG_WARNINGS_OK),
        .accept_truncated = (bits & JPEG_WARNINGS_OK) != 0,
        .exif_orientation = (bits & JPEG_EXIF) != 0};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct rf__jpeg_decoder *dec;
    if (!dec)
        dec = rf__jpeg_decoder_new();
    if (!dec)
        abort();
    struct fuzz_bytes in = {data, size};
    int64_t params[RF__PARAMS] = {0};
    struct rf__jpeg_options opt;
    read_params(&in, params, &opt);
    struct crop_request request = {.seed = (uint64_t)params[RF_PARAM_SEED]};
    request.index = fuzz_take(&in);
    rf__transform_from_params(&request.spec, params);
    struct rf__jpeg_target target = {
        .out_height = (uint32_t)params[RF_PARAM_HEIGHT],
        .out_width = (uint32_t)params[RF_PARAM_WIDTH],
        .channels = (uint32_t)params[RF_PARAM_CHANNELS],
        .layout = (rf_layout)params[RF_PARAM_LAYOUT]};
    /* exactly the slot's bytes, so that a write past them is seen */
    const size_t bytes =
        (size_t)target.out_height * target.out_width * target.channels;
    target.dst = malloc(bytes);
    if (!target.dst)
        abort();
    char err[256];
    (void)rf__jpeg_decode(dec, in.data, in.size, &opt, choose_crop, &request,
                          &target, err, sizeof(err));
    free(target.dst);
    return 0;
}
