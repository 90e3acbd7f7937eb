/* Verify the kernels of one type against a golden file written by the reference (ggml):
 *   uint32 magic "QGLD", version 1, ggml type, rows, cols, nx, qbytes,
 *   qbytes of quantized weights (rows x cols), float32 dequant[rows][cols],
 *   float32 x[nx][cols], float32 y[nx][rows] (ggml's W x with x converted to the partner type).
 * Dequantization must match bit for bit. y is recomputed the engine's way (x to the partner type,
 * vec_dot per row) and compared relative to sum_i |w_i x_i| of the row, which bounds what any
 * summation order can change. The file is untrusted: every header field is bounded and the file
 * size must be exactly what the header implies. */
#include "moerun_tools.h"
#include "quant/quant.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define QC_MAGIC 0x444c4751u /* "QGLD" little-endian */
#define QC_HEADER 28
#define QC_MAX_DIM (1u << 20)
#define QC_MAX_ELEMS (1ull << 26) /* rows * cols and nx * cols: 256 MiB of floats at most */
#define QC_MAX_NX 4096u

const char *mr_kernel_isa_name(int isa) {
    return isa >= 0 && isa < MR_ISA_COUNT ? mr_isa_name(isa) : NULL;
}

int mr_kernel_isa_from_name(const char *name) { return mr_isa_from_name(name); }

