/* Registry of repacked weight copies (see repack.h). A sorted array under a read-write lock: the
 * matrix kernels look up once per product, models add and remove at load and free. */
#include "quant/repack.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    const uint8_t *src;
    uint64_t bytes;        /* of the original rows */
    int type;
    int64_t cols, rows;
    size_t w_row;
    void *rp;
    size_t rp_bytes;       /* of the mapping holding the copy */
} mr_rp_entry;

/* Copies live in their own anonymous mappings with transparent huge pages requested: gigabytes of
 * copies in 4 KiB pages cost a page fault each when first written (most of the load time), and TLB
 * misses in the kernels. */
static void *mr_rp_map(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

static pthread_rwlock_t mr_rp_lock = PTHREAD_RWLOCK_INITIALIZER;
static mr_rp_entry *mr_rp_tab;
static int mr_rp_n, mr_rp_cap;
static uint64_t mr_rp_total;

int mr_repack_applies(int type, int64_t cols) {
    if (getenv("MOERUN_NO_REPACK")) return 0;
    return type == MR_TYPE_Q4_0 && mr_isa() >= MR_ISA_AVX512 && cols > 0 && cols % 32 == 0;
}

typedef struct { const void *src; int64_t cols, groups; void *dst; } mr_rp_job2;
static void mr_rp_chunk2(void *arg, long ch) {
    mr_rp_job2 *j = arg;
    int64_t g0 = (int64_t)ch * 16, g1 = g0 + 16 < j->groups ? g0 + 16 : j->groups;
    mr_q4_0_repack16(j->src, j->cols, g0, g1, j->dst);
}

int mr_repack_add(mr_pool *pool, const void *data, int type, int64_t cols, int64_t rows) {
    if (!data || !mr_repack_applies(type, cols) || rows <= 0 || rows % 16) return 1;
    const size_t w_row = mr_row_size(type, cols);
    const int64_t groups = rows / 16;
    const size_t rp_bytes = (size_t)groups * (size_t)(cols / 32) * MR_Q4_0_RP_BLOCK_BYTES;
    void *rp = mr_rp_map(rp_bytes);
    if (!rp) return -1;
    mr_rp_job2 j = {data, cols, groups, rp};
    mr_pool_run_chunks(pool, mr_rp_chunk2, &j, (long)((groups + 15) / 16));
    pthread_rwlock_wrlock(&mr_rp_lock);
    int rc = 0;
    if (mr_rp_n == mr_rp_cap) {
        int cap = mr_rp_cap ? 2 * mr_rp_cap : 64;
        mr_rp_entry *t = realloc(mr_rp_tab, sizeof *t * (size_t)cap);
        if (!t) { rc = -1; goto out; }
        mr_rp_tab = t;
        mr_rp_cap = cap;
    }
    int i = mr_rp_n;
    while (i > 0 && mr_rp_tab[i - 1].src > (const uint8_t *)data) { mr_rp_tab[i] = mr_rp_tab[i - 1]; i--; }
    mr_rp_tab[i] = (mr_rp_entry){data, (uint64_t)w_row * (uint64_t)rows, type, cols, rows, w_row, rp, rp_bytes};
    mr_rp_n++;
    mr_rp_total += (uint64_t)w_row * (uint64_t)rows;
out:
    pthread_rwlock_unlock(&mr_rp_lock);
    if (rc) munmap(rp, rp_bytes);
    return rc;
}

void mr_repack_remove(const void *data) {
    pthread_rwlock_wrlock(&mr_rp_lock);
    for (int i = 0; i < mr_rp_n; i++)
        if (mr_rp_tab[i].src == (const uint8_t *)data) {
            munmap(mr_rp_tab[i].rp, mr_rp_tab[i].rp_bytes);
            mr_rp_total -= mr_rp_tab[i].bytes;
            memmove(&mr_rp_tab[i], &mr_rp_tab[i + 1], sizeof *mr_rp_tab * (size_t)(mr_rp_n - i - 1));
            mr_rp_n--;
            break;
        }
    if (mr_rp_n == 0) { free(mr_rp_tab); mr_rp_tab = NULL; mr_rp_cap = 0; }
    pthread_rwlock_unlock(&mr_rp_lock);
}

const void *mr_repack_find(const void *W, int type, int64_t cols, int64_t *rows_left) {
    const uint8_t *w = W;
    const void *res = NULL;
    pthread_rwlock_rdlock(&mr_rp_lock);
    int lo = 0, hi = mr_rp_n - 1, k = -1;
    while (lo <= hi) { /* last entry with src <= w */
        int mid = (lo + hi) / 2;
        if (mr_rp_tab[mid].src <= w) { k = mid; lo = mid + 1; } else hi = mid - 1;
    }
    if (k >= 0) {
        const mr_rp_entry *e = &mr_rp_tab[k];
        const uint64_t off = (uint64_t)(w - e->src);
        if (off < e->bytes && e->type == type && e->cols == cols && off % (16 * (uint64_t)e->w_row) == 0) {
            const uint64_t g = off / (16 * (uint64_t)e->w_row);
            res = (const uint8_t *)e->rp + g * (uint64_t)(cols / 32) * MR_Q4_0_RP_BLOCK_BYTES;
            if (rows_left) *rows_left = e->rows - (int64_t)(off / e->w_row);
        }
    }
    pthread_rwlock_unlock(&mr_rp_lock);
    return res;
}

uint64_t mr_repack_bytes(void) {
    pthread_rwlock_rdlock(&mr_rp_lock);
    uint64_t b = mr_rp_total;
    pthread_rwlock_unlock(&mr_rp_lock);
    return b;
}
