/* A fast 64-bit hash of bytes for integrity checks and identities (snapshots, the prompt cache):
 * not cryptographic, it catches corrupted or truncated data and tells models apart. */
#ifndef MR_HASH_H
#define MR_HASH_H
#include <stddef.h>
#include <stdint.h>

/* Hash of data[0..n) continuing from seed (chain calls: h = mr_hash64(b, nb, mr_hash64(a, na, 0))
 * hashes a then b; the chain depends on where the pieces are cut). */
uint64_t mr_hash64(const void *data, size_t n, uint64_t seed);
static inline uint64_t mr_hash64_u64(uint64_t v, uint64_t seed) { return mr_hash64(&v, sizeof v, seed); }

#endif
