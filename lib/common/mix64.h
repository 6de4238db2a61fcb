/*
 * mix64.h - the building block of every keyed random choice in the
 * library: the sample order, crops and flips, synthetic content, unique
 * file names, the failure table's hashing and process tokens all draw
 * from it, so that each choice is a pure function of its keys (seed,
 * epoch, sample index, ...).
 */
#ifndef RF_COMMON_MIX64_H
#define RF_COMMON_MIX64_H

#include <stdint.h>

/* A 64-bit mix of two words (splitmix64 finaliser): every output bit
 * depends on every input bit. */
uint64_t rf__mix64(uint64_t a, uint64_t b);

#endif /* RF_COMMON_MIX64_H */
