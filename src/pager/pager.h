/* Expert pager: routed-expert weights (ffn_{gate,up,down}_exps, one 3-D tensor per matrix per layer,
 * expert e = slice e of ne[2]) are served from a RAM arena of expert slots under a byte budget,
 * read from the GGUF with pread. With budget 0 (no paging) pointers go straight into the mmap.
 *
 * Use per MoE layer and batch:
 *   mr_pager_prefetch(p, layer, ids, n)   pins the batch's experts (union) and starts missing reads
 *   mr_pager_get(p, layer, id, ptrs)      waits until expert `id` is resident; ptrs[m] = slice of
 *                                         matrix m (MR_PAGER_GATE/UP/DOWN), NULL if the layer has none
 *   mr_pager_release(p, layer)            unpins the layer's experts (they stay cached)
 * Results never depend on the budget: the bytes are the file's bytes. */
#ifndef MR_PAGER_H
#define MR_PAGER_H
#include <stdint.h>
#include "gguf/gguf.h"

enum { MR_PAGER_GATE = 0, MR_PAGER_UP = 1, MR_PAGER_DOWN = 2, MR_PAGER_MATS = 3 };

typedef struct {
    const mr_gguf_tensor *mat[MR_PAGER_MATS]; /* NULL where the layer has no such tensor */
} mr_pager_layer;

typedef struct mr_pager mr_pager;

/* layers[n_layers]: per model layer; a layer with all mats NULL is not an MoE layer.
 * budget_bytes == 0: no paging (mmap). */
mr_pager *mr_pager_create(const mr_gguf *g, const mr_pager_layer *layers, int n_layers, uint64_t budget_bytes);
void mr_pager_free(mr_pager *p);
int mr_pager_prefetch(mr_pager *p, int layer, const int *ids, int n);
int mr_pager_get(mr_pager *p, int layer, int id, const void *ptrs[MR_PAGER_MATS]);
void mr_pager_release(mr_pager *p, int layer);
#endif