_Static_assert(MR_KERNEL_ISA_COUNT == MR_ISA_COUNT, "moerun.h's ISA count");
int mr_kernel_isa_available(int isa) { return mr_isa_available(isa); }
int mr_kernel_isa_current(void) { return mr_isa(); }
int mr_kernel_isa_set(int isa) {
    if (mr_set_isa(isa)) {
        mr_set_error("ISA %s is not available here (this CPU and build: %s and below)",
                     isa >= 0 && isa < MR_ISA_COUNT ? mr_isa_name(isa) : "?", mr_isa_name(mr_cpu_best_isa()));
        return -1;
    }
    return 0;
}

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* whole file into memory, at most max bytes */
static uint8_t *qc_slurp(const char *path, size_t max, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { mr_set_error("%s: cannot open", path); return NULL; }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        mr_set_error("%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((uint64_t)st.st_size > max || st.st_size < QC_HEADER) {
        mr_set_error("%s: size %lld is not that of a golden quant file", path, (long long)st.st_size);
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = mr_malloc(n);
    if (!buf) { mr_set_error("%s: out of memory", path); fclose(f); return NULL; }
    if (fread(buf, 1, n, f) != n) {
        mr_set_error("%s: short read", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *size = n;
    return buf;
}

int mr_quant_check_file(const char *path, int isa, mr_quant_check_result *res) {
    memset(res, 0, sizeof *res);
    res->type = -1;
    res->isa = isa;
    if (isa < 0 || isa >= MR_ISA_COUNT) { mr_set_error("quant-check: unknown instruction set %d", isa); return -1; }
    if (!mr_kernel_isa_available(isa)) {
        mr_set_error("quant-check: this CPU cannot run %s kernels", mr_isa_name(isa));
        return -1;
    }

    size_t size = 0;
    uint8_t *file = qc_slurp(path, (size_t)1 << 31, &size);
    if (!file) return -1;
    int rc = -1;
    float *deq = NULL, *yq = NULL;
    uint8_t *wq = NULL, *xq = NULL;

    uint32_t magic = rd32(file), version = rd32(file + 4), type = rd32(file + 8), rows = rd32(file + 12),
             cols = rd32(file + 16), nx = rd32(file + 20), qbytes = rd32(file + 24);
    if (magic != QC_MAGIC) { mr_set_error("%s: not a golden quant file (bad magic)", path); goto done; }
    if (version != 1) { mr_set_error("%s: unsupported version %u", path, version); goto done; }
    const mr_type_traits *t = mr_type_get((int)(type < MR_TYPE_COUNT ? type : MR_TYPE_COUNT));
    if (!t) { mr_set_error("%s: unknown type id %u", path, type); goto done; }
    res->type = (int)type;
    snprintf(res->type_name, sizeof res->type_name, "%s", t->name);
    if (rows == 0 || cols == 0 || nx == 0 || rows > QC_MAX_DIM || cols > QC_MAX_DIM || nx > QC_MAX_NX) {
        mr_set_error("%s: shape rows=%u cols=%u nx=%u out of range", path, rows, cols, nx);
        goto done;
    }
    if ((uint64_t)rows * cols > QC_MAX_ELEMS || (uint64_t)nx * cols > QC_MAX_ELEMS) {
        mr_set_error("%s: %u x %u weights, %u activations too large", path, rows, cols, nx);
        goto done;
    }
    size_t w_row = mr_row_size((int)type, cols);
    if (!w_row) { mr_set_error("%s: %u columns is not a multiple of the %s block size %d", path, cols, t->name, t->block_size); goto done; }
    if ((uint64_t)w_row * rows != qbytes) {
        mr_set_error("%s: qbytes %u, but %u rows of %u %s values take %llu", path, qbytes, rows, cols, t->name,
                     (unsigned long long)w_row * rows);
        goto done;
    }
    res->rows = (int)rows;
    res->cols = (int)cols;
    res->nx = (int)nx;
    uint64_t n_w = (uint64_t)rows * cols, n_x = (uint64_t)nx * cols, n_y = (uint64_t)nx * rows;
    uint64_t want = QC_HEADER + (uint64_t)qbytes + 4 * (n_w + n_x + n_y);
    if (want != size) {
        mr_set_error("%s: file has %zu bytes, header implies %llu", path, size, (unsigned long long)want);
        goto done;
    }
    if (!t->to_float || !t->vec_dot) { mr_set_error("%s: type %s has no dequantizer or dot product", path, t->name); goto done; }
    const mr_type_traits *pt = mr_type_get(t->vec_dot_type);
    if (!pt || !pt->from_float) { mr_set_error("%s: partner type of %s cannot be quantized", path, t->name); goto done; }
    size_t x_row = mr_row_size(t->vec_dot_type, cols);
    if (!x_row) { mr_set_error("%s: %u columns do not fit the partner type %s", path, cols, pt->name); goto done; }

    /* aligned copies of every section: the kernels read blocks through struct pointers */
    wq = mr_aligned_alloc(64, qbytes);
    deq = mr_aligned_alloc(64, (size_t)(n_w + n_x + n_y) * sizeof(float));
    yq = mr_aligned_alloc(64, (size_t)n_w * sizeof(float));
    xq = mr_aligned_alloc(64, x_row);
    if (!wq || !deq || !yq || !xq) { mr_set_error("%s: out of memory", path); goto done; }
    memcpy(wq, file + QC_HEADER, qbytes);
    memcpy(deq, file + QC_HEADER + qbytes, (size_t)(n_w + n_x + n_y) * sizeof(float));
    const float *g_deq = deq, *g_x = deq + n_w, *g_y = deq + n_w + n_x;

    /* 1. dequantization, bit for bit (yq holds ours) */
    for (uint32_t r = 0; r < rows; r++) t->to_float(wq + (size_t)r * w_row, yq + (size_t)r * cols, cols);
    for (uint64_t i = 0; i < n_w; i++) {
        if (mr_f32_bits(yq[i]) == mr_f32_bits(g_deq[i])) continue;
        res->dequant_mismatches++;
        double d = fabs((double)yq[i] - (double)g_deq[i]);
        if (isnan(d)) d = INFINITY;
        if (d > res->dequant_max_abs) res->dequant_max_abs = d;
    }

    /* 2. y = W x through the partner type and the kernel of the requested ISA */
    mr_vec_dot_fn dot = mr_type_vec_dot_isa((int)type, isa);
    res->isa_fallback = isa != MR_ISA_SCALAR && dot == NULL;
    if (!dot) dot = t->vec_dot;
    for (uint32_t c = 0; c < nx; c++) {
        const float *x = g_x + (size_t)c * cols;
        pt->from_float(x, xq, cols);
        for (uint32_t r = 0; r < rows; r++) {
            const float *w = g_deq + (size_t)r * cols;
            double scale = 0;
            for (uint32_t i = 0; i < cols; i++) scale += fabs((double)w[i] * (double)x[i]);
            float got;
            dot((int)cols, &got, wq + (size_t)r * w_row, xq);
            double want_y = g_y[(size_t)c * rows + r], err = fabs((double)got - want_y);
            double rel = scale > 0 ? err / scale : (err > 0 ? INFINITY : 0);
            if (!isfinite(got) || isnan(rel)) rel = INFINITY;
            if (rel > res->y_max_rel) {
                res->y_max_rel = rel;
                res->y_worst_row = (int)r;
                res->y_worst_col = (int)c;
            }
        }
    }
    res->pass = res->dequant_mismatches == 0 && res->y_max_rel <= MR_QUANT_CHECK_Y_TOL;
    rc = 0;
done:
    mr_aligned_free(wq);
    mr_aligned_free(deq);
    mr_aligned_free(yq);
    mr_aligned_free(xq);
    free(file);
    return rc;
}
