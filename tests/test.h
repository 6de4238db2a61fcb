/*
 * test.h - assertions for ringfeed's test programs. A failed check prints
 * the file, line, the expression and both values, then exits 1; exit 77
 * means "skipped" (automake's convention).
 */
#ifndef RF_TEST_H
#define RF_TEST_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

#define TEST_SKIP 77

/* folder/<formatted fmt>, in one of 4 rotating buffers: the last four
 * paths made stay valid, so a call may take two or three of them. */
static inline const char *test_vpath(const char *folder, const char *fmt,
                                     va_list ap)
{
    static char buffers[4][1024];
    static unsigned next;
    char *out = buffers[next++ % 4];
    const size_t used = (size_t)snprintf(out, 1024, "%s/", folder);
    vsnprintf(out + used, 1024 - used, fmt, ap);
    return out;
}

static inline const char *test_path(const char *folder, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* test_vpath() with the arguments in line: a program's at(...) is
 * test_path(its scratch folder, ...). */
static inline const char *test_path(const char *folder, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *path = test_vpath(folder, fmt, ap);
    va_end(ap);
    return path;
}

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#define CHECK_INT_OP_(a, op, b)                                                \
    do {                                                                       \
        const long long a_ = (long long)(a), b_ = (long long)(b);              \
        if (!(a_ op b_)) {                                                     \
            fprintf(stderr, "%s:%d: %s %s %s failed: %lld vs %lld\n",          \
                    __FILE__, __LINE__, #a, #op, #b, a_, b_);                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#define CHECK_EQ(a, b) CHECK_INT_OP_(a, ==, b)
#define CHECK_NE(a, b) CHECK_INT_OP_(a, !=, b)
#define CHECK_LT(a, b) CHECK_INT_OP_(a, <, b)
#define CHECK_LE(a, b) CHECK_INT_OP_(a, <=, b)
#define CHECK_GT(a, b) CHECK_INT_OP_(a, >, b)
#define CHECK_GE(a, b) CHECK_INT_OP_(a, >=, b)

/* Checks that `haystack` contains `needle`, printing both otherwise. */
#define CHECK_CONTAINS(haystack, needle)                                       \
    do {                                                                       \
        const char *h_ = (haystack), *n_ = (needle);                           \
        if (!h_ || !strstr(h_, n_)) {                                          \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n",         \
                    __FILE__, __LINE__, h_ ? h_ : "(null)", n_);               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* Checks that two strings are equal, printing both otherwise. */
#define CHECK_STR_EQ(actual, expected)                                         \
    do {                                                                       \
        const char *a_ = (actual), *e_ = (expected);                           \
        if (!a_ || strcmp(a_, e_) != 0) {                                      \
            fprintf(stderr, "%s:%d: \"%s\" is not \"%s\"\n", __FILE__,         \
                    __LINE__, a_ ? a_ : "(null)", e_);                         \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A call returning 0 / -errno / RF_E_*: fails with rf_strerror's words. */
#define CHECK_OK(call)                                                         \
    do {                                                                       \
        const int rc_ = (call);                                                \
        if (rc_ < 0) {                                                         \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__,          \
                    __LINE__, #call, rc_, rf_strerror(rc_));                   \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* tests/<name>, a file beside the test sources: under $srcdir when make
 * runs the test, else beside this header as the compiler saw it (a
 * program run by hand from the build folder). */
static inline void test_source_file(char *path, size_t len, const char *name)
{
    const char *srcdir = getenv("srcdir");
    if (srcdir) {
        snprintf(path, len, "%s/tests/%s", srcdir, name);
        return;
    }
    snprintf(path, len, "%s", __FILE__);
    const char *slash = strrchr(path, '/');
    const size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    snprintf(path + dir, len - dir, "%s", name);
}

/* Exactly n bytes of what the shell command writes on its stdout, in
 * malloc'd memory; the command must exit 0. */
static inline uint8_t *test_command_output(const char *cmd, size_t n)
{
    FILE *p = popen(cmd, "r");
    CHECK(p);
    uint8_t *out = malloc(n);
    CHECK(out);
    CHECK_EQ(fread(out, 1, n, p), n);
    CHECK_EQ(pclose(p), 0);
    return out;
}

/* Opens a loader or fails the test, printing open's detail. */
static inline rf_loader *test_open_loader(const rf_config *cfg)
{
    rf_loader *l = NULL;
    char *err = NULL;
    const int rc = rf_loader_open(&l, cfg, &err);
    if (rc < 0)
        fprintf(stderr, "rf_loader_open: %s\n", err ? err : "");
    free(err);
    CHECK_OK(rc);
    return l;
}

/* One parameter's value in a TEST_CONFIG() list. */
struct test_param {
    rf_param param;
    int64_t value;
};

/* A config with each listed parameter set, in order, or a failed test
 * naming the parameter rf_config_set() refused. */
static inline rf_config *test_config_(const struct test_param *params,
                                      size_t count)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    for (size_t i = 0; i < count; i++) {
        const int rc = rf_config_set(cfg, params[i].param, params[i].value);
        if (rc < 0)
            fprintf(stderr, "rf_config_set(parameter %d, %lld): %s\n",
                    (int)params[i].param, (long long)params[i].value,
                    rf_strerror(rc));
        CHECK_OK(rc);
    }
    return cfg;
}

/* TEST_CONFIG({RF_PARAM_PRODUCERS, 1}, {RF_PARAM_QUIET, 1}): a new config
 * with these values and the defaults elsewhere. The caller frees it. */
#define TEST_CONFIG(...)                                                       \
    test_config_((const struct test_param[]){__VA_ARGS__},                     \
                 sizeof((const struct test_param[]){__VA_ARGS__}) /            \
                     sizeof(struct test_param))

/* Opens a loader with TEST_CONFIG(...)'s parameters, or fails the test. */
#define TEST_OPEN_LOADER(...) test_open_config_(TEST_CONFIG(__VA_ARGS__))

static inline rf_loader *test_open_config_(rf_config *cfg)
{
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    return l;
}

/* Checks that opening a loader with cfg fails with `want` and makes no
 * loader; returns open's detail, which the caller frees. */
static inline char *test_open_refused(const rf_config *cfg, int want)
{
    rf_loader *l = NULL;
    char *err = NULL;
    const int rc = rf_loader_open(&l, cfg, &err);
    if (rc != want)
        fprintf(stderr, "rf_loader_open: %s\n", err ? err : "");
    CHECK_EQ(rc, want);
    CHECK(l == NULL);
    CHECK(err);
    return err;
}

/* Takes one batch and gives it back: the loader has started and its
 * producers are delivering. */
static inline void test_pass_one_batch(rf_loader *l)
{
    rf_batch b;
    CHECK_EQ(rf_loader_next(l, &b), 1);
    CHECK_OK(rf_loader_release(l, &b));
}

/* The skip policy with the given limits (0 errors: no count limit). */
static inline void test_set_skip(rf_config *cfg, int64_t max_errors,
                                 int64_t max_ppm)
{
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ON_ERROR, RF_ON_ERROR_SKIP));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_ERRORS, max_errors));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_MAX_ERROR_PPM, max_ppm));
}

/* Takes every batch until next() stops; returns what it stopped with and
 * adds the samples delivered and skipped (either may be NULL). */
static inline int test_drain(rf_loader *l, uint64_t *samples, uint64_t *skipped)
{
    rf_batch b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) > 0) {
        if (samples)
            *samples += b.samples;
        if (skipped)
            *skipped += b.skipped;
        CHECK_OK(rf_loader_release(l, &b));
    }
    return rc;
}

/* Creates a pack writer or fails the test, printing create's detail. */
static inline rf_pack_writer *
test_create_pack(const char *path, uint32_t height, uint32_t width,
                 uint32_t channels, rf_layout layout, const void *dict,
                 size_t dict_size)
{
    rf_pack_writer *w = NULL;
    char *why = NULL;
    const int rc = rf_pack_writer_create(&w, path, height, width, channels,
                                         layout, dict, dict_size, &why);
    if (rc < 0)
        fprintf(stderr, "create %s: %s\n", path, why ? why : "");
    free(why);
    CHECK_OK(rc);
    return w;
}

/* Finishes a pack or fails the test, printing finish's detail. */
static inline void test_finish_pack(rf_pack_writer *w)
{
    char *why = NULL;
    const int rc = rf_pack_writer_finish(w, &why);
    if (rc < 0)
        fprintf(stderr, "finish: %s\n", why ? why : "");
    free(why);
    CHECK_OK(rc);
}

/* What a loader's message handler received: how many messages, and the
 * last (cut at its size). rf_config_set_message_handler(cfg,
 * test_collect_message, &messages). */
struct test_messages {
    int count;
    char last[2048];
};

static inline void test_collect_message(void *user, const char *text)
{
    struct test_messages *m = user;
    m->count++;
    snprintf(m->last, sizeof(m->last), "%s", text);
}

#endif /* RF_TEST_H */
