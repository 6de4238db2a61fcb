/*
 * test-params.c - the parameter table (lib/common/params.c) against what
 * depends on it:
 *
 *   - table: every default is what rf_config_create() gives, every range
 *     is what rf_config_set() enforces, names and numbers are unique and
 *     well formed, rf_param_at() ends with -ERANGE;
 *   - abi: each 0.1 number still names its parameter (written out here
 *     from 0.1's header, not taken from the table), each parameter lies in
 *     its area's band, and numbers that name nothing are refused;
 *   - docs: ringfeed.h's comment on each parameter states the table's
 *     number, old number, default and range;
 *   - bench: `ringfeed-bench --help` shows the table's defaults.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/params.h"
#include "harness.h"
#include "test.h"

/* Every parameter: the parameters of ringfeed 0.1 by their 0.1 numbers,
 * then those added since (old 0, NEW_IN_0_2 in params.c), and the band
 * (area) each belongs to now. */
static const struct {
    int old;
    rf_param param;
    int area;
} published[] = {
    {1, RF_PARAM_BATCH_SIZE, 0},
    {2, RF_PARAM_HEIGHT, 0},
    {3, RF_PARAM_WIDTH, 0},
    {4, RF_PARAM_CHANNELS, 0},
    {5, RF_PARAM_LAYOUT, 0},
    {6, RF_PARAM_PRODUCERS, 6},
    {7, RF_PARAM_SLOTS, 6},
    {8, RF_PARAM_SEED, 1},
    {9, RF_PARAM_EPOCHS, 1},
    {10, RF_PARAM_DROP_LAST, 0},
    {11, RF_PARAM_ORDERED, 1},
    {12, RF_PARAM_SOURCE, 2},
    {13, RF_PARAM_SAMPLES, 2},
    {14, RF_PARAM_CLASSES, 2},
    {15, RF_PARAM_SHUFFLE, 1},
    {16, RF_PARAM_START_MODE, 6},
    {17, RF_PARAM_SPIN_NS, 6},
    {18, RF_PARAM_PIN_PRODUCERS, 6},
    {19, RF_PARAM_RANK, 1},
    {20, RF_PARAM_WORLD_SIZE, 1},
    {21, RF_PARAM_SHARD_PAD, 1},
    {22, RF_PARAM_START_EPOCH, 1},
    {23, RF_PARAM_START_BATCH, 1},
    {24, RF_PARAM_TRANSFORM, 3},
    {25, RF_PARAM_RESIZE, 3},
    {26, RF_PARAM_MIN_SCALE_PPM, 3},
    {27, RF_PARAM_FLIP, 3},
    {28, RF_PARAM_ON_ERROR, 4},
    {29, RF_PARAM_MAX_ERRORS, 4},
    {30, RF_PARAM_MAX_ERROR_PPM, 4},
    {31, RF_PARAM_MAX_PIXELS, 4},
    {32, RF_PARAM_MAX_SCANS, 4},
    {33, RF_PARAM_JPEG_WARNINGS, 4},
    {34, RF_PARAM_EXIF_ORIENTATION, 3},
    {35, RF_PARAM_INDEX_CACHE, 2},
    {36, RF_PARAM_ON_PRODUCER_DEATH, 5},
    {37, RF_PARAM_MAX_RESPAWNS, 5},
    {38, RF_PARAM_BATCH_TIMEOUT_MS, 5},
    {39, RF_PARAM_QUIET, 5},
    {40, RF_PARAM_MAX_DECODE_MEMORY, 4},
    {41, RF_PARAM_RESPAWN_WINDOW_S, 5},
    {42, RF_PARAM_DCT_SCALING, 3},
    {0, RF_PARAM_STALL_WARNING_MS, 5},
    {0, RF_PARAM_PILLOW, 3},
};

#define PUBLISHED (sizeof(published) / sizeof(published[0]))

static unsigned param_count(void)
{
    rf_param_info info;
    unsigned n = 0;
    while (rf_param_at(n, &info) == 0)
        n++;
    return n;
}

static rf_param_info info_at(unsigned index)
{
    rf_param_info info;
    CHECK_OK(rf_param_at(index, &info));
    return info;
}

