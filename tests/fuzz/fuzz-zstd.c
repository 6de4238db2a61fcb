/*
 * fuzz-zstd.c - a zstd sample from its frame to a slot, through
 * lib/decode.c as a producer decodes it: the declared content size
 * checked against the sample shape, then decompression straight into a
 * buffer of exactly one sample's bytes. The leading ZSTD_PARAM_BYTES bytes
 * (fuzz.h) pick the shape, or the packed file with a dictionary; the rest
 * is the frame. That file is written once, with rf_pack_writer, so the
 * dictionary reaches the decoder the way a packed file's does.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/internal.h"
#include "decode/decode.h"
#include "fuzz.h"

static void default_params(int64_t *p, uint32_t height, uint32_t width,
                           uint32_t channels, rf_layout layout)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        abort();
    memcpy(p, cfg->params, sizeof(cfg->params));
    rf_config_free(cfg);
    p[RF_PARAM_HEIGHT] = height;
    p[RF_PARAM_WIDTH] = width;
    p[RF_PARAM_CHANNELS] = channels;
    p[RF_PARAM_LAYOUT] = layout;
}

/* A packed file with the dictionary and the DICT_ shape, opened and
 * removed: the decoder takes the dictionary from the dataset. */
static rf_dataset *open_dict_pack(void)
{
    char dir[] = "/tmp/rf-fuzz-zstd-XXXXXX";
    char path[sizeof(dir) + 16];
    uint8_t dict[DICT_SIZE];
    fuzz_zstd_dict(dict);
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof(path), "%s/dict.pack", dir);
    rf_pack_writer *w = NULL;
    rf_dataset *ds = NULL;
    if (rf_pack_writer_create(&w, path, DICT_HEIGHT, DICT_WIDTH, DICT_CHANNELS,
                              RF_LAYOUT_NHWC, dict, sizeof(dict), NULL) < 0 ||
        /* one sample, never read: finish refuses a pack without one */
        rf_pack_writer_add(w, RF_SAMPLE_JPEG, "", 0, 0, NULL) < 0 ||
        rf_pack_writer_finish(w, NULL) < 0 ||
        rf_dataset_open(&ds, path, NULL) < 0)
        abort();
    unlink(path);
    rmdir(dir);
    return ds;
}

static struct rf__decoder *dict_decoder(void)
{
    static struct rf__decoder *d;
    if (d)
        return d;
    rf_dataset *ds = open_dict_pack();
    int64_t p[RF__PARAMS];
    default_params(p, DICT_HEIGHT, DICT_WIDTH, DICT_CHANNELS, RF_LAYOUT_NHWC);
    char why[256];
    if (rf__decoder_new(&d, p, ds, why, sizeof(why)) < 0) {
        fprintf(stderr, "fuzz-zstd: %s\n", why);
        abort();
    }
    rf_dataset_close(ds); /* the decoder keeps its own dictionary */
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_bytes in = {data, size};
    const uint8_t bits = fuzz_take(&in);
    uint32_t height = fuzz_take(&in) % 64 + 1;
    uint32_t width = fuzz_take(&in) % 64 + 1;
    uint32_t channels = fuzz_take(&in) % 4 + 1;
    struct rf__decoder *d = NULL;
    if (bits & ZSTD_WITH_DICT) {
        d = dict_decoder();
        height = DICT_HEIGHT;
        width = DICT_WIDTH;
        channels = DICT_CHANNELS;
    } else {
        int64_t p[RF__PARAMS];
        default_params(p, height, width, channels,
                       bits & ZSTD_NCHW ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC);
        char why[256];
        if (rf__decoder_new(&d, p, NULL, why, sizeof(why)) < 0)
            abort();
    }
    /* exactly one sample's bytes, so that a write past them is seen */
    uint8_t *dst = malloc((size_t)height * width * channels);
    if (!dst)
        abort();
    const rf_sample_info info = {
        .data = in.data, .size = in.size, .kind = RF_SAMPLE_ZSTD};
    char err[256];
    (void)rf__decode_sample(d, &info, 0, 0, dst, err, sizeof(err));
    free(dst);
    if (!(bits & ZSTD_WITH_DICT))
        rf__decoder_free(d);
    return 0;
}
