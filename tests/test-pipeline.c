/*
 * test-pipeline.c - end to end on the synthetic source with real producer
 * processes: every sample exactly once per epoch with the right bytes and
 * label, the same batches whatever the number of producers, partial and
 * dropped last batches, in-order and any-order delivery, both layouts,
 * spawn and fork modes, and several batch and slot counts; resuming; rank
 * and world size from torchrun's or Open MPI's environment, and a
 * malformed one refused naming the variable.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "common/internal.h"
#include "harness.h"
#include "test.h"

struct run_spec {
    int64_t producers, slots, batch, samples, epochs;
    int64_t drop_last, ordered, layout, start_mode;
    int64_t start_epoch, start_batch;
    int64_t height, width, channels, seed;
};

static const struct run_spec defaults = {.producers = 2,
                                         .slots = 4,
                                         .batch = 8,
                                         .samples = 100,
                                         .epochs = 2,
                                         .ordered = 1,
                                         .height = 6,
                                         .width = 5,
                                         .channels = 3,
                                         .seed = 11};

/* What a run delivered: a digest per batch sequence number. */
struct run_result {
    uint64_t batches;
    uint64_t digest[64];
};

static uint64_t digest_batch(const rf_batch *b)
{
    uint64_t h = rf__mix64(b->samples, b->sequence);
    const uint8_t *bytes = b->data;
    for (size_t i = 0; i < b->bytes; i++)
        h = rf__mix64(h, bytes[i]);
    for (uint32_t i = 0; i < b->samples; i++)
        h = rf__mix64(rf__mix64(h, b->indices[i]), (uint64_t)b->labels[i]);
    return h;
}

static rf_config *config_of(const struct run_spec *s)
{
    rf_config *cfg = rf_config_create();
    CHECK(cfg);
    CHECK_OK(rf_config_set(cfg, RF_PARAM_PRODUCERS, s->producers));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SLOTS, s->slots));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_BATCH_SIZE, s->batch));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SAMPLES, s->samples));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_EPOCHS, s->epochs));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_DROP_LAST, s->drop_last));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_ORDERED, s->ordered));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_LAYOUT, s->layout));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_MODE, s->start_mode));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_HEIGHT, s->height));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WIDTH, s->width));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CHANNELS, s->channels));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_SEED, s->seed));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_CLASSES, 10));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_EPOCH, s->start_epoch));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_START_BATCH, s->start_batch));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_RANK, 0));
    CHECK_OK(rf_config_set(cfg, RF_PARAM_WORLD_SIZE, 1));
    return cfg;
}

/* Checks one batch's samples against the synthetic source. */
static void check_batch_content(const struct run_spec *s, const rf_batch *b,
                                uint8_t *seen)
{
    uint8_t expect[4096];
    /* The batch describes itself as asked, so that the reference below
     * comes from the spec and not from what the batch says it is. */
    const uint32_t h = (uint32_t)s->height, w = (uint32_t)s->width;
    const uint32_t ch = (uint32_t)s->channels;
    CHECK_EQ(b->layout, (rf_layout)s->layout);
    CHECK_EQ(b->height, h);
    CHECK_EQ(b->width, w);
    CHECK_EQ(b->channels, ch);
    CHECK_EQ(b->sample_bytes, (size_t)h * w * ch);
    CHECK_LE(b->sample_bytes, sizeof(expect));
    CHECK_EQ(b->bytes, b->sample_bytes * b->samples);
    CHECK_EQ((uintptr_t)b->data % 4096, 0);
    for (uint32_t i = 0; i < b->samples; i++) {
        const uint64_t index = b->indices[i];
        CHECK_LT(index, s->samples);
        CHECK_EQ(seen[index], 0);
        seen[index] = 1;
        CHECK_EQ(b->labels[i], rf_synthetic_label(s->seed, index, 10));
        rf_synthetic_fill((uint64_t)s->seed, index, 10, h, w, ch,
                          (rf_layout)s->layout, expect);
        CHECK(memcmp((const uint8_t *)b->data + i * b->sample_bytes, expect,
                     b->sample_bytes) == 0);
    }
}

/* NCHW is NHWC's planes: channel c of pixel p at c * h * w + p, and at
 * p * channels + c in NHWC. Checks the synthetic fill's two layouts
 * against each other, so that an NCHW run compared with the fill is
 * compared with a transpose, not with whatever the fill does. */