/* Runs check on every parameter in the table, in turn, with one config
 * from rf_config_create() (what a check sets stays set for the next). */
static void check_each_param(void (*check)(rf_config *cfg,
                                           const rf_param_info *info))
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    for (unsigned i = 0; i < param_count(); i++) {
        const rf_param_info info = info_at(i);
        check(cfg, &info);
    }
    rf_config_free(cfg);
}

/* The parameter's default is what a new config holds, inside its range. */
static void check_default(rf_config *cfg, const rf_param_info *info)
{
    int64_t value;
    CHECK_OK(rf_config_get(cfg, info->param, &value));
    if (value != info->default_value)
        fprintf(stderr, "%s\n", info->name);
    CHECK_EQ(value, info->default_value);
    CHECK_GE(info->default_value, info->min);
    CHECK_LE(info->default_value, info->max);
}

TEST_CASE(defaults_are_what_create_gives, "table",
          "defaults are what rf_config_create gives")
{
    check_each_param(check_default);
}

/* value is refused, names the parameter, and changes nothing. */
static void check_refused(rf_config *cfg, const rf_param_info *info,
                          int64_t value)
{
    int64_t before, after;
    CHECK_OK(rf_config_get(cfg, info->param, &before));
    CHECK_EQ(rf_config_set(cfg, info->param, value), -EINVAL);
    /* by its C name, RF_PARAM_BATCH_SIZE, as C code sets it */
    char c_name[80] = "RF_PARAM_";
    for (size_t i = 0; info->name[i] && 9 + i + 1 < sizeof(c_name); i++) {
        c_name[9 + i] = (char)toupper((unsigned char)info->name[i]);
        c_name[10 + i] = '\0';
    }
    CHECK_CONTAINS(rf_config_error(cfg), c_name);
    /* a choice with every value's enumerator and number: "RF_LAYOUT_NHWC
     * (0) or RF_LAYOUT_NCHW (1)" */
    if (info->kind == RF_PARAM_KIND_CHOICE) {
        char last[32];
        snprintf(last, sizeof(last), " (%lld)", (long long)info->max);
        CHECK_CONTAINS(rf_config_error(cfg), last);
        CHECK_CONTAINS(rf_config_error(cfg), " or RF_");
    }
    CHECK_OK(rf_config_get(cfg, info->param, &after));
    CHECK_EQ(after, before);
}

static void check_accepted(rf_config *cfg, const rf_param_info *info,
                           int64_t value)
{
    int64_t got;
    CHECK_OK(rf_config_set(cfg, info->param, value));
    CHECK_OK(rf_config_get(cfg, info->param, &got));
    CHECK_EQ(got, value);
}

/* rf_config_set() takes the parameter's min and max, refuses one past
 * either, and the table's range is the library's own. */
static void check_range(rf_config *cfg, const rf_param_info *info)
{
    CHECK_LE(info->min, info->max);
    check_accepted(cfg, info, info->min);
    check_accepted(cfg, info, info->max);
    if (info->min > INT64_MIN)
        check_refused(cfg, info, info->min - 1);
    if (info->max < INT64_MAX)
        check_refused(cfg, info, info->max + 1);
    int64_t lo, hi;
    CHECK(rf__param_range(info->param, &lo, &hi));
    CHECK_EQ(lo, info->min);
    CHECK_EQ(hi, info->max);
}

TEST_CASE(ranges_are_enforced, "table",
          "min and max are enforced by rf_config_set")
{
    check_each_param(check_range);
}

static bool is_identifier(const char *name)
{
    if (!islower((unsigned char)name[0]))
        return false;
    for (const char *c = name; *c; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) &&
            *c != '_')
            return false;
    return true;
}

static unsigned words_in(const char *text)
{
    unsigned n = 0;
    for (const char *c = text; *c; c++)
        n += (c == text || c[-1] == ' ') && *c != ' ';
    return n;
}

