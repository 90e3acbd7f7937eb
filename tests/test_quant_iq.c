/* i-quant and FP4 types against the reference's golden files (../shared/golden/quants/TYPE.bin):
 * dequantization bit for bit, W x within 1e-5 of sum|w||x| per row; the reference quantizers
 * (IQ4_NL, MXFP4, NVFP4); every SIMD vec_dot against the scalar one on random blocks. */
#include "test.h"
#include "quant/quant.h"
#include "quant/quant_impl.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"
#include "quant/quant_simd.h"
#include "quant/quant_iq_simd.h"
#include "base/base.h"

#include <math.h>
#include <stdint.h>

/* activations x[n] in the partner type of `type` (quant_ref.c's Q8_0 / Q8_K quantizers, ggml's
 * quantize_row_q8_0 / quantize_row_q8_K); returns a malloc'd buffer */
static void *quantize_act(int type, const float *x, int n) {
    const int pt = mr_type_get(type)->vec_dot_type;
    void *y = malloc(mr_row_size(pt, n));
    mr_type_get(pt)->from_float(x, y, n);
    return y;
}

/* ---- golden files ---- */
typedef struct {
    uint32_t type, rows, cols, nx, qbytes;
    uint8_t *q;          /* 64-byte aligned copy of the quantized rows */
    float *deq, *x, *y;
} golden;

static void golden_free(golden *g) {
    mr_aligned_free(g->q);
    free(g->deq); free(g->x); free(g->y);
}

static int golden_load(const char *name, golden *g) {
    memset(g, 0, sizeof *g);
    char rel[128];
    snprintf(rel, sizeof rel, "golden/quants/%s.bin", name);
    FILE *f = fopen(t_shared(rel), "rb");
    if (!f) return -1;
    uint32_t h[7];
    int ok = fread(h, 4, 7, f) == 7 && h[0] == 0x444c4751 && h[1] == 1;
    if (ok) {
        g->type = h[2]; g->rows = h[3]; g->cols = h[4]; g->nx = h[5]; g->qbytes = h[6];
        size_t nw = (size_t)g->rows * g->cols;
        g->q = mr_aligned_alloc(64, g->qbytes + 64);
        g->deq = malloc(nw * 4);
        g->x = malloc((size_t)g->nx * g->cols * 4);
        g->y = malloc((size_t)g->nx * g->rows * 4);
        ok = g->q && g->deq && g->x && g->y &&
             fread(g->q, 1, g->qbytes, f) == g->qbytes && fread(g->deq, 4, nw, f) == nw &&
             fread(g->x, 4, (size_t)g->nx * g->cols, f) == (size_t)g->nx * g->cols &&
             fread(g->y, 4, (size_t)g->nx * g->rows, f) == (size_t)g->nx * g->rows;
    }
    fclose(f);
    if (!ok) { golden_free(g); return -1; }
    return 0;
}

/* checks one type against its golden file: dequant bit-exact, y within tolerance using the
 * vec_dot of `isa` (scalar reference for MR_ISA_SCALAR) */