static void check_nchw_is_nhwc_planes(const struct run_spec *s, uint64_t index)
{
    uint8_t nchw[4096], nhwc[4096];
    const uint32_t h = (uint32_t)s->height, w = (uint32_t)s->width;
    const uint32_t ch = (uint32_t)s->channels;
    const size_t pixels = (size_t)h * w;
    CHECK_LE(pixels * ch, sizeof(nchw));
    rf_synthetic_fill((uint64_t)s->seed, index, 10, h, w, ch, RF_LAYOUT_NCHW,
                      nchw);
    rf_synthetic_fill((uint64_t)s->seed, index, 10, h, w, ch, RF_LAYOUT_NHWC,
                      nhwc);
    bool planes_differ = false;
    for (size_t p = 0; p < pixels; p++)
        for (uint32_t c = 0; c < ch; c++) {
            CHECK_EQ(nchw[c * pixels + p], nhwc[p * ch + c]);
            planes_differ |= nhwc[p * ch + c] != nhwc[c];
        }
    CHECK(planes_differ); /* a constant image would prove nothing */
}

static uint64_t expected_batches(const struct run_spec *s)
{
    return rf__batches_per_epoch(s->samples, s->batch, s->drop_last);
}

/* The sample count batch `number` of an epoch must have. */
static uint32_t expected_samples(const struct run_spec *s, uint64_t number)
{
    const uint64_t left = s->samples - number * s->batch;
    return left < (uint64_t)s->batch ? (uint32_t)left : (uint32_t)s->batch;
}

static void check_epoch_complete(const struct run_spec *s, const uint8_t *seen)
{
    uint64_t count = 0;
    for (int64_t i = 0; i < s->samples; i++)
        count += seen[i];
    const uint64_t want = expected_batches(s) * s->batch < (uint64_t)s->samples
                              ? expected_batches(s) * s->batch
                              : (uint64_t)s->samples;
    CHECK_EQ(count, want);
}

/* Runs a loader to the end, checking everything; returns per-sequence
 * digests. */
static void run(const struct run_spec *s, struct run_result *out)
{
    rf_config *cfg = config_of(s);
    rf_loader *l = test_open_loader(cfg);
    rf_config_free(cfg);
    const uint64_t per_epoch = expected_batches(s);
    const uint64_t total = per_epoch * (uint64_t)s->epochs;
    const uint64_t first = per_epoch * s->start_epoch + s->start_batch;
    uint8_t *seen = calloc((size_t)s->epochs * s->samples, 1);
    uint8_t *got_seq = calloc(total, 1);
    CHECK(seen && got_seq);
    memset(out, 0, sizeof(*out));
    void *arena = NULL;
    size_t arena_bytes = 0;
    CHECK_OK(rf_loader_arena(l, &arena, &arena_bytes));
    rf_batch b;
    int r;
    while ((r = rf_loader_next(l, &b)) > 0) {
        /* Every batch lies inside the one arena a DMA engine registers. */
        CHECK((uint8_t *)b.data >= (uint8_t *)arena);
        CHECK((uint8_t *)b.data + b.bytes <= (uint8_t *)arena + arena_bytes);
        CHECK_LT(b.sequence, total);
        if (s->ordered)
            CHECK_EQ(b.sequence, first + out->batches);
        CHECK_EQ(got_seq[b.sequence], 0);
        got_seq[b.sequence] = 1;
        CHECK_EQ(b.epoch, b.sequence / per_epoch);
        CHECK_EQ(b.number, b.sequence % per_epoch);
        CHECK_EQ(b.samples, expected_samples(s, b.number));
        check_batch_content(s, &b, seen + b.epoch * s->samples);
        if (b.sequence < 64)
            out->digest[b.sequence] = digest_batch(&b);
        out->batches++;
        CHECK_OK(rf_loader_release(l, &b));
    }
    if (r < 0)
        fprintf(stderr, "next: %s\n", rf_loader_error(l));
    CHECK_EQ(r, 0);
    CHECK_EQ(rf_loader_next(l, &b), 0); /* stays at the end */
    rf_stats st;
    CHECK_OK(rf_loader_stats(l, &st));
    CHECK_EQ(st.slots_free, st.slots); /* every slot came back */
    CHECK_EQ(st.slots_at_producers + st.slots_ready + st.slots_with_user, 0);
    CHECK_EQ(out->batches, total - first);
    for (int64_t e = first ? s->start_epoch + 1 : 0; e < s->epochs; e++)
        check_epoch_complete(s, seen + e * s->samples);
    rf_loader_close(l);
    free(seen);
    free(got_seq);
}

static void check_same_batches(const struct run_result *a,
                               const struct run_result *b)
{
    CHECK_EQ(a->batches, b->batches);
    for (uint64_t i = 0; i < a->batches && i < 64; i++)
        CHECK_EQ(a->digest[i], b->digest[i]);
}

