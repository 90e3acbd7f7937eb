/* Expert-cache directory and replacement policies, shared by the pager (src/pager/pager.c) and the
 * trace simulator (src/pager/cachesim.c), so the code that is measured is the code that evicts.
 *
 * The cache holds n_slots of the n_layers x n_expert (layer, expert) pairs; key = layer * n_expert +
 * expert. Time is counted in rounds: one forward pass (a decoded token, or a prefill batch) visits
 * the MoE layers in order, and a round starts with mr_cache_new_round(). Within a round a layer's
 * experts are accessed with mr_cache_access(), which pins the slot it returns; the caller unpins
 * when the layer's compute is done. Pinned slots are never evicted.
 *
 * Policies (mr_cache_policy_name): lru, lfu, lrfu (decayed frequency), lru2 (LRU-K, K=2), arc,
 * guard (recency with a popularity guard), lru-layer (per-layer partitions), hazard: each pair keeps a
 * histogram of its reuse distances (in rounds); the victim is the resident pair with the lowest
 * estimated probability of being used again within the next W opportunities given how long it has been
 * idle, shrunk towards the histogram pooled over its layer; and hot (the default): hazard among the
 * pairs outside a hot set of highest decayed frequency, whose size (60 % or all of the slots) two
 * shadow directories choose by their hits. */
#ifndef MR_POLICY_H
#define MR_POLICY_H
#include <stdint.h>

enum {
    MR_POLICY_LRU = 0, MR_POLICY_LFU, MR_POLICY_LRFU, MR_POLICY_LRU2, MR_POLICY_ARC, MR_POLICY_GUARD,
    MR_POLICY_LRU_LAYER, MR_POLICY_HAZARD, MR_POLICY_HOT, MR_POLICY_COUNT
};
#define MR_POLICY_DEFAULT MR_POLICY_HOT

const char *mr_cache_policy_name(int policy);        /* NULL if out of range */
const char *mr_cache_policy_desc(int policy);
int mr_cache_policy_from_name(const char *name);     /* -1 + mr_set_error if unknown */

typedef struct mr_cache mr_cache;

mr_cache *mr_cache_create(int policy, int n_layers, int n_expert, int n_slots);
void mr_cache_free(mr_cache *c);
int mr_cache_n_slots(const mr_cache *c);
int mr_cache_policy(const mr_cache *c);

void mr_cache_new_round(mr_cache *c);
/* Slot holding key, or -1. No side effects. */
int mr_cache_find(const mr_cache *c, int key);
/* Records an access to key and pins its slot. On a hit returns the slot with *hit = 1. On a miss
 * takes a free slot or evicts an unpinned one chosen by the policy (*evicted = the old key, or -1)
 * and returns it with *hit = 0: the caller must fill it (or mr_cache_invalidate it on failure).
 * Returns -1 with mr_set_error if every slot is pinned. */
int mr_cache_access(mr_cache *c, int key, int *hit, int *evicted);
/* The same for a key read ahead of its use (a guess): takes and pins a slot but records no use, so the
 * policy's statistics count only real uses (the use itself is then an mr_cache_access hit). */
int mr_cache_reserve(mr_cache *c, int key, int *hit, int *evicted);
void mr_cache_unpin(mr_cache *c, int slot);
int mr_cache_pinned(const mr_cache *c, int slot);    /* pin count */
/* Forget the slot's key (a failed read must not leave a key that claims to be resident). Keeps pins. */
void mr_cache_invalidate(mr_cache *c, int slot);
int mr_cache_slot_key(const mr_cache *c, int slot);  /* -1 if empty */
/* Optional prediction: soon[key] != 0 marks keys expected to be needed soon; the score-based policies
 * evict them only when nothing else is evictable. The array is read at each eviction (NULL = none). */
void mr_cache_set_hint(mr_cache *c, const uint8_t *soon);

/* Offline optimum (Belady / MIN) over a key sequence for a cache of n_slots: evict the resident key
 * whose next use is farthest. Returns the number of hits, or -1 (out of memory). O(n log n). */
int64_t mr_cache_belady_hits(const int32_t *keys, int64_t n, int n_keys, int n_slots);
/* Static optimum: the hits of the best fixed set of n_slots keys for this sequence (its n_slots most
 * frequent keys), each key read at its first use like every cache here (so a short sequence is not
 * flattered by a preloaded set); -1 on bad keys or out of memory. With near-uniform use no online
 * policy beats it by much over a long run: the steady-state target. */
int64_t mr_cache_static_hits(const int32_t *keys, int64_t n, int n_keys, int n_slots);
#endif