static void check_golden(const char *name, int type, int isa) {
    golden g;
    CHECK(golden_load(name, &g) == 0, "cannot read golden %s", name);
    if (g.q == NULL) return;
    const mr_type_traits *t = mr_type_get(type);
    CHECK(t && (int)g.type == type, "%s: type %u", name, g.type);
    CHECK(mr_row_size(type, g.cols) * g.rows == g.qbytes, "%s: %u bytes for %ux%u", name,
          g.qbytes, g.rows, g.cols);
    if (!t || (int)g.type != type || mr_row_size(type, g.cols) * g.rows != g.qbytes) { golden_free(&g); return; }
    const size_t rs = mr_row_size(type, g.cols);

    float *deq = malloc(sizeof(float) * g.rows * g.cols);
    t->to_float(g.q, deq, (int64_t)g.rows * g.cols);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < (size_t)g.rows * g.cols; i++)
        if (mr_f32_bits(deq[i]) != mr_f32_bits(g.deq[i])) { if (!bad) first = i; bad++; }
    CHECK(bad == 0, "%s: %zu dequantized values differ, first at %zu: %.9g vs golden %.9g", name,
          bad, first, deq[first], g.deq[first]);
    free(deq);

    mr_vec_dot_fn dot = mr_type_vec_dot_isa(type, isa);
    if (!dot) { golden_free(&g); return; }
    double worst = 0;
    for (uint32_t ix = 0; ix < g.nx; ix++) {
        const float *x = g.x + (size_t)ix * g.cols;
        void *xq = quantize_act(type, x, (int)g.cols);
        for (uint32_t r = 0; r < g.rows; r++) {
            float s = NAN;
            dot((int)g.cols, &s, g.q + r * rs, xq);
            double mag = 0;
            for (uint32_t k = 0; k < g.cols; k++) mag += fabs(g.deq[(size_t)r * g.cols + k]) * fabs(x[k]);
            double err = fabs((double)s - g.y[(size_t)ix * g.rows + r]) / (mag > 0 ? mag : 1);
            if (!(err <= worst)) worst = err;   /* NaN propagates */
        }
        free(xq);
    }
    CHECK(worst <= 1e-5, "%s (%s): W x relative error %.3g > 1e-5", name, mr_isa_name(isa), worst);
    golden_free(&g);
}

static const struct { const char *name; int type; } iq_types[] = {
    {"iq2_xxs", MR_TYPE_IQ2_XXS}, {"iq2_xs", MR_TYPE_IQ2_XS}, {"iq2_s", MR_TYPE_IQ2_S},
    {"iq3_xxs", MR_TYPE_IQ3_XXS}, {"iq3_s", MR_TYPE_IQ3_S}, {"iq1_s", MR_TYPE_IQ1_S},
    {"iq1_m", MR_TYPE_IQ1_M}, {"iq4_nl", MR_TYPE_IQ4_NL}, {"iq4_xs", MR_TYPE_IQ4_XS},
    {"mxfp4", MR_TYPE_MXFP4}, {"nvfp4", MR_TYPE_NVFP4},
};
#define N_IQ (int)(sizeof iq_types / sizeof iq_types[0])

#define GOLDEN_CASE(nm, ty) static void test_golden_##nm(void) { check_golden(#nm, ty, MR_ISA_SCALAR); }
GOLDEN_CASE(iq2_xxs, MR_TYPE_IQ2_XXS)
GOLDEN_CASE(iq2_xs, MR_TYPE_IQ2_XS)
GOLDEN_CASE(iq2_s, MR_TYPE_IQ2_S)
GOLDEN_CASE(iq3_xxs, MR_TYPE_IQ3_XXS)
GOLDEN_CASE(iq3_s, MR_TYPE_IQ3_S)
GOLDEN_CASE(iq1_s, MR_TYPE_IQ1_S)
GOLDEN_CASE(iq1_m, MR_TYPE_IQ1_M)
GOLDEN_CASE(iq4_nl, MR_TYPE_IQ4_NL)
GOLDEN_CASE(iq4_xs, MR_TYPE_IQ4_XS)
GOLDEN_CASE(mxfp4, MR_TYPE_MXFP4)
GOLDEN_CASE(nvfp4, MR_TYPE_NVFP4)

