/*
 * test-verdicts.c - which damaged JPEGs decode: by default, exactly those
 * that PIL (torchvision's default loader) decodes.
 *
 * Each kind of file is made from a clean synthetic JPEG: extraneous bytes
 * before a marker (libjpeg warns; common in scraped data), corrupt
 * entropy-coded data, a stray marker in it (0xff 0x38: bit rot), a file
 * cut short at half and with only its end marker missing, garbage. PIL's
 * verdict comes from Debian's python3-pil (Image.open + load,
 * LOAD_TRUNCATED_IMAGES left off); ringfeed's from rf_dataset_decode() of
 * the whole image (transform none, full scale), and of an eval crop that
 * stops above the last rows (the verdict must not depend on the crop).
 * The default (RF_JPEG_AS_PIL) must agree with PIL on every file;
 * RF_JPEG_STRICT refuses every file libjpeg warned about; RF_JPEG_LENIENT
 * decodes every one that decodes at all, the truncated ones included.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "scratch.h"
#include "test.h"

enum kind {
    CLEAN,
    EXTRANEOUS,
    CORRUPT,
    STRAY_MARKER,
    HALF,
    NO_EOI,
    GARBAGE,
    KINDS
};

static const char *const kind_name[KINDS] = {
    "clean", "extraneous", "corrupt", "stray-marker",
    "half",  "no-eoi",     "garbage"};

/* libjpeg warns about (so strict refuses) */
static const bool warned[KINDS] = {false, true, true, true, true, true, false};
/* decodes at all (so lenient accepts): a stray marker is an error at the
 * end of the image data, after the warning */
static const bool decodable[KINDS] = {true, true, true, false,
                                      true, true, false};

static char folder[512];

/* The offset of the first `marker` (0xff, code) at or after `from`. */
static size_t find_marker(const uint8_t *p, size_t size, uint8_t code,
                          size_t from)
{
    for (size_t i = from; i + 1 < size; i++)
        if (p[i] == 0xff && p[i + 1] == code)
            return i;
    CHECK(!"marker not found");
    return 0;
}

/* The bytes of one kind of file, made from a clean JPEG; malloc'd. */
static uint8_t *make_kind(enum kind k, const uint8_t *jpeg, size_t size,
                          size_t *out_size)
{
    uint8_t *p = malloc(size + 16);
    CHECK(p != NULL);
    memcpy(p, jpeg, size);
    *out_size = size;
    if (k == EXTRANEOUS) {
        /* 5 stray bytes before the start-of-scan marker */
        const size_t sos = find_marker(p, size, 0xda, 2);
        memmove(p + sos + 5, p + sos, size - sos);
        memset(p + sos, 0x00, 5);
        *out_size = size + 5;
    } else if (k == CORRUPT) {
        for (size_t i = size / 2; i < size / 2 + 48; i++)
            p[i] = p[i] == 0x00 ? 0xfe : (uint8_t)(p[i] ^ 0x5a) & 0xfe;
    } else if (k == STRAY_MARKER) {
        /* 0xff 0x38 a third of the way into the image data */
        const size_t sos = find_marker(p, size, 0xda, 2);
        const size_t at = sos + (size - sos) / 3;
        memmove(p + at + 2, p + at, size - at);
        p[at] = 0xff;
        p[at + 1] = 0x38;
        *out_size = size + 2;
    } else if (k == HALF) {
        *out_size = size / 2;
    } else if (k == NO_EOI) {
        *out_size = size - 2; /* the entropy data whole, no end marker */
    } else if (k == GARBAGE) {
        memset(p, 0x42, size);
    }
    return p;
}

static void make_files(void)
{
    scratch_make(folder, sizeof(folder), "verdicts");
    char path[700];
    snprintf(path, sizeof(path), "%s/c", folder);
    CHECK_EQ(mkdir(path, 0755), 0);
    void *jpeg = NULL;
    size_t size = 0;
    CHECK_OK(rf_synthetic_jpeg(11, 1, 96, 64, &jpeg, &size));
    for (int k = 0; k < KINDS; k++) {
        size_t n = 0;
        uint8_t *bytes = make_kind((enum kind)k, jpeg, size, &n);
        snprintf(path, sizeof(path), "%s/c/%d-%s.jpg", folder, k, kind_name[k]);
        write_file(path, bytes, n);
        free(bytes);
    }
    free(jpeg);
}