static void check_row(const rf_param_info *info)
{
    CHECK(info->name && is_identifier(info->name));
    CHECK(info->doc && info->doc[0] != '\0');
    CHECK(!strchr(info->doc, '\n'));
    CHECK_NE(info->doc[strlen(info->doc) - 1], '.');
    CHECK_GE(info->param, RF__PARAM_FIRST);
    CHECK_LT(info->param, RF__PARAMS);
    if (info->kind == RF_PARAM_KIND_BOOLEAN) {
        CHECK_EQ(info->min, 0);
        CHECK_EQ(info->max, 1);
    }
    CHECK_EQ(info->kind == RF_PARAM_KIND_CHOICE, info->choices != NULL);
    if (info->choices) {
        CHECK_EQ(words_in(info->choices), info->max - info->min + 1);
        CHECK(!strstr(info->choices, "  "));
    }
}

TEST_CASE(rows_are_unique_and_well_formed, "table",
          "names and numbers unique and well formed")
{
    const unsigned n = param_count();
    CHECK_EQ(n, PUBLISHED); /* a new parameter: add it to this test too */
    for (unsigned i = 0; i < n; i++) {
        const rf_param_info a = info_at(i);
        check_row(&a);
        if (i > 0) /* in increasing number, so numbers are unique */
            CHECK_GT(a.param, info_at(i - 1).param);
        for (unsigned j = 0; j < i; j++)
            CHECK(strcmp(a.name, info_at(j).name) != 0);
    }
}

TEST_CASE(past_the_end_is_erange, "table",
          "rf_param_at past the end is -ERANGE")
{
    rf_param_info info, untouched;
    memset(&info, 0xA5, sizeof(info));
    untouched = info;
    CHECK_EQ(rf_param_at(param_count(), &info), -ERANGE);
    CHECK_EQ(rf_param_at(UINT_MAX, &info), -ERANGE);
    CHECK(memcmp(&info, &untouched, sizeof(info)) == 0);
    CHECK_EQ(rf_param_at(0, NULL), -EINVAL);
    CHECK_EQ(rf_param_lookup(RF_PARAM_SEED, NULL), -EINVAL);
}

TEST_CASE(old_numbers_map_to_their_parameter, "abi",
          "0.1 numbers map to their parameter")
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    for (size_t i = 0; i < PUBLISHED; i++) {
        if (published[i].old == 0)
            continue; /* added since 0.1 */
        const rf_param old = (rf_param)published[i].old;
        rf_param_info by_old, by_new;
        CHECK_OK(rf_param_lookup(old, &by_old));
        CHECK_OK(rf_param_lookup(published[i].param, &by_new));
        CHECK_EQ(by_old.param, published[i].param);
        CHECK(strcmp(by_old.name, by_new.name) == 0);
        /* Set through one number, read through either. */
        const int64_t value = by_new.max;
        int64_t got;
        CHECK_OK(rf_config_set(cfg, old, value));
        CHECK_OK(rf_config_get(cfg, published[i].param, &got));
        CHECK_EQ(got, value);
        CHECK_OK(rf_config_set(cfg, published[i].param, by_new.min));
        CHECK_OK(rf_config_get(cfg, old, &got));
        CHECK_EQ(got, by_new.min);
    }
    rf_config_free(cfg);
}

TEST_CASE(parameters_lie_in_their_bands, "abi",
          "parameters lie in their area's band")
{
    for (size_t i = 0; i < PUBLISHED; i++) {
        const int number = (int)published[i].param;
        CHECK_EQ((number - RF__PARAM_FIRST) / RF__PARAM_BAND,
                 published[i].area);
        CHECK_LT(published[i].area, RF__PARAM_AREAS);
    }
}

static bool is_parameter(int number)
{
    rf_param_info info;
    return rf_param_lookup((rf_param)number, &info) == 0;
}

TEST_CASE(other_numbers_are_refused, "abi", "other numbers are refused")
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    int64_t value;
    for (int number = -2; number < RF__PARAMS + 64; number++) {
        bool named = false;
        for (size_t i = 0; i < PUBLISHED; i++)
            named = named ||
                    (published[i].old != 0 && number == published[i].old) ||
                    number == (int)published[i].param;
        CHECK_EQ(is_parameter(number), named);
        if (named)
            continue;
        CHECK_EQ(rf_config_set(cfg, (rf_param)number, 0), -EINVAL);
        CHECK_CONTAINS(rf_config_error(cfg), "not a parameter");
        CHECK_EQ(rf_config_get(cfg, (rf_param)number, &value), -EINVAL);
    }
    rf_config_free(cfg);
}

