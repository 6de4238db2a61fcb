/*
 * test-order.c - the per-epoch shuffle is a bijection of [0, N) for many
 * N, differs between epochs and seeds, is the identity when shuffling is
 * off, and gives small datasets uniform orders; batch counts with and
 * without drop_last.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/internal.h"
#include "harness.h"
#include "test.h"

/* Checks that position -> sample is a permutation of [0, n). */
static void check_bijection(uint64_t seed, uint64_t epoch, uint64_t n)
{
    uint8_t *seen = calloc(n, 1);
    CHECK(seen);
    for (uint64_t pos = 0; pos < n; pos++) {
        const uint64_t s = rf__sample_at(seed, epoch, pos, n, true);
        CHECK_LT(s, n);
        CHECK_EQ(seen[s], 0);
        seen[s] = 1;
    }
    free(seen);
}

TEST_CASE(test_bijection_many_sizes, "shuffle", "a bijection for many sizes")
{
    for (uint64_t n = 1; n <= 1100; n++)
        check_bijection(n * 7, n % 3, n);
    const uint64_t big[] = {4095, 4096, 4097, 65537, 1000003, 1281167};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        check_bijection(42, 1, big[i]);
}

/* Positions whose sample differs between two orders, out of n. */
static uint64_t differences(uint64_t n, uint64_t seed_a, uint64_t epoch_a,
                            uint64_t seed_b, uint64_t epoch_b)
{
    uint64_t diff = 0;
    for (uint64_t pos = 0; pos < n; pos++)
        diff += rf__sample_at(seed_a, epoch_a, pos, n, true) !=
                rf__sample_at(seed_b, epoch_b, pos, n, true);
    return diff;
}

TEST_CASE(test_orders_differ, "shuffle", "differs between epochs and seeds")
{
    const uint64_t n = 10000;
    /* A fresh random permutation keeps about 1 fixed point; demand that
     * nearly every position moves between epochs and between seeds. */
    CHECK_GT(differences(n, 1, 0, 1, 1), n * 99 / 100);
    CHECK_GT(differences(n, 1, 0, 2, 0), n * 99 / 100);
    CHECK_EQ(differences(n, 5, 3, 5, 3), 0);
    /* And the shuffle actually moves samples away from the identity. */
    uint64_t fixed = 0;
    for (uint64_t pos = 0; pos < n; pos++)
        fixed += rf__sample_at(9, 0, pos, n, true) == pos;
    CHECK_LT(fixed, 20);
}

TEST_CASE(test_first_positions_are_spread, "shuffle",
          "first positions are spread")
{
    /* The first 1000 positions of a shuffled 10^6 dataset should cover
     * each tenth of the index range roughly equally (100 expected). */
    const uint64_t n = 1000000;
    unsigned tenths[10] = {0};
    for (uint64_t pos = 0; pos < 1000; pos++)
        tenths[rf__sample_at(3, 0, pos, n, true) / (n / 10)]++;
    for (int t = 0; t < 10; t++) {
        CHECK_GT(tenths[t], 50);
        CHECK_LT(tenths[t], 150);
    }
}

/* The chi-square value over `bins` counts that should each be
 * total / bins, and its critical value at p = 10^-4 (Wilson-Hilferty). */
static double chi_square(const unsigned long *count, size_t bins,
                         unsigned long total)
{
    double sum = 0;
    const double expected = (double)total / (double)bins;
    for (size_t i = 0; i < bins; i++)
        sum += (count[i] - expected) * (count[i] - expected) / expected;
    return sum;
}

static double critical_value(double df)
{
    const double z = 3.719, a = 2.0 / (9.0 * df);
    const double root = 1.0 - a + z * sqrt(a);
    return df * root * root * root;
}

/* Small datasets get uniform orders: each sample equally likely at a
 * given position, and for 3 and 4 samples every permutation equally
 * likely, over 200,000 epochs. (A 6-round Feistel network on 2-bit
 * halves failed this: chi-square 48 for 7 degrees of freedom at 8.) */
