/* Repacked copies (see repack.h). */
#include "quant/repack.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

struct mr_repacked {
    const uint8_t *src;
    uint64_t bytes;        /* of the original rows */
    int type, isa;
    int64_t cols, rows;
    size_t w_row, group_bytes;
    const mr_repack_kern *k;
    void *copy;
    size_t map_bytes;      /* of the mapping holding the copy */
    int view;              /* mr_repack_view: the rows at W are themselves in the layout */
};

/* Copies live in their own anonymous mappings with transparent huge pages requested (mr_big_alloc):
 * gigabytes of copies in 4 KiB pages cost a page fault each when first written (most of the load
 * time), and TLB misses in the kernels. */
static const mr_repack_kern *mr_rp_kern(int type, int64_t cols, int isa) {
    const mr_kern *k = mr_kern_get(type, isa);
    if (!k || !k->rp || k->isa != isa || cols <= 0 || cols % 32 || !mr_row_size(type, cols)) return NULL;
    return k->rp;
}

int mr_repack_applies(int type, int64_t cols) { return mr_rp_kern(type, cols, mr_isa()) != NULL; }

typedef struct { const mr_repacked *rp; int64_t groups; } mr_rp_job;
#define MR_RP_GROUPS_PER_CHUNK 16
static void mr_rp_chunk(void *arg, long ch) {
    const mr_rp_job *j = arg;
    int64_t g0 = (int64_t)ch * MR_RP_GROUPS_PER_CHUNK, g1 = g0 + MR_RP_GROUPS_PER_CHUNK;
    if (g1 > j->groups) g1 = j->groups;
    j->rp->k->pack(j->rp->src, j->rp->cols, g0, g1, j->rp->copy);
}

mr_repacked *mr_repack_make(mr_pool *pool, const void *data, int type, int64_t cols, int64_t rows, int *err) {
    *err = 0;
    const int isa = mr_isa();
    const mr_repack_kern *k = mr_rp_kern(type, cols, isa);
    if (!data || !k || rows <= 0 || rows % k->rows) return NULL;
    mr_repacked *rp = mr_calloc(1, sizeof *rp);
    if (!rp) goto oom;
    const int64_t groups = rows / k->rows;
    *rp = (mr_repacked){.src = data, .type = type, .isa = isa, .cols = cols, .rows = rows,
                        .w_row = mr_row_size(type, cols), .group_bytes = (size_t)(cols / 32) * k->block_bytes, .k = k};
    rp->bytes = (uint64_t)rp->w_row * (uint64_t)rows;
    rp->map_bytes = (size_t)groups * rp->group_bytes;
    rp->copy = mr_big_alloc(rp->map_bytes, 0, NULL); /* the copy is optional: NULL = none */
    if (!rp->copy) goto oom;
    mr_rp_job j = {rp, groups};
    mr_pool_run_chunks(pool, mr_rp_chunk, &j, (long)((groups + MR_RP_GROUPS_PER_CHUNK - 1) / MR_RP_GROUPS_PER_CHUNK));
    return rp;
oom:
    free(rp);
    *err = -1;
    mr_set_error("repack: out of memory for a copy of %lld x %lld %s", (long long)rows, (long long)cols, mr_type_name(type));
    return NULL;
}

void mr_repack_free(mr_repacked *rp) {
    if (!rp) return;
    mr_big_free(rp->copy, rp->map_bytes);
    free(rp);
}

uint64_t mr_repack_size(const mr_repacked *rp) { return rp ? rp->map_bytes : 0; }
int mr_repack_group_rows(const mr_repacked *rp, int type, int64_t cols, int isa) {
    return rp && rp->type == type && rp->cols == cols && rp->isa == isa ? rp->k->rows : 1;
}

const void *mr_repack_at(const mr_repacked *rp, const void *W, int type, int64_t cols, int isa, int64_t *rows_left) {
    if (!rp || rp->type != type || rp->cols != cols || rp->isa != isa) return NULL;
    if (rp->view) {
        if (rows_left) *rows_left = rp->rows;
        return W;
    }
    const uint8_t *w = W;
    if (w < rp->src) return NULL;
    const uint64_t off = (uint64_t)(w - rp->src), gb = (uint64_t)rp->k->rows * rp->w_row;
    if (off >= rp->bytes || off % gb) return NULL;
    if (rows_left) *rows_left = rp->rows - (int64_t)(off / rp->w_row);
    return (const uint8_t *)rp->copy + off / gb * rp->group_bytes;
}

