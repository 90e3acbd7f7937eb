/* Expert pager: routed-expert weights (ffn_{gate,up,down}_exps, one 3-D tensor per matrix per layer,
 * expert e = slice e of ne[2]) are served from a RAM arena of expert slots under a byte budget,
 * read from the GGUF with pread. With budget 0 (no paging) pointers go straight into the mmap.
 *
 * Use per MoE layer and batch:
 *   mr_pager_prefetch(p, layer, ids, n)   the batch's experts (distinct ids, union over its tokens):
 *                                         pins the resident ones and starts reads of missing ones
 *                                         (as many as there are evictable slots; the rest are read as
 *                                         slots free up). The same ids again before any is served
 *                                         is a no-op: a caller may prefetch early (e.g. before the
 *                                         shared expert) and moe.c's prefetch then changes nothing
 *   mr_pager_next(p, layer, &id, ptrs)    the next expert of the batch that is resident (waits only
 *                                         if none is): compute on resident experts overlaps the reads
 *   mr_pager_get(p, layer, id, ptrs)      waits until expert `id` is resident; ptrs[m] = slice of
 *                                         matrix m (MR_PAGER_GATE/UP/DOWN), NULL if the layer has none
 *   mr_pager_done(p, layer, id)           the caller no longer uses id's pointers: unpin it, so its
 *                                         slot can take another expert of the batch (optional, needed
 *                                         when the batch has more experts than the budget has slots)
 *   mr_pager_release(p, layer)            unpins the layer's experts (they stay cached)
 *   mr_pager_hint(p, layer, ids, n)       a guess at a coming batch of `layer` (e.g. the next layer's
 *                                         experts predicted while this one computes): starts reads of
 *                                         the missing ones into evictable slots, kept until the layer's
 *                                         real prefetch; guesses it does not use are then cancelled if
 *                                         not started. A hinted expert that is used counts as a miss
 *                                         (it was read for that use), only without the wait.
 * Results never depend on the budget: the bytes are the file's bytes. A failed or short read is an
 * error (-1 from get/next), never silently different data.
 *
 * Slots: one slot holds one expert's gate+up+down slices of a layer (sized by the largest layer),
 * each slice in its own 4096-aligned area so it can be read with O_DIRECT. The budget must hold at
 * least max n_used slots (one token's experts of one layer); mr_pager_create fails naming the minimum.
 * Reads: a pool of I/O threads (MR_PAGER_IO_THREADS) doing pread, O_DIRECT when the file system allows.
 * Settings: mr_pager_params (moerun.h: policy, I/O threads, chunk, O_DIRECT, guesses, and faults for
 * tests: eio:N or short:N makes the N-th read (1-based) fail with EIO or return short; slow:MS makes
 * every read wait MS milliseconds first, a slow device). */
#ifndef MR_PAGER_H
#define MR_PAGER_H
#include <stdint.h>
#include <stdio.h>
#include "gguf/gguf.h"
#include "moerun.h"

enum { MR_PAGER_GATE = 0, MR_PAGER_UP = 1, MR_PAGER_DOWN = 2, MR_PAGER_MATS = 3 };
#define MR_PAGER_IO_THREADS 8          /* default reads in flight (mr_pager_params.io_threads) */
#define MR_PAGER_MAX_IO_THREADS 64
#define MR_PAGER_CHUNK (1u << 20)       /* default bytes per read job (mr_pager_params.chunk) */
#define MR_PAGER_MAX_CHUNK (1ull << 40)

typedef struct {
    const mr_gguf_tensor *mat[MR_PAGER_MATS]; /* NULL where the layer has no such tensor */
    int n_used;                               /* experts per token at this layer (top-k); 0 = unknown */
} mr_pager_layer;

typedef struct mr_pager mr_pager;

/* layers[n_layers]: per model layer; a layer with all mats NULL is not an MoE layer.
 * budget_bytes == 0: no paging (mmap). pp: the settings (NULL: defaults; not kept). */
mr_pager *mr_pager_create(const mr_gguf *g, const mr_pager_layer *layers, int n_layers, uint64_t budget_bytes,
                          const mr_pager_params *pp);
