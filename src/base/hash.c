/* mr_hash64 (hash.h): four independent 64-bit lanes over 32-byte stripes so the multiplies overlap
 * (several GB/s: a snapshot of hundreds of MB is checked in well under a second), then the tail
 * word by word and byte by byte, then an avalanche of the result so close inputs differ in every bit.
 * The round v = rotl(v + w * P2, 31) * P1 and the primes are xxHash64's (a published constant set). */
#include "base/hash.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint64_t round64(uint64_t v, uint64_t w) { return rotl(v + w * P2, 31) * P1; }

uint64_t mr_hash64(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = data, *end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v[4] = {seed + P1 + P2, seed + P2, seed, seed - P1};
        for (; end - p >= 32; p += 32)
            for (int i = 0; i < 4; i++) v[i] = round64(v[i], rd64(p + 8 * i));
        h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
        for (int i = 0; i < 4; i++) h = (h ^ round64(0, v[i])) * P1 + P4;
    } else {
        h = seed + P5;
    }
    h += (uint64_t)n;
    for (; end - p >= 8; p += 8) h = rotl(h ^ round64(0, rd64(p)), 27) * P1 + P4;
    for (; p < end; p++) h = rotl(h ^ (*p * P5), 11) * P1;
    h ^= h >> 33; h *= P2;
    h ^= h >> 29; h *= P3;
    h ^= h >> 32;
    return h;
}