void mr_repack_interleave4(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst, int R, size_t blk_bytes,
                           size_t head) {
    const int64_t nb = cols / 32;
    const size_t body = blk_bytes - head, gb = (size_t)R * blk_bytes;
    const uint8_t *w = src;
    uint8_t *out = dst;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o = out + (size_t)(g * nb + b) * gb;
            for (int r = 0; r < R; r++) {
                const uint8_t *x = w + ((size_t)(R * g + r) * (size_t)nb + (size_t)b) * blk_bytes;
                memcpy(o + (size_t)r * head, x, head);
                for (size_t m = 0; m < body / 4; m++) memcpy(o + (size_t)R * head + (m * (size_t)R + (size_t)r) * 4, x + head + 4 * m, 4);
            }
        }
}

/* the interleave4 layout of a type/cols/rows matrix under the ISA in use, NULL if none (or the rows
 * are not whole groups) */
static const mr_repack_kern *mr_rp_i4(int type, int64_t cols, int64_t rows) {
    const mr_repack_kern *k = mr_rp_kern(type, cols, mr_isa());
    return k && k->i4_head > 0 && rows > 0 && rows % k->rows == 0 ? k : NULL;
}

int mr_repack_in_place_applies(int type, int64_t cols, int64_t rows) { return mr_rp_i4(type, cols, rows) != NULL; }

int mr_repack_in_place(void *data, void *staging, int type, int64_t cols, int64_t rows) {
    const mr_repack_kern *k = mr_rp_i4(type, cols, rows);
    if (!k || !data || !staging) return -1;
    memcpy(staging, data, mr_row_size(type, cols) * (size_t)rows);
    k->pack(staging, cols, 0, rows / k->rows, data);
    return 0;
}

/* mr_repack_interleave4 undone: per group and block, row r's head from the R heads, then its 4-byte
 * groups m from lane r of each group of R */
int mr_repack_undo(const void *data, void *dst, int type, int64_t cols, int64_t rows) {
    const mr_repack_kern *k = mr_rp_i4(type, cols, rows);
    if (!k || !data || !dst) return -1;
    const int R = k->rows;
    const size_t blk = k->block_bytes / (size_t)R, head = (size_t)k->i4_head, body = blk - head, nb = (size_t)(cols / 32);
    const uint8_t *in = data;
    uint8_t *out = dst;
    for (int64_t g = 0; g < rows / R; g++)
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *o = in + ((size_t)g * nb + b) * k->block_bytes;
            for (int r = 0; r < R; r++) {
                uint8_t *x = out + (((size_t)R * (size_t)g + (size_t)r) * nb + b) * blk;
                memcpy(x, o + (size_t)r * head, head);
                for (size_t m = 0; m < body / 4; m++) memcpy(x + head + 4 * m, o + (size_t)R * head + (m * (size_t)R + (size_t)r) * 4, 4);
            }
        }
    return 0;
}

mr_repacked *mr_repack_view(int type, int64_t cols, int64_t rows) {
    const mr_repack_kern *k = mr_rp_i4(type, cols, rows);
    if (!k) { mr_set_error("repack: no in-place layout for %lld x %lld %s", (long long)rows, (long long)cols, mr_type_name(type)); return NULL; }
    mr_repacked *rp = mr_calloc(1, sizeof *rp);
    if (!rp) { mr_set_error("repack: out of memory"); return NULL; }
    *rp = (mr_repacked){.type = type, .isa = mr_isa(), .cols = cols, .rows = rows, .w_row = mr_row_size(type, cols),
                        .group_bytes = (size_t)(cols / 32) * k->block_bytes, .k = k, .view = 1};
    rp->bytes = (uint64_t)rp->w_row * (uint64_t)rows;
    return rp;
}

int mr_repack_is_view(const mr_repacked *rp) { return rp && rp->view; }
