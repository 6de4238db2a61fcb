/*
 * mix64.h - the building block of every keyed random choice in the
 * library: the sample order, crops and flips, synthetic content, unique
 * file names, the failure table's hashing and process tokens all draw
 * from it, so that each choice is a pure function of its keys (seed,
 * epoch, sample index, ...).
 *
 * Inline, with no .c of its own: the shuffle calls it six times per
 * Feistel round trip for every sample, and it used to be inlined there
 * when it lived in order.c.
 */
#ifndef RF_COMMON_MIX64_H
#define RF_COMMON_MIX64_H

#include <stdint.h>

/* A 64-bit mix of two words (splitmix64 finaliser): every output bit
 * depends on every input bit. */
static inline uint64_t rf__mix64(uint64_t a, uint64_t b)
{
    uint64_t z = a + 0x9e3779b97f4a7c15u * (b + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

#endif /* RF_COMMON_MIX64_H */