TEST_CASE(test_small_datasets_are_uniform, "shuffle",
          "small datasets get uniform orders")
{
    enum { EPOCHS = 200000 };
    static unsigned long count[24];
    const uint64_t sizes[] = {2, 3, 5, 7, 8, 12, 24};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const uint64_t n = sizes[k];
        const uint64_t where[2] = {0, n - 1};
        for (int w = 0; w < 2; w++) {
            memset(count, 0, sizeof(count));
            for (uint64_t e = 0; e < EPOCHS; e++)
                count[rf__sample_at(11, e, where[w], n, true)]++;
            const double x = chi_square(count, n, EPOCHS);
            if (x > critical_value((double)n - 1))
                fprintf(stderr, "n = %llu, position %llu: chi-square %.1f\n",
                        (unsigned long long)n, (unsigned long long)where[w], x);
            CHECK(x <= critical_value((double)n - 1));
        }
    }
    for (uint64_t n = 3; n <= 4; n++) {
        memset(count, 0, sizeof(count));
        for (uint64_t e = 0; e < EPOCHS; e++) {
            /* Lehmer code of the permutation: a number below n! */
            uint64_t code = 0, used = 0;
            for (uint64_t pos = 0; pos < n; pos++) {
                const uint64_t v = rf__sample_at(11, e, pos, n, true);
                uint64_t smaller_unused = 0;
                for (uint64_t u = 0; u < v; u++)
                    smaller_unused += !(used >> u & 1);
                used |= UINT64_C(1) << v;
                code = code * (n - pos) + smaller_unused;
            }
            count[code]++;
        }
        const size_t perms = n == 3 ? 6 : 24;
        CHECK(chi_square(count, perms, EPOCHS) <=
              critical_value((double)perms - 1));
    }
    printf("order: small datasets uniform over %d epochs\n", EPOCHS);
}

TEST_CASE_LIMIT(test_identity_without_shuffle, "shuffle", "identity when off",
                10)
{
    for (uint64_t pos = 0; pos < 1000; pos++)
        CHECK_EQ(rf__sample_at(77, 4, pos, 1000, false), pos);
}

TEST_CASE_LIMIT(test_batches_per_epoch, "batches",
                "per epoch, with and without drop_last", 10)
{
    CHECK_EQ(rf__batches_per_epoch(100, 10, false), 10);
    CHECK_EQ(rf__batches_per_epoch(101, 10, false), 11);
    CHECK_EQ(rf__batches_per_epoch(101, 10, true), 10);
    CHECK_EQ(rf__batches_per_epoch(9, 10, true), 0);
    CHECK_EQ(rf__batches_per_epoch(9, 10, false), 1);
}

static void order_for(struct rf__order *o, uint64_t n, int64_t rank,
                      int64_t world, int64_t pad, int64_t batch)
{
    int64_t params[RF__PARAMS] = {0};
    params[RF_PARAM_SEED] = 5;
    params[RF_PARAM_SAMPLES] = (int64_t)n;
    params[RF_PARAM_SHUFFLE] = 1;
    params[RF_PARAM_BATCH_SIZE] = batch;
    params[RF_PARAM_RANK] = rank;
    params[RF_PARAM_WORLD_SIZE] = world;
    params[RF_PARAM_SHARD_PAD] = pad;
    char why[256];
    CHECK_OK(rf__order_init(o, params, why, sizeof(why)));
}

/* Over all ranks of one epoch: with padding every sample appears and only
 * the padding repeats; without, no sample repeats and only the remainder
 * is missing. Every rank has the same number of batches. */
static void check_shards(uint64_t n, uint32_t world, int64_t pad)
{
    unsigned *count = calloc(n, sizeof(*count));
    CHECK(count);
    uint64_t batches = 0, total = 0;
    for (uint32_t r = 0; r < world; r++) {
        struct rf__order o;
        order_for(&o, n, r, world, pad, 3);
        if (r == 0)
            batches = o.batches_per_epoch;
        CHECK_EQ(o.batches_per_epoch, batches);
        for (uint64_t pos = 0; pos < o.per_rank; pos++, total++)
            count[rf__order_sample(&o, 2, pos)]++;
    }
    uint64_t distinct = 0;
    for (uint64_t i = 0; i < n; i++) {
        distinct += count[i] > 0;
        CHECK_LE(count[i], pad ? 2 : 1);
    }
    if (pad) {
        CHECK_EQ(distinct, n);
        CHECK_EQ(total, (n + world - 1) / world * world);
    } else {
        CHECK_EQ(distinct, n / world * world);
        CHECK_EQ(total, n / world * world);
    }
    free(count);
}