void mr_pager_free(mr_pager *p);
int mr_pager_prefetch(mr_pager *p, int layer, const int *ids, int n);
int mr_pager_next(mr_pager *p, int layer, int *id, const void *ptrs[MR_PAGER_MATS]);
int mr_pager_get(mr_pager *p, int layer, int id, const void *ptrs[MR_PAGER_MATS]);
void mr_pager_done(mr_pager *p, int layer, int id);
void mr_pager_release(mr_pager *p, int layer);
int mr_pager_hint(mr_pager *p, int layer, const int *ids, int n);
/* A conversion of each expert's slices once they are read, before the expert is served (the model
 * repacks them into a faster kernel's layout in place, quant/repack.h): fn(ctx, layer, mat, data,
 * staging) runs on the I/O thread that completed the expert's reads, for every matrix the layer has;
 * staging holds the largest slice (scratch). It returns 0, or -1 with the error set: the read then
 * fails like a failed pread. Set before the first prefetch; the slot's bytes are then fn's layout,
 * no longer the file's. Returns -1 when out of memory. */
typedef int (*mr_pager_convert_fn)(void *ctx, int layer, int mat, void *data, void *staging);
int mr_pager_set_convert(mr_pager *p, mr_pager_convert_fn fn, void *ctx);
/* 1 when paging, guesses are wanted (mr_pager_params.no_guess turns them off) and the arena has at least
 * 4x the floor's slots (with fewer, a guess evicts experts still wanted) */
int mr_pager_guessing(const mr_pager *p);

/* Bracket one evaluation (the model's eval calls them): with decode = 1 (one token per sequence) its
 * wall time, miss bytes and bytes read are added to the decode_* counters, so every tool reports
 * decode's I/O the same way. */
void mr_pager_eval_begin(mr_pager *p, int decode);
void mr_pager_eval_end(mr_pager *p);

/* Sizes: bytes of one slot, and the minimum budget (floor) for these layers; 0 if no MoE layer. */
uint64_t mr_pager_slot_bytes(const mr_gguf *g, const mr_pager_layer *layers, int n_layers);
uint64_t mr_pager_min_budget(const mr_gguf *g, const mr_pager_layer *layers, int n_layers);
/* Bytes of all routed-expert tensors of these layers. */
uint64_t mr_pager_expert_bytes(const mr_pager_layer *layers, int n_layers);

int mr_pager_paging(const mr_pager *p);        /* 0 when serving from the mmap */
/* 1 when expert e of layer needs no new read: in the arena or being read into it (also a read-ahead
 * guess), or no paging; 0 otherwise (or a bad layer / expert). No side effects: not counted as a use. */
int mr_pager_cached(const mr_pager *p, int layer, int e);
int mr_pager_n_slots(const mr_pager *p);
int mr_pager_uses_direct_io(const mr_pager *p); /* 1 if at least one shard is read with O_DIRECT */
int mr_pager_huge_pages(const mr_pager *p);     /* 1 if the arena asked for transparent huge pages */

/* Statistics (cumulative since create). Accesses count each expert of each prefetched batch once. */
typedef struct {
    uint64_t hits, misses;       /* expert accesses found resident / read */
    uint64_t reads, bytes_read;  /* pread calls and bytes (O_DIRECT reads round to 4 KiB) */
    double stall_s;              /* time next/get waited for reads */
    double io_busy_s;            /* time at least one read was in flight */
    uint64_t hint_reads;         /* experts read because of mr_pager_hint */
    uint64_t hint_used;          /* of those, used by their layer's batch */
    uint64_t hint_cancelled;     /* of those, not used and their reads cancelled before they started */
    uint64_t hint_wasted;        /* of those, read for nothing: not used, or evicted before their layer */
    uint64_t rounds;             /* forward passes seen (a prefetch of a layer <= the previous one starts one) */
    uint64_t miss_bytes;         /* bytes read for the misses (the whole pages of each missed expert; a used
                                    guess counts, an unused one does not): what exact decoding must read */
    /* evaluations marked decode by mr_pager_eval_begin: their count, wall time, miss bytes, bytes read */
    uint64_t decode_evals, decode_miss_bytes, decode_bytes_read;
    double decode_s, decode_io_busy_s;
} mr_pager_counters;
void mr_pager_counters_get(const mr_pager *p, mr_pager_counters *out);
/* per layer hits / misses; -1 for a bad layer */
int mr_pager_layer_counters(const mr_pager *p, int layer, uint64_t *hits, uint64_t *misses);
/* Belady hit rate for the recorded access trace and this slot count, in [0, 1]; -1 if nothing was
 * recorded or out of memory. *truncated = 1 when the trace was too long to record in full (the rate is
 * then over the recorded prefix). */
double mr_pager_belady_hit_rate(const mr_pager *p, int *truncated);
/* Static-optimum hit rate (policy.h) of the recorded uses from use number `from` on (e.g. the decode
 * part of a run: from = hits + misses counted before it); -1 if none were recorded there. */
double mr_pager_static_hit_rate(const mr_pager *p, int64_t from, int *truncated);
#endif