/* ---- ringfeed.h --------------------------------------------------------- */

/* The file at path, whole, with each run of blanks as one space. */
static char *read_squeezed(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t len = 0, cap = 1 << 16;
    char *text = malloc(cap);
    CHECK(text);
    int c, last = 0;
    while ((c = fgetc(f)) != EOF) {
        if (isspace(c))
            c = ' ';
        if (c == ' ' && last == ' ')
            continue;
        if (len + 1 >= cap) {
            cap *= 2;
            char *grown = realloc(text, cap);
            CHECK(grown);
            text = grown;
        }
        text[len++] = (char)c;
        last = c;
    }
    text[len] = '\0';
    fclose(f);
    return text;
}

/* The forms ringfeed.h writes v in: decimal, 2^k, 2^k-1 or 10^k; at most
 * three of them fit one value. */
static unsigned number_forms(int64_t v, char forms[4][32])
{
    unsigned n = 0;
    snprintf(forms[n++], 32, "%lld", (long long)v);
    for (int k = 2; k < 63; k++) {
        const int64_t p = INT64_C(1) << k;
        if (v == p)
            snprintf(forms[n++], 32, "2^%d", k);
        else if (v == p - 1)
            snprintf(forms[n++], 32, "2^%d-1", k);
    }
    if (v == INT64_MAX)
        snprintf(forms[n++], 32, "2^63-1");
    int64_t p = 1000000;
    for (int k = 6; k <= 18; k++) {
        if (v == p)
            snprintf(forms[n++], 32, "10^%d", k);
        if (k < 18) /* 10^19 is past INT64_MAX */
            p *= 10;
    }
    return n;
}

static bool mentions_range(const char *comment, const rf_param_info *info)
{
    char lo[4][32], hi[4][32], range[80];
    const unsigned nlo = number_forms(info->min, lo);
    const unsigned nhi = number_forms(info->max, hi);
    for (unsigned a = 0; a < nlo; a++) {
        for (unsigned b = 0; b < nhi; b++) {
            snprintf(range, sizeof(range), "%.31s..%.31s", lo[a], hi[b]);
            if (strstr(comment, range))
                return true;
        }
    }
    return false;
}

static bool mentions_default(const char *comment, const rf_param_info *info)
{
    char forms[4][32], text[80];
    if (info->kind == RF_PARAM_KIND_CHOICE) {
        /* "default RF_LAYOUT_NHWC": the enumerator of the default's name */
        char upper[32] = "_";
        const char *w = info->choices;
        for (int64_t i = info->min; i < info->default_value; i++)
            w = strchr(w, ' ') + 1;
        for (size_t k = 0; w[k] && w[k] != ' ' && k < 30; k++)
            upper[k + 1] = w[k] == '-' ? '_' : (char)toupper(w[k]);
        const char *at = strstr(comment, "default RF_");
        return at && strstr(at, upper);
    }
    const unsigned n = number_forms(info->default_value, forms);
    for (unsigned i = 0; i < n; i++) {
        snprintf(text, sizeof(text), "default %.31s", forms[i]);
        if (strstr(comment, text))
            return true;
        snprintf(text, sizeof(text), "%.31s (default", forms[i]);
        if (strstr(comment, text))
            return true;
    }
    return false;
}

