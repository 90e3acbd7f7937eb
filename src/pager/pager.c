/* Expert pager. This first version serves every expert from the mmap (no budget yet). */
#include "pager/pager.h"
#include "base/base.h"

#include <stdlib.h>

struct mr_pager {
    int n_layers;
    mr_pager_layer *layers;
};

mr_pager *mr_pager_create(const mr_gguf *g, const mr_pager_layer *layers, int n_layers, uint64_t budget_bytes) {
    (void)g;
    if (budget_bytes != 0) { mr_set_error("expert paging under a RAM budget is not implemented yet"); return NULL; }
    mr_pager *p = calloc(1, sizeof *p);
    if (!p) goto fail;
    p->layers = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *p->layers);
    if (!p->layers) goto fail;
    for (int i = 0; i < n_layers; i++) p->layers[i] = layers[i];
    p->n_layers = n_layers;
    return p;
fail:
    mr_set_error("pager: out of memory");
    mr_pager_free(p);
    return NULL;
}

void mr_pager_free(mr_pager *p) {
    if (!p) return;
    free(p->layers);
    free(p);
}

int mr_pager_prefetch(mr_pager *p, int layer, const int *ids, int n) {
    (void)ids; (void)n;
    if (layer < 0 || layer >= p->n_layers) { mr_set_error("pager: bad layer %d", layer); return -1; }
    return 0;
}

int mr_pager_get(mr_pager *p, int layer, int id, const void *ptrs[MR_PAGER_MATS]) {
    if (layer < 0 || layer >= p->n_layers) { mr_set_error("pager: bad layer %d", layer); return -1; }
    for (int m = 0; m < MR_PAGER_MATS; m++) {
        const mr_gguf_tensor *t = p->layers[layer].mat[m];
        ptrs[m] = NULL;
        if (!t) continue;
        if (id < 0 || id >= t->ne[2]) { mr_set_error("pager: expert %d out of range in %s", id, t->name); return -1; }
        uint64_t slice = t->nbytes / (uint64_t)t->ne[2];
        ptrs[m] = (const uint8_t *)t->data + slice * (uint64_t)id;
    }
    return 0;
}

void mr_pager_release(mr_pager *p, int layer) { (void)p; (void)layer; }
