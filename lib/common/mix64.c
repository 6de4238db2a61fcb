/*
 * mix64.c - splitmix64's finaliser over two words; see mix64.h.
 */
#include "config.h"

#include "common/mix64.h"

uint64_t rf__mix64(uint64_t a, uint64_t b)
{
    uint64_t z = a + 0x9e3779b97f4a7c15u * (b + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