/* block sizes and bytes per block of the table rows this file is responsible for */
static void test_table_rows(void) {
    static const struct { int type, bs; size_t ts; int partner; } want[] = {
        {MR_TYPE_IQ2_XXS, 256, sizeof(mr_block_iq2_xxs), MR_TYPE_Q8_K},
        {MR_TYPE_IQ2_XS, 256, sizeof(mr_block_iq2_xs), MR_TYPE_Q8_K},
        {MR_TYPE_IQ2_S, 256, sizeof(mr_block_iq2_s), MR_TYPE_Q8_K},
        {MR_TYPE_IQ3_XXS, 256, sizeof(mr_block_iq3_xxs), MR_TYPE_Q8_K},
        {MR_TYPE_IQ3_S, 256, sizeof(mr_block_iq3_s), MR_TYPE_Q8_K},
        {MR_TYPE_IQ1_S, 256, sizeof(mr_block_iq1_s), MR_TYPE_Q8_K},
        {MR_TYPE_IQ1_M, 256, sizeof(mr_block_iq1_m), MR_TYPE_Q8_K},
        {MR_TYPE_IQ4_NL, 32, sizeof(mr_block_iq4_nl), MR_TYPE_Q8_0},
        {MR_TYPE_IQ4_XS, 256, sizeof(mr_block_iq4_xs), MR_TYPE_Q8_K},
        {MR_TYPE_MXFP4, 32, sizeof(mr_block_mxfp4), MR_TYPE_Q8_0},
        {MR_TYPE_NVFP4, 64, sizeof(mr_block_nvfp4), MR_TYPE_Q8_0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mr_type_traits *t = mr_type_get(want[i].type);
        CHECK(t && t->block_size == want[i].bs && t->type_size == want[i].ts &&
              t->vec_dot_type == want[i].partner, "type %d", want[i].type);
    }
}

/* derived tables match the grids they come from; sign table = 7 bits + even parity */
static void test_grid_tables(void) {
    int bad = 0;
    for (int i = 0; i < 512; i++)
        for (int t = 0; t < 4; t++)
            bad += ((mr_iq3s_grid_nib[i] >> (4 * t)) & 0xf) != ((mr_iq3s_grid[i] >> (8 * t)) & 0xff);
    CHECK(bad == 0, "iq3s_grid_nib: %d values differ from iq3s_grid", bad);
    bad = 0;
    for (int i = 0; i < 512; i++)
        for (int t = 0; t < 4; t++)
            bad += ((mr_iq3s_grid_nib8[i + 512 * (t / 2)] >> (4 * (t % 2))) & 0xf) != ((mr_iq3s_grid[i] >> (8 * t)) & 0xff);
    CHECK(bad == 0, "iq3s_grid_nib8: %d values differ from iq3s_grid", bad);
    bad = 0;
    for (int i = 0; i < 256; i++)
        for (int t = 0; t < 8; t++)
            bad += 8 + 17 * ((mr_iq2xxs_grid_planes[i] >> t) & 1) + 35 * ((mr_iq2xxs_grid_planes[256 + i] >> t) & 1) !=
                   (int)((mr_iq2xxs_grid[i] >> (8 * t)) & 0xff);
    CHECK(bad == 0, "iq2xxs_grid_planes: %d values differ from iq2xxs_grid", bad);
    static const int lv3[8] = {4, 12, 20, 28, 36, 44, 52, 62};
    bad = 0;
    for (int i = 0; i < 256; i++)
        for (int t = 0; t < 4; t++)
            bad += lv3[(mr_iq3xxs_grid_nib[i] >> (4 * t)) & 0xf & 7] != (int)((mr_iq3xxs_grid[i] >> (8 * t)) & 0xff) ||
                   ((mr_iq3xxs_grid_nib[i] >> (4 * t)) & 8) != 0;
    CHECK(bad == 0, "iq3xxs_grid_nib: %d values differ from iq3xxs_grid", bad);
    bad = 0;
    for (int i = 0; i < 128; i++) {
        int par = __builtin_popcount((unsigned)i) & 1;
        bad += mr_ksigns_iq2xs[i] != (i | par << 7);
        for (int j = 0; j < 8; j++)
            bad += ((mr_ksigns64[i] >> (8 * j)) & 0xff) != ((mr_ksigns_iq2xs[i] >> j) & 1 ? 0xffu : 0u);
    }
    CHECK(bad == 0, "ksigns tables: %d mismatches", bad);
}

/* ---- reference quantizers ---- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float rndf(void) { return (float)((rnd() >> 8) * (1.0 / 16777216.0)) * 2.f - 1.f; } /* [-1, 1) */

/* MXFP4 / NVFP4 are idempotent on their own grid: quantizing the golden dequantized values must
 * give back the same values (codes may differ only for zeros: -0 becomes +0). */
static void requant_roundtrip(const char *name, int type) {
    golden g;
    CHECK(golden_load(name, &g) == 0, "cannot read golden %s", name);
    if (!g.q) return;
    const mr_type_traits *t = mr_type_get(type);
    size_t nw = (size_t)g.rows * g.cols;
    uint8_t *q = malloc(g.qbytes);
    float *back = malloc(nw * 4);
    t->from_float(g.deq, q, (int64_t)nw);
    t->to_float(q, back, (int64_t)nw);
    size_t bad = 0;
    for (size_t i = 0; i < nw; i++) bad += back[i] != g.deq[i];
    CHECK(bad == 0, "%s: %zu of %zu values change on re-quantization", name, bad, nw);
    free(q); free(back);
    golden_free(&g);
}

static void test_quantize_mxfp4(void) {
    requant_roundtrip("mxfp4", MR_TYPE_MXFP4);
    /* hand case: amax 3.0 -> exponent floor(log2 3) - 2 + 127 = 126, half scale 2^-2; 3.0 = 12 * 0.25
     * (code 7), -1.0 = -4 * 0.25 (code 12), 0.3 nearest 0.25 (code 1) */
    float x[32] = {3.0f, -1.0f, 0.3f};
    mr_block_mxfp4 b;
    mr_quantize_mxfp4(x, &b, 32);
    CHECK(b.e == 126 && b.qs[0] == 0x07 && b.qs[1] == 0x0c && b.qs[2] == 0x01 && b.qs[3] == 0 &&
          b.qs[16 - 1] == 0, "e %d qs %02x %02x %02x", b.e, b.qs[0], b.qs[1], b.qs[2]);
}

static void test_quantize_nvfp4(void) {
    requant_roundtrip("nvfp4", MR_TYPE_NVFP4);
    /* hand case: sub-block amax 6 -> scale 1.0 = UE4M3 0x38 (exponent 7, mantissa 0); value 6 is
     * code 7; sub-block of zeros -> scale code 0 */
    float x[64] = {0};
    x[16] = 6.0f; x[17] = -2.0f; x[24] = 0.5f;
    mr_block_nvfp4 b;
    mr_quantize_nvfp4(x, &b, 64);
    CHECK(b.d[0] == 0 && b.d[1] == 0x38 && b.d[2] == 0 && b.d[3] == 0, "scales %02x %02x", b.d[0], b.d[1]);
    CHECK(b.qs[8] == 0x17 && b.qs[9] == 0x0c, "qs %02x %02x", b.qs[8], b.qs[9]);
    float back[64];
    mr_dequant_nvfp4(&b, back, 64);
    CHECK(back[16] == 6.0f && back[17] == -2.0f && back[24] == 0.5f && back[18] == 0.f, "values");
}

static void test_quantize_iq4_nl(void) {
    /* random blocks: 4-bit non-linear levels keep the x^2-weighted error small, and the fit is
     * never worse than the plain scale -max/127 */
    enum { N = 32 * 64 };
    float x[N], back[N];
    mr_block_iq4_nl q[N / 32];
    for (int i = 0; i < N; i++) x[i] = rndf() * (float)(1 + i / 32);
    mr_quantize_iq4_nl(x, q, N);
    mr_dequant_iq4_nl(q, back, N);
    int worse = 0;
    double e2 = 0, x2 = 0;
    for (int b = 0; b < N / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++) if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        const float d0 = -max / 127.f;
        double err = 0, err0 = 0;
        for (int j = 0; j < 32; j++) {
            /* plain rounding to the nearest level at scale d0 */
            float best = 1e30f;
            for (int l = 0; l < 16; l++) {
                static const int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
                float e = fabsf(d0 * v[l] - xb[j]);
                if (e < best) best = e;
            }
            double w = (double)xb[j] * xb[j];
            err += w * (back[32 * b + j] - xb[j]) * (back[32 * b + j] - xb[j]);
            err0 += w * best * best;
            e2 += (back[32 * b + j] - xb[j]) * (back[32 * b + j] - xb[j]);
            x2 += (double)xb[j] * xb[j];
        }
        worse += err > err0 * 1.01 + 1e-12;
    }
    CHECK(worse == 0, "%d blocks fit worse than the plain scale", worse);
    CHECK(sqrt(e2 / x2) < 0.1, "relative RMS error %.3f", sqrt(e2 / x2));
    /* all-zero block: scale 0, every code 8, as ggml */
    float z[32] = {0};
    mr_quantize_iq4_nl(z, q, 32);
    int all8 = q[0].d == 0;
    for (int j = 0; j < 16; j++) all8 &= q[0].qs[j] == 0x88;
    CHECK(all8, "zero block d %04x qs %02x", q[0].d, q[0].qs[0]);
}