/* Batches of `batch` samples through 1, 3 and 8 slots: 1, 2 and 4
 * producers deliver the same batches. */
static void check_same_batches_any_producers(int64_t batch)
{
    static const int64_t producers[] = {1, 2, 4};
    static const int64_t slots[] = {1, 3, 8};
    for (size_t si = 0; si < 3; si++) {
        struct run_result reference;
        for (size_t pi = 0; pi < 3; pi++) {
            struct run_spec s = defaults;
            s.producers = producers[pi];
            s.batch = batch;
            s.slots = slots[si];
            struct run_result r;
            run(&s, &r);
            if (pi == 0)
                reference = r;
            else
                check_same_batches(&reference, &r);
        }
    }
}

TEST_CASE(test_any_producers_batches_of_1, "delivery",
          "1, 2, 4 producers: same batches of 1")
{
    check_same_batches_any_producers(1);
}

TEST_CASE(test_any_producers_batches_of_7, "delivery",
          "1, 2, 4 producers: same batches of 7")
{
    check_same_batches_any_producers(7);
}

TEST_CASE(test_any_producers_batches_of_32, "delivery",
          "1, 2, 4 producers: same batches of 32")
{
    check_same_batches_any_producers(32);
}

/* A run of `samples` in batches of `batch`, the short last one dropped or
 * not, delivers `per_epoch` batches in each epoch. */
static void check_batches_per_epoch(int64_t samples, int64_t batch,
                                    int64_t drop_last, uint64_t per_epoch)
{
    struct run_spec s = defaults;
    s.samples = samples;
    s.batch = batch;
    s.drop_last = drop_last;
    struct run_result r;
    run(&s, &r);
    CHECK_EQ(r.batches, per_epoch * (uint64_t)s.epochs);
}

TEST_CASE(test_partial_last_batch, "delivery", "partial last batch")
{
    check_batches_per_epoch(100, 32, 0, 4); /* 32, 32, 32, 4 */
}

TEST_CASE(test_dropped_last_batch, "delivery", "dropped last batch")
{
    check_batches_per_epoch(100, 32, 1, 3); /* 32, 32, 32 */
}

TEST_CASE(test_unordered_same_content, "delivery", "any order, same batches")
{
    struct run_spec s = defaults;
    s.ordered = 0;
    s.producers = 4;
    struct run_result unordered, ordered;
    run(&s, &unordered);
    s.ordered = 1;
    run(&s, &ordered);
    check_same_batches(&ordered, &unordered);
}

TEST_CASE(test_nchw_layout, "delivery", "NCHW layout")
{
    struct run_spec s = defaults;
    s.layout = RF_LAYOUT_NCHW;
    struct run_result r;
    run(&s, &r);
    for (uint64_t index = 0; index < 4; index++)
        check_nchw_is_nhwc_planes(&s, index);
}

TEST_CASE(test_fork_mode_gives_spawn_modes_batches, "delivery",
          "fork mode gives spawn mode's batches")
{
    struct run_spec s = defaults;
    s.layout = RF_LAYOUT_NHWC;
    s.start_mode = RF_START_FORK;
    struct run_result forked, spawned;
    run(&s, &forked);
    s.start_mode = RF_START_SPAWN;
    run(&s, &spawned);
    check_same_batches(&forked, &spawned);
}

TEST_CASE(test_epochs_reshuffle, "delivery", "each epoch reshuffled")
{
    struct run_spec s = defaults;
    s.batch = 100; /* one batch per epoch */
    s.epochs = 3;
    struct run_result r;
    run(&s, &r);
    CHECK_NE(r.digest[0], r.digest[1]);
    CHECK_NE(r.digest[1], r.digest[2]);
}

TEST_CASE(test_resume_gives_the_same_batches, "resume",
          "from (epoch, batch), the same batches")
{
    struct run_spec s = defaults; /* 13 batches per epoch, 2 epochs */
    struct run_result whole, resumed;
    run(&s, &whole);
    s.start_epoch = 1;
    s.start_batch = 3;
    run(&s, &resumed);
    CHECK_EQ(resumed.batches, whole.batches - 16);
    for (uint64_t seq = 16; seq < whole.batches; seq++)
        CHECK_EQ(resumed.digest[seq], whole.digest[seq]);
}