/* PIL's verdict on each file, in kind order; false when PIL is missing. */
static bool pil_verdicts(bool *ok)
{
    static const char *const pythons[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd),
                 "%s -c 'import sys, glob\n"
                 "from PIL import Image\n"
                 "for f in sorted(glob.glob(sys.argv[1] + \"/c/*.jpg\")):\n"
                 "    try:\n"
                 "        Image.open(f).load(); print(\"ok\")\n"
                 "    except Exception as e:\n"
                 "        print(\"refused\")\n' %s 2>/dev/null",
                 pythons[i], folder);
        FILE *f = popen(cmd, "r");
        if (!f)
            continue;
        char line[64];
        int n = 0;
        while (n < KINDS && fgets(line, sizeof(line), f))
            ok[n++] = strncmp(line, "ok", 2) == 0;
        if (pclose(f) == 0 && n == KINDS)
            return true;
    }
    return false;
}

/* ringfeed's verdict on file k under `verdict`, and its reason: of the
 * whole image, or (crop) of eval's centre 32 x 32, whose decode stops
 * above the last rows. */
static bool ringfeed_decodes_as(rf_dataset *ds, int k, rf_jpeg_verdict verdict,
                                bool crop, char *reason, size_t len)
{
    rf_config *cfg = rf_config_create();
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, crop ? 32 : 64));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, crop ? 32 : 96));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_TRANSFORM,
                           crop ? RF_TRANSFORM_EVAL : RF_TRANSFORM_NONE));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_DCT_SCALING, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_JPEG_WARNINGS, verdict));
    static uint8_t pixels[64 * 96 * 3];
    const int rc = rf_dataset_decode(ds, cfg, 0, (uint64_t)k, pixels);
    snprintf(reason, len, "%s", rc < 0 ? rf_dataset_error(ds) : "");
    rf_config_free(cfg);
    return rc == 0;
}

static bool ringfeed_decodes(rf_dataset *ds, int k, rf_jpeg_verdict verdict,
                             char *reason, size_t len)
{
    return ringfeed_decodes_as(ds, k, verdict, false, reason, len);
}

static rf_dataset *open_files(void)
{
    make_files();
    rf_dataset *ds = NULL;
    CHECK_OK(rf_dataset_open(&ds, folder, NULL));
    CHECK_EQ(rf_dataset_size(ds), KINDS);
    return ds;
}

TEST_CASE(default_agrees_with_pil, "verdicts",
          "the default decodes exactly what PIL decodes")
{
    rf_dataset *ds = open_files();
    bool pil[KINDS];
    if (!pil_verdicts(pil)) {
        rf_dataset_close(ds);
        remove_tree(folder);
        TEST_SKIP_BECAUSE("no python3 with PIL (python3-pil)");
    }
    for (int k = 0; k < KINDS; k++) {
        char reason[512];
        const bool ours =
            ringfeed_decodes(ds, k, RF_JPEG_AS_PIL, reason, sizeof(reason));
        printf("  %-12s PIL %-7s ringfeed %-7s %s\n", kind_name[k],
               pil[k] ? "decodes" : "refuses", ours ? "decodes" : "refuses",
               reason);
        CHECK_EQ(ours, pil[k]);
        /* a centre crop's decode, which stops above the last rows: the
         * same verdict (a stray marker in the rows it read was let
         * through) */
        CHECK_EQ(ringfeed_decodes_as(ds, k, RF_JPEG_AS_PIL, true, reason,
                                     sizeof(reason)),
                 pil[k]);
    }
    rf_dataset_close(ds);
    remove_tree(folder);
}

TEST_CASE(strict_and_lenient, "verdicts",
          "strict refuses warnings, lenient accepts truncation")
{
    rf_dataset *ds = open_files();
    for (int k = 0; k < KINDS; k++) {
        char reason[512];
        CHECK_EQ(
            ringfeed_decodes(ds, k, RF_JPEG_STRICT, reason, sizeof(reason)),
            !warned[k] && decodable[k]);
        CHECK_EQ(
            ringfeed_decodes(ds, k, RF_JPEG_LENIENT, reason, sizeof(reason)),
            decodable[k]);
    }
    /* what a refusal says to change */
    char reason[512];
    CHECK(!ringfeed_decodes(ds, HALF, RF_JPEG_AS_PIL, reason, sizeof(reason)));
    CHECK_CONTAINS(reason, "c/4-half.jpg");
    CHECK_CONTAINS(reason, "truncated");
    CHECK_CONTAINS(reason, "(RF_PARAM_JPEG_WARNINGS RF_JPEG_LENIENT accepts");
    rf_dataset_close(ds);
    remove_tree(folder);
}

TEST_CASE(names_of_the_choices, "verdicts", "the parameter's default")
{
    rf_param_info info;
    CHECK_OK(rf_param_lookup(RF_PARAM_JPEG_WARNINGS, &info));
    CHECK_EQ(info.default_value, RF_JPEG_AS_PIL);
    CHECK(strcmp(info.choices, "pil lenient strict") == 0);
    CHECK_CONTAINS(info.name, "jpeg_warnings");
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