/* ---- SIMD kernels against the scalar reference on random blocks ---- */
static void random_weights(int type, uint8_t *w, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    const mr_type_traits *t = mr_type_get(type);
    size_t nb = bytes / t->type_size;
    /* fp16 scales: random but finite and moderate (sign random) */
    for (size_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * t->type_size;
        uint16_t h = mr_fp32_to_fp16(rndf() * 0.01f);
        switch (type) {
        case MR_TYPE_MXFP4: p[0] = (uint8_t)(118 + rnd() % 12); break;
        case MR_TYPE_NVFP4: for (int s = 0; s < 4; s++) p[s] = (uint8_t)(rnd() % 0x7f); break;
        case MR_TYPE_IQ1_M: {
            uint16_t sc[4];
            memcpy(sc, p + 48, 8);
            for (int s = 0; s < 4; s++) sc[s] = (uint16_t)((sc[s] & 0x0fff) | (((h >> (4 * s)) & 0xf) << 12));
            memcpy(p + 48, sc, 8);
            break;
        }
        default: memcpy(p, &h, 2); break;
        }
    }
}

static mr_vec_dot_x4_fn x4_of(int type, int isa) {
    const mr_kern *k = mr_kern_isa(type, isa);
    return k ? k->dot4 : NULL;
}