TEST_CASE(test_padded_shards_cover_every_sample, "shards",
          "padded shards cover every sample")
{
    for (uint64_t n = 8; n <= 300; n += 7)
        for (uint32_t world = 1; world <= 8; world++)
            check_shards(n, world, 1);
}

TEST_CASE(test_unpadded_shards_repeat_none, "shards",
          "unpadded shards repeat none")
{
    for (uint64_t n = 8; n <= 300; n += 7)
        for (uint32_t world = 1; world <= 8; world++)
            check_shards(n, world, 0);
}

TEST_CASE_LIMIT(test_bad_rank_is_refused, "shards",
                "a rank beyond the world is refused", 10)
{
    int64_t params[RF__PARAMS] = {0};
    params[RF_PARAM_SAMPLES] = 10;
    params[RF_PARAM_BATCH_SIZE] = 2;
    params[RF_PARAM_RANK] = 4;
    params[RF_PARAM_WORLD_SIZE] = 4;
    struct rf__order o;
    char why[256];
    CHECK_EQ(rf__order_init(&o, params, why, sizeof(why)), -EINVAL);
    CHECK_CONTAINS(why, "rank 4 is not below world size 4");
}

/* The order of n samples over `world` ranks in batches of `batch` with
 * drop_last, which leaves no batch: open's reason. */
static void no_batch_reason(uint64_t n, int64_t world, int64_t pad,
                            int64_t batch, char *why, size_t len)
{
    int64_t params[RF__PARAMS] = {0};
    params[RF_PARAM_SAMPLES] = (int64_t)n;
    params[RF_PARAM_BATCH_SIZE] = batch;
    params[RF_PARAM_WORLD_SIZE] = world;
    params[RF_PARAM_SHARD_PAD] = pad;
    params[RF_PARAM_DROP_LAST] = 1;
    struct rf__order o;
    CHECK_EQ(rf__order_init(&o, params, why, len), -EINVAL);
}

/* What leaves a batch: a batch size of at most each rank's samples,
 * drop_last cleared, and shard_pad only where it is not set and gives
 * each rank a whole batch (it used to be advised even when set); every
 * parameter by its RF_PARAM_ name, which Python writes as its keyword. */
TEST_CASE_LIMIT(test_no_batch_advice, "batches",
                "no batch left: advice that would leave one", 10)
{
    char why[512];
    no_batch_reason(10, 1, 1, 32, why, sizeof(why));
    CHECK_CONTAINS(why, "10 samples with batch size 32 and "
                        "RF_PARAM_DROP_LAST 1 leave no batch; set "
                        "RF_PARAM_BATCH_SIZE to 10 (or less) or "
                        "RF_PARAM_DROP_LAST to 0");
    CHECK(strstr(why, "SHARD_PAD") == NULL);
    /* set already: 16 over 2 ranks is 8 each, padded or not */
    no_batch_reason(16, 2, 1, 9, why, sizeof(why));
    CHECK_CONTAINS(why, "16 samples over 2 ranks (8 each) with batch size 9 "
                        "and RF_PARAM_DROP_LAST 1 leave no batch; set "
                        "RF_PARAM_BATCH_SIZE to 8 (or less) or "
                        "RF_PARAM_DROP_LAST to 0");
    CHECK(strstr(why, "SHARD_PAD") == NULL);
    /* not set, but padding gives 8, still fewer than 9 */
    no_batch_reason(16, 2, 0, 9, why, sizeof(why));
    CHECK(strstr(why, "SHARD_PAD") == NULL);
    /* not set, and padding gives each rank 9: a batch */
    no_batch_reason(17, 2, 0, 9, why, sizeof(why));
    CHECK_CONTAINS(why, "17 samples over 2 ranks (8 each) with batch size 9 "
                        "and RF_PARAM_DROP_LAST 1 leave no batch; set "
                        "RF_PARAM_BATCH_SIZE to 8 (or less), "
                        "RF_PARAM_DROP_LAST to 0 or RF_PARAM_SHARD_PAD to 1 "
                        "(9 each)");
}

int main(int argc, char **argv)
{
    return TEST_MAIN(argc, argv);
}