TEST_CASE(test_rank_from_environment, "ranks",
          "rank and world size from the environment")
{
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "3", 1);
    rf_config *cfg =
        TEST_CONFIG({RF_PARAM_SAMPLES, 100}, {RF_PARAM_BATCH_SIZE, 5},
                    {RF_PARAM_HEIGHT, 2}, {RF_PARAM_WIDTH, 2});
    rf_loader *l = test_open_loader(cfg);
    int64_t params[RF__PARAMS];
    memcpy(params, cfg->params, sizeof(params));
    params[RF_PARAM_RANK] = 1;
    params[RF_PARAM_WORLD_SIZE] = 3;
    struct rf__order o;
    char why[256];
    CHECK_OK(rf__order_init(&o, params, why, sizeof(why)));
    CHECK_EQ(o.batches_per_epoch, 7); /* ceil(100 / 3) = 34 samples */
    rf_batch b;
    uint64_t batches = 0;
    while (rf_loader_next(l, &b) > 0) {
        for (uint32_t i = 0; i < b.samples; i++)
            CHECK_EQ(b.indices[i],
                     rf__order_sample(&o, b.epoch, b.number * 5 + i));
        batches++;
        CHECK_OK(rf_loader_release(l, &b));
    }
    CHECK_EQ(batches, 7);
    rf_loader_close(l);
    rf_config_free(cfg);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
}

/* Opens a 10-sample loader without shard padding under the environment
 * `env` ("NAME=value"
 * pairs, NULL-terminated; the launcher variables are cleared first) and
 * returns open's result, with its detail in *err. */
static int open_with_environment(const char *const *env, int64_t rank,
                                 char **err)
{
    static const char *const launcher[] = {
        "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < 4; i++)
        unsetenv(launcher[i]);
    for (size_t i = 0; env[i]; i++)
        CHECK_EQ(putenv((char *)env[i]), 0);
    rf_config *cfg = TEST_CONFIG(
        {RF_PARAM_SAMPLES, 10}, {RF_PARAM_BATCH_SIZE, 2}, {RF_PARAM_HEIGHT, 2},
        {RF_PARAM_WIDTH, 2}, {RF_PARAM_PRODUCERS, 1}, {RF_PARAM_RANK, rank},
        {RF_PARAM_SHARD_PAD, 0});
    rf_loader *l = NULL;
    *err = NULL;
    const int rc = rf_loader_open(&l, cfg, err);
    rf_loader_close(l);
    rf_config_free(cfg);
    for (size_t i = 0; i < 4; i++)
        unsetenv(launcher[i]);
    return rc;
}

/* A malformed rank or world size in the environment, or half of
 * torchrun's pair, fails open naming the variable: taken as rank 0 or
 * world size 1, it would train on another rank's shard. */
TEST_CASE(test_bad_rank_environment_refused, "ranks",
          "malformed environment is refused")
{
    static const struct {
        const char *env[3];
        const char *expected;
    } bad[] = {
        {{"RANK=1x", "WORLD_SIZE=2"}, "RANK='1x' is not a number in 0.."},
        {{"RANK=-1", "WORLD_SIZE=2"}, "RANK='-1' is not a number"},
        {{"RANK= 1", "WORLD_SIZE=2"}, "RANK=' 1' is not a number"},
        {{"RANK=99999999999", "WORLD_SIZE=2"}, "RANK='99999999999'"},
        {{"RANK=0", "WORLD_SIZE=0"}, "WORLD_SIZE='0' is not a number in 1.."},
        {{"WORLD_SIZE=2"}, "WORLD_SIZE is set but RANK is not"},
        {{"OMPI_COMM_WORLD_RANK=1"},
         "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"},
        {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2x"},
         "OMPI_COMM_WORLD_SIZE='2x'"},
        {{"RANK=7", "WORLD_SIZE=20"},
         "leave rank 7 none; set RF_PARAM_SHARD_PAD to 1"},
    };
    char *err = NULL;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ(open_with_environment(bad[i].env, -1, &err), -EINVAL);
        CHECK_CONTAINS(err, bad[i].expected);
        free(err);
    }
    /* Good pairs, and the caller's rank with the environment's size. */
    static const char *const good[][3] = {
        {"RANK=1", "WORLD_SIZE=2"},
        {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"},
    };
    for (size_t i = 0; i < 2; i++) {
        CHECK_OK(open_with_environment(good[i], -1, &err));
        free(err);
    }
    static const char *const size_only[] = {"WORLD_SIZE=2", NULL};
    CHECK_OK(open_with_environment(size_only, 1, &err));
    free(err);
    CHECK_EQ(open_with_environment(size_only, 2, &err), -EINVAL);
    CHECK_CONTAINS(err, "rank 2 is not below world size 2");
    free(err);
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