/* the ISA's vec_dot against the scalar reference on random rows (and the golden files); its
 * 4-column kernel must give vec_dot's result for each column bit for bit */
static void check_simd(int isa, const char *variant) {
    if (mr_set_isa(isa) != 0) { printf("# %s not supported here, skipped\n", mr_isa_name(isa)); return; }
    for (int ti = 0; ti < N_IQ; ti++) {
        const int type = iq_types[ti].type;
        mr_vec_dot_fn f = mr_type_vec_dot_isa(type, isa), ref = mr_type_get(type)->vec_dot;
        mr_vec_dot_x4_fn f4 = x4_of(type, isa);
        if (!f) continue;
        /* lengths in super-blocks, plus odd block counts (1..7 and 37 blocks) for the 32-value
         * types, whose kernels take 4 and 2 blocks per step with a tail */
        const int ns[] = {256, 512, 1024, 2816, 4096, 32, 64, 96, 128, 160, 192, 224, 1184};
        const int nn = mr_type_get(type)->block_size < 256 ? 13 : 5;
        const int at = mr_type_get(type)->vec_dot_type;
        double worst = 0;
        int x4_bad = 0;
        for (int ni = 0; ni < nn; ni++) {
            const int n = ns[ni];
            if (n % mr_type_get(type)->block_size) continue; /* NVFP4 blocks are 64 wide */
            for (int rep = 0; rep < 6; rep++) {
                size_t bytes = mr_row_size(type, n), xb = mr_row_size(at, n);
                uint8_t *w0 = mr_aligned_alloc(64, bytes + 64);
                /* every other row misaligned for SIMD loads (by 1 byte, or 2 where the block has
                 * uint16 fields, as rows of such types always start at even offsets) */
                uint8_t *w = w0 + (rep % 2) * (mr_type_get(type)->type_size % 2 ? 1 : 2);
                float *x = malloc(sizeof(float) * (size_t)n), *wd = malloc(sizeof(float) * (size_t)n);
                uint8_t *x4 = malloc(4 * xb);
                random_weights(type, w, bytes);
                mr_type_get(type)->to_float(w, wd, n);
                float s4[4] = {NAN, NAN, NAN, NAN};
                for (int c = 0; c < 4; c++) {
                    for (int i = 0; i < n; i++) x[i] = rndf() * (rep == 5 ? 100.f : 1.f);
                    void *xq = quantize_act(type, x, n);
                    memcpy(x4 + c * xb, xq, xb);
                    free(xq);
                    float s = NAN, sr = NAN;
                    f(n, &s, w, x4 + c * xb);
                    ref(n, &sr, w, x4 + c * xb);
                    double mag = 0;
                    for (int i = 0; i < n; i++) mag += fabs(wd[i]) * fabs(x[i]);
                    double err = fabs((double)s - sr) / (mag > 0 ? mag : 1);
                    if (!(err <= worst)) worst = err;
                }
                if (f4) {
                    f4(n, s4, w, x4, xb);
                    for (int c = 0; c < 4; c++) {
                        float s = NAN;
                        f(n, &s, w, x4 + c * xb);
                        x4_bad += memcmp(&s, &s4[c], sizeof s) != 0;
                    }
                }
                free(x4); free(x); free(wd); mr_aligned_free(w0);
            }
        }
        printf("# %s %s%s: worst relative error vs scalar %.3g%s\n", iq_types[ti].name, mr_isa_name(isa), variant,
               worst, f4 ? ", 4-column kernel checked" : "");
        CHECK(worst <= 1e-5, "%s %s%s: relative error %.3g vs scalar", iq_types[ti].name, mr_isa_name(isa), variant, worst);
        CHECK(x4_bad == 0, "%s %s%s: 4-column kernel differs from vec_dot in %d results", iq_types[ti].name,
              mr_isa_name(isa), variant, x4_bad);
        check_golden(iq_types[ti].name, type, isa);
    }
    mr_set_isa(mr_cpu_best_isa());
}

