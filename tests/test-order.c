/*
 * test-order.c - the per-epoch shuffle is a bijection of [0, N) for many
 * N, differs between epochs and seeds, is the identity when shuffling is
 * off; batch counts with and without drop_last.
 */
#include "config.h"

#include "internal.h"
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

static void test_bijection_many_sizes(void)
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

static void test_orders_differ(void)
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

static void test_first_positions_are_spread(void)
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

static void test_identity_without_shuffle(void)
{
    for (uint64_t pos = 0; pos < 1000; pos++)
        CHECK_EQ(rf__sample_at(77, 4, pos, 1000, false), pos);
}

static void test_batches_per_epoch(void)
{
    CHECK_EQ(rf__batches_per_epoch(100, 10, false), 10);
    CHECK_EQ(rf__batches_per_epoch(101, 10, false), 11);
    CHECK_EQ(rf__batches_per_epoch(101, 10, true), 10);
    CHECK_EQ(rf__batches_per_epoch(9, 10, true), 0);
    CHECK_EQ(rf__batches_per_epoch(9, 10, false), 1);
}

int main(void)
{
    test_bijection_many_sizes();
    test_orders_differ();
    test_first_positions_are_spread();
    test_identity_without_shuffle();
    test_batches_per_epoch();
    return 0;
}