TEST_CASE(header_states_the_table, "docs",
          "ringfeed.h states numbers, defaults and ranges")
{
    const char *srcdir = getenv("srcdir");
    if (!srcdir)
        TEST_SKIP_BECAUSE("$srcdir is not set (make check sets it)");
    char path[4096];
    snprintf(path, sizeof(path), "%s/include/ringfeed.h", srcdir);
    char *header = read_squeezed(path);
    if (!header)
        TEST_SKIP_BECAUSE("cannot read %s", path);
    for (size_t i = 0; i < PUBLISHED; i++) {
        rf_param_info info;
        CHECK_OK(rf_param_lookup(published[i].param, &info));
        char start[128], upper[64];
        size_t k = 0;
        for (; k < sizeof(upper) - 1 && info.name[k]; k++)
            upper[k] = (char)toupper((unsigned char)info.name[k]);
        upper[k] = '\0';
        snprintf(start, sizeof(start), "RF_PARAM_%s = %d", upper,
                 (int)info.param);
        const char *at = strstr(header, start);
        if (!at)
            fprintf(stderr, "ringfeed.h lacks \"%s\"\n", start);
        CHECK(at);
        char comment[4096];
        const char *open = strstr(at, "/*"), *close = strstr(at, "*/");
        CHECK(open && close && open < close);
        snprintf(comment, sizeof(comment), "%.*s", (int)(close - open), open);
        char was[32] = "/* new in 0.2;";
        if (published[i].old != 0)
            snprintf(was, sizeof(was), "/* was %d;", published[i].old);
        CHECK_CONTAINS(comment, was);
        if (!mentions_default(comment, &info))
            fprintf(stderr, "%s: the comment does not say its default\n",
                    start);
        CHECK(mentions_default(comment, &info));
        if (info.kind == RF_PARAM_KIND_INTEGER && info.min > INT64_MIN &&
            !mentions_range(comment, &info))
            fprintf(stderr, "%s: the comment does not say %lld..%lld\n", start,
                    (long long)info.min, (long long)info.max);
        CHECK(info.kind != RF_PARAM_KIND_INTEGER || info.min == INT64_MIN ||
              mentions_range(comment, &info));
    }
    free(header);
}

/* ---- ringfeed-bench --help ---------------------------------------------- */

/* The line of `help` that describes --option (one that starts with it),
 * into line. */
static bool help_line(const char *help, const char *option, char *line,
                      size_t len)
{
    char start[64];
    snprintf(start, sizeof(start), "\n  --%s ", option);
    const char *at = strstr(help, start);
    if (!at)
        return false;
    at++; /* past the newline */
    snprintf(line, len, "%.*s", (int)strcspn(at, "\n"), at);
    return true;
}

static char *bench_help(void)
{
    const char *tools = getenv("RINGFEED_TOOLS");
    if (!tools)
        TEST_SKIP_BECAUSE("$RINGFEED_TOOLS is not set (make check sets it)");
    char command[4096];
    snprintf(command, sizeof(command), "'%s/ringfeed-bench' --help", tools);
    FILE *p = popen(command, "r");
    CHECK(p);
    static char help[1 << 16];
    const size_t n = fread(help, 1, sizeof(help) - 1, p);
    help[n] = '\0';
    CHECK_EQ(pclose(p), 0);
    return help;
}

TEST_CASE_LIMIT(bench_help_shows_the_defaults, "bench",
                "ringfeed-bench --help shows the table's defaults", 60)
{
    static const struct {
        const char *option;
        rf_param param;
    } options[] = {
        {"producers", RF_PARAM_PRODUCERS},
        {"slots", RF_PARAM_SLOTS},
        {"epochs", RF_PARAM_EPOCHS},
        {"samples", RF_PARAM_SAMPLES},
        {"size", RF_PARAM_HEIGHT},
        {"channels", RF_PARAM_CHANNELS},
        {"classes", RF_PARAM_CLASSES},
        {"spin-ns", RF_PARAM_SPIN_NS},
        {"max-errors", RF_PARAM_MAX_ERRORS},
        {"max-error-ppm", RF_PARAM_MAX_ERROR_PPM},
        {"seed", RF_PARAM_SEED},
        {"source", RF_PARAM_SOURCE},
        {"transform", RF_PARAM_TRANSFORM},
        {"on-error", RF_PARAM_ON_ERROR},
        {"layout", RF_PARAM_LAYOUT},
    };
    const char *help = bench_help();
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        rf_param_info info;
        CHECK_OK(rf_param_lookup(options[i].param, &info));
        char line[1024], want[128];
        CHECK(help_line(help, options[i].option, line, sizeof(line)));
        if (info.kind == RF_PARAM_KIND_CHOICE) {
            const char *w = info.choices;
            for (int64_t k = info.min; k < info.default_value; k++)
                w = strchr(w, ' ') + 1;
            snprintf(want, sizeof(want), "(default %.*s)", (int)strcspn(w, " "),
                     w);
        } else {
            snprintf(want, sizeof(want), "(default %lld)",
                     (long long)info.default_value);
        }
        CHECK_CONTAINS(line, want);
    }
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