/* x86 GEMM blocks (AVX-512, and AVX2 IQ3_S: rows repacked on the fly): every (row, column) result equals vec_dot's bit for bit, for partial blocks
 * too (nr 1..MR_GEMM_NR, nc 1..MR_GEMM_NC), and for the 32-value types with lengths that leave 1, 2
 * or 3 blocks after the groups of 4 and span several scratch segments */
static void check_gemm(const char *variant) {
    static const int isas[] = {MR_ISA_AVX2, MR_ISA_AVX512};
    static const int nrs[] = {1, 2, 3, 4, 5, 8, 15, 16}, ncs[] = {1, 2, 3, 5, 14, 31, 32};
    for (int ii = 0; ii < 2; ii++)
    for (int ti = 0; ti < N_IQ; ti++) {
        const int type = iq_types[ti].type, isa = isas[ii];
        if (mr_set_isa(isa) != 0) continue;
        mr_gemm_fn gm = mr_kern_isa(type, isa)->gemm;
        mr_vec_dot_fn f = mr_type_vec_dot_isa(type, isa);
        if (!gm || !f) continue;
        const int bs = mr_type_get(type)->block_size;
        /* 2304: more than one chunk of the AVX2 IQ3_S on-the-fly repack (8 super-blocks) */
        const int lens[3] = {1024, bs < 256 ? 32 * 131 : 2304, bs < 256 ? 32 * 37 : 512};
        int bad = 0, calls = 0;
        for (int li = 0; li < 3; li++) {
            const int n = lens[li], R = 18, C = 37, at = mr_type_get(type)->vec_dot_type;
            const size_t wr = mr_row_size(type, n), xb = mr_row_size(at, n);
            uint8_t *w = malloc(wr * R), *x = malloc(xb * C);
            float *xf = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * R * C), *ref = malloc(sizeof(float) * R * C);
            random_weights(type, w, wr * R);
            for (int c = 0; c < C; c++) {
                for (int i = 0; i < n; i++) xf[i] = rndf() * (c % 3 == 2 ? 100.f : 1.f);
                void *xq = quantize_act(type, xf, n);
                memcpy(x + c * xb, xq, xb);
                free(xq);
            }
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) f(n, &ref[(size_t)c * R + r], w + r * wr, x + c * xb);
            /* blocks of every shape: rows from r0 in steps of nr, columns from c0 in steps of nc */
            for (size_t a = 0; a < sizeof nrs / sizeof nrs[0]; a++)
                for (size_t b = 0; b < sizeof ncs / sizeof ncs[0]; b++) {
                    const int nr = nrs[a], nc = ncs[b];
                    if (li > 0 && (a + b) % 3) continue;   /* fewer shapes on the other lengths */
                    for (int k = 0; k < R * C; k++) y[k] = NAN;
                    for (int c0 = 0; c0 < C; c0 += nc)
                        for (int r0 = 0; r0 < R; r0 += nr) {
                            const int br = R - r0 < nr ? R - r0 : nr, bc = C - c0 < nc ? C - c0 : nc;
                            gm(n, w + r0 * wr, wr, br, x + c0 * xb, xb, bc, y + (size_t)c0 * R + r0, R);
                            calls++;
                        }
                    for (int k = 0; k < R * C; k++) bad += memcmp(&ref[k], &y[k], sizeof(float)) != 0;
                }
            free(w); free(x); free(xf); free(y); free(ref);
        }
        printf("# %s %s%s GEMM blocks: %d calls, %d results differ from vec_dot\n", iq_types[ti].name, mr_isa_name(isa),
               variant, calls, bad);
        CHECK(bad == 0, "%s %s%s: %d GEMM block results differ from vec_dot", iq_types[ti].name, mr_isa_name(isa), variant, bad);
    }
    mr_set_isa(mr_cpu_best_isa());
}

/* every i-quant and MXFP4 has a vec_dot and a 4-column kernel in both x86 tables; the MoE types
 * IQ4_NL, IQ4_XS, MXFP4, IQ3_S, IQ2_XXS in both AArch64 tables (issue 12) */
static void test_simd_tables(void) {
#if MR_ARCH_ARM64
    static const int arm[] = {MR_TYPE_IQ4_NL, MR_TYPE_IQ4_XS, MR_TYPE_MXFP4, MR_TYPE_IQ3_S, MR_TYPE_IQ2_XXS};
    for (size_t i = 0; i < sizeof arm / sizeof arm[0]; i++) {
        const mr_kern *kn = mr_kern_isa(arm[i], MR_ISA_NEON), *kd = mr_kern_isa(arm[i], MR_ISA_DOTPROD);
        CHECK(kn->dot && kd->dot, "%s: missing vec_dot", mr_type_name(arm[i]));
        CHECK(kn->dot4 && kd->dot4, "%s: missing 4-column kernel", mr_type_name(arm[i]));
    }
#elif MR_ARCH_X86
    for (int ti = 0; ti < N_IQ; ti++) {
        const int t = iq_types[ti].type;
        if (t == MR_TYPE_NVFP4) continue;   /* quant_kern_x86.h (quant_avx2.c / quant_avx512.c) */
        const mr_kern *k2 = mr_kern_isa(t, MR_ISA_AVX2), *k5 = mr_kern_isa(t, MR_ISA_AVX512);
        CHECK(k2->dot && k5->dot, "%s: missing vec_dot", iq_types[ti].name);
        CHECK(k2->dot4 && k5->dot4, "%s: missing 4-column kernel", iq_types[ti].name);
    }
#endif
}

/* IQ4_XS, IQ4_NL and MXFP4 have the same block-sum numerics under AVX2 and AVX-512 (fp4_avx2.c,
 * iq4_xs_avx512.c, q4_0_avx512.c): vec_dot and the 4-column kernels give the same bits under both,
 * also on rows of extreme values */
static void test_fp4_isas_same_bits(void) {
    if (!mr_isa_available(MR_ISA_AVX512) || !mr_isa_available(MR_ISA_AVX2)) return;
    static const int types[] = {MR_TYPE_IQ4_XS, MR_TYPE_IQ4_NL, MR_TYPE_MXFP4};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int t = types[ti], at = mr_type_get(t)->vec_dot_type;
        const mr_kern *k2 = mr_kern_isa(t, MR_ISA_AVX2), *k5 = mr_kern_isa(t, MR_ISA_AVX512);
        int bad = 0, n_cmp = 0;
        for (int trial = 0; trial < 40; trial++) {
            const int n = 256 * (1 + trial % 9);
            const size_t wr = mr_row_size(t, n), xb = mr_row_size(at, n);
            uint8_t *w = malloc(wr), *x = malloc(4 * xb);
            float *xf = malloc(sizeof(float) * (size_t)n);
            random_weights(t, w, wr);
            for (int c = 0; c < 4; c++) {
                for (int i = 0; i < n; i++) xf[i] = trial % 4 == 3 ? (i % 2 ? 1e3f : -1e3f) : rndf() * (c + 1);
                void *xq = quantize_act(t, xf, n);
                memcpy(x + c * xb, xq, xb);
                free(xq);
            }
            float a4[4], b4[4];
            k2->dot4(n, a4, w, x, xb);
            k5->dot4(n, b4, w, x, xb);
            for (int c = 0; c < 4; c++) {
                float a, b;
                k2->dot(n, &a, w, x + c * xb);
                k5->dot(n, &b, w, x + c * xb);
                bad += memcmp(&a, &b, sizeof a) != 0 || memcmp(&a4[c], &b4[c], sizeof a) != 0;
                n_cmp += 2;
            }
            free(w); free(x); free(xf);
        }
        printf("# %s avx2 == avx512: %d of %d results differ\n", mr_type_name(t), bad, n_cmp);
        CHECK(bad == 0, "%s: %d AVX2 / AVX-512 results differ", mr_type_name(t), bad);
    }
}

static void test_simd_avx2(void) { check_simd(MR_ISA_AVX2, ""); }
static void test_simd_neon(void) { check_simd(MR_ISA_NEON, ""); }
static void test_simd_dotprod(void) { check_simd(MR_ISA_DOTPROD, ""); }
static void test_simd_avx512(void) {
    check_simd(MR_ISA_AVX512, "");
#if MR_ARCH_X86
    check_gemm("");
    /* the kernels for AVX-512 CPUs without VBMI (where this CPU has it, the above took the VBMI ones) */
    mr_avx512_no_vbmi = 1;
    check_simd(MR_ISA_AVX512, " (no VBMI)");
    check_gemm(" (no VBMI)");
    mr_avx512_no_vbmi = 0;
#endif
}

int main(void) {
    RUN(test_table_rows);
    RUN(test_grid_tables);
    RUN(test_golden_iq2_xxs);
    RUN(test_golden_iq2_xs);
    RUN(test_golden_iq2_s);
    RUN(test_golden_iq3_xxs);
    RUN(test_golden_iq3_s);
    RUN(test_golden_iq1_s);
    RUN(test_golden_iq1_m);
    RUN(test_golden_iq4_nl);
    RUN(test_golden_iq4_xs);
    RUN(test_golden_mxfp4);
    RUN(test_golden_nvfp4);
    RUN(test_quantize_mxfp4);
    RUN(test_quantize_nvfp4);
    RUN(test_quantize_iq4_nl);
    RUN(test_simd_tables);
    RUN(test_simd_avx2);
    RUN(test_simd_avx512);
    RUN(test_fp4_isas_same_bits);
    RUN(test_simd_neon);
    RUN(test_simd_dotprod);
    return t_finish();
}
