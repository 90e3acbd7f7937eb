/* Quant kernels: golden files from the reference (bit-exact dequantization, W x within tolerance
 * on every ISA), the type table against the golden files and the block structs, quantize ->
 * dequantize round trips, dot products against dequantized arithmetic, malformed golden files. */
#include "test.h"
#include "moerun_tools.h"
#include "base/base.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_impl.h"
#include "quant/matmul.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

/* the types whose scalar kernels live in quant_ref.c (the IQ/FP4 ones are in quant_ref_iq.c) */
static const int own_types[] = {
    MR_TYPE_F16, MR_TYPE_BF16, MR_TYPE_Q4_0, MR_TYPE_Q4_1, MR_TYPE_Q5_0, MR_TYPE_Q5_1, MR_TYPE_Q8_0,
    MR_TYPE_Q2_K, MR_TYPE_Q3_K, MR_TYPE_Q4_K, MR_TYPE_Q5_K, MR_TYPE_Q6_K, MR_TYPE_TQ1_0, MR_TYPE_TQ2_0,
    MR_TYPE_Q1_0, MR_TYPE_Q2_0,
};
#define N_OWN ((int)(sizeof own_types / sizeof own_types[0]))

static int is_own(int type) {
    for (int i = 0; i < N_OWN; i++)
        if (own_types[i] == type) return 1;
    return 0;
}

/* ---- golden files ---- */

typedef struct {
    uint32_t magic, version, type, rows, cols, nx, qbytes;
} golden_hdr;

#define MAX_GOLDEN 64
static char golden_path[MAX_GOLDEN][512];
static int n_golden;

/* the shared files, and this repository's own (types the shared set lacks: tests/golden/quants/README.md) */
#define REPO_GOLDEN "tests/golden/quants"
static void list_golden_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && n_golden < MAX_GOLDEN) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".bin"))
            snprintf(golden_path[n_golden++], sizeof golden_path[0], "%s/%s", dir, e->d_name);
    }
    closedir(d);
}
static void list_golden(void) {
    list_golden_dir(t_shared("golden/quants"));
    list_golden_dir(REPO_GOLDEN);
}

static int read_hdr(const char *path, golden_hdr *h) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int ok = fread(h, sizeof *h, 1, f) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* whole golden file: header + sections */
typedef struct {
    golden_hdr h;
    uint8_t *q;
    float *deq, *x, *y;
    void *buf;
} golden;

static int load_golden(const char *path, golden *g) {
    memset(g, 0, sizeof *g);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    g->buf = malloc((size_t)size);
    int ok = g->buf && fread(g->buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) { free(g->buf); return -1; }
    memcpy(&g->h, g->buf, sizeof g->h);
    uint8_t *p = (uint8_t *)g->buf + sizeof g->h;
    size_t nw = (size_t)g->h.rows * g->h.cols, nxc = (size_t)g->h.nx * g->h.cols;
    /* copies so that floats and blocks are aligned */
    g->q = mr_aligned_alloc(64, g->h.qbytes);
    g->deq = mr_aligned_alloc(64, (nw + nxc + (size_t)g->h.nx * g->h.rows) * sizeof(float));
    memcpy(g->q, p, g->h.qbytes);
    memcpy(g->deq, p + g->h.qbytes, (nw + nxc + (size_t)g->h.nx * g->h.rows) * sizeof(float));
    g->x = g->deq + nw;
    g->y = g->x + nxc;
    return 0;
}

static void free_golden(golden *g) {
    mr_aligned_free(g->q);
    mr_aligned_free(g->deq);
    free(g->buf);
}

/* The table agrees with every golden file (including the IQ/FP4 ones) and with the structs. */
static void test_table_vs_golden(void) {
    CHECK(n_golden >= 26, "expected the 26 golden quant files in %s, found %d", t_shared("golden/quants"), n_golden);
    for (int i = 0; i < n_golden; i++) {
        golden_hdr h;
        CHECK(read_hdr(golden_path[i], &h) == 0, "%s: unreadable", golden_path[i]);
        const mr_type_traits *t = mr_type_get((int)h.type);
        CHECK(t != NULL, "%s: type %u not in the table", golden_path[i], h.type);
        if (!t) continue;
        CHECK(h.cols % (uint32_t)t->block_size == 0, "%s: cols %u vs block %d", golden_path[i], h.cols, t->block_size);
        CHECK(t->type_size * (h.cols / (uint32_t)t->block_size) * h.rows == h.qbytes,
              "%s (%s): table says %zu bytes per %d values, file has %u bytes for %u x %u", golden_path[i], t->name,
              t->type_size, t->block_size, h.qbytes, h.rows, h.cols);
        CHECK(mr_row_size((int)h.type, h.cols) * h.rows == h.qbytes, "%s: mr_row_size", golden_path[i]);
        /* the file name is the type name */
        const char *base = strrchr(golden_path[i], '/') + 1;
        CHECK(!strncmp(base, t->name, strlen(t->name)) && base[strlen(t->name)] == '.', "%s: type %s", base, t->name);
    }
    struct { int type; size_t size, block; } s[] = {
        {MR_TYPE_Q4_0, sizeof(mr_block_q4_0), MR_QK4_0}, {MR_TYPE_Q4_1, sizeof(mr_block_q4_1), MR_QK4_1},
        {MR_TYPE_Q5_0, sizeof(mr_block_q5_0), MR_QK5_0}, {MR_TYPE_Q5_1, sizeof(mr_block_q5_1), MR_QK5_1},
        {MR_TYPE_Q8_0, sizeof(mr_block_q8_0), MR_QK8_0}, {MR_TYPE_Q8_1, sizeof(mr_block_q8_1), MR_QK8_1},
        {MR_TYPE_Q2_K, sizeof(mr_block_q2_k), MR_QK_K}, {MR_TYPE_Q3_K, sizeof(mr_block_q3_k), MR_QK_K},
        {MR_TYPE_Q4_K, sizeof(mr_block_q4_k), MR_QK_K}, {MR_TYPE_Q5_K, sizeof(mr_block_q5_k), MR_QK_K},
        {MR_TYPE_Q6_K, sizeof(mr_block_q6_k), MR_QK_K}, {MR_TYPE_Q8_K, sizeof(mr_block_q8_k), MR_QK_K},
        {MR_TYPE_TQ1_0, sizeof(mr_block_tq1_0), MR_QK_K}, {MR_TYPE_TQ2_0, sizeof(mr_block_tq2_0), MR_QK_K},
        {MR_TYPE_Q1_0, sizeof(mr_block_q1_0), MR_QK1_0}, {MR_TYPE_Q2_0, sizeof(mr_block_q2_0), MR_QK2_0},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        const mr_type_traits *t = mr_type_get(s[i].type);
        CHECK(t && t->type_size == s[i].size && (size_t)t->block_size == s[i].block, "%s: table %zu/%d, struct %zu/%zu",
              mr_type_name(s[i].type), t ? t->type_size : 0, t ? t->block_size : 0, s[i].size, s[i].block);
    }
}

/* Every own type: a golden file exists, dequantizes bit for bit, W x within tolerance, on every
 * ISA this CPU has (ISAs without a kernel run the scalar reference). */
static void test_golden_own_types(void) {
    int isa_max = mr_cpu_best_isa();
    for (int k = 0; k < N_OWN; k++) {
        int found = 0;
        for (int i = 0; i < n_golden; i++) {
            golden_hdr h;
            if (read_hdr(golden_path[i], &h) || (int)h.type != own_types[k]) continue;
            found = 1;
            for (int isa = 0; isa <= isa_max; isa++) {
                if (!mr_isa_available(isa)) continue;
                mr_quant_check_result r;
                int rc = mr_quant_check_file(golden_path[i], isa, &r);
                CHECK(rc == 0, "%s: %s", golden_path[i], mr_last_error());
                CHECK(r.dequant_mismatches == 0, "%s: %ld dequantized values differ (max %g)", r.type_name,
                      r.dequant_mismatches, r.dequant_max_abs);
                CHECK(r.y_max_rel <= MR_QUANT_CHECK_Y_TOL, "%s on %s: y rel err %g at row %d col %d", r.type_name,
                      mr_isa_name(isa), r.y_max_rel, r.y_worst_row, r.y_worst_col);
                CHECK(r.pass, "%s on %s", r.type_name, mr_isa_name(isa));
            }
        }
        CHECK(found, "no golden file for %s", mr_type_name(own_types[k]));
    }
}

/* Re-quantizing ggml's dequantized weights with our reference quantizer gives back ggml's bytes
 * for the types whose quantizer is a fixed point on its own grid. */
static void test_golden_requantize(void) {
    static const int types[] = {MR_TYPE_F16, MR_TYPE_BF16, MR_TYPE_Q8_0, MR_TYPE_Q4_0, MR_TYPE_Q5_0,
                                MR_TYPE_Q1_0, MR_TYPE_TQ2_0, MR_TYPE_TQ1_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        for (int i = 0; i < n_golden; i++) {
            golden_hdr h;
            if (read_hdr(golden_path[i], &h) || (int)h.type != types[k]) continue;
            golden g;
            if (load_golden(golden_path[i], &g)) { CHECK(0, "%s: load", golden_path[i]); continue; }
            const mr_type_traits *t = mr_type_get(types[k]);
            uint8_t *q = mr_aligned_alloc(64, g.h.qbytes);
            size_t row = mr_row_size(types[k], g.h.cols);
            for (uint32_t r = 0; r < g.h.rows; r++) t->from_float(g.deq + (size_t)r * g.h.cols, q + r * row, g.h.cols);
            long diff = 0;
            for (uint32_t b = 0; b < g.h.qbytes; b++) diff += q[b] != g.q[b];
            CHECK(diff == 0, "%s: %ld of %u bytes differ after re-quantizing", t->name, diff, g.h.qbytes);
            mr_aligned_free(q);
            free_golden(&g);
        }
    }
}

/* Q2_0: our quantizer gives mainline's bytes for the source weights the golden file was made from
 * (ties at half a step, a zero block, scales outside fp16's normal range, negative extremes), and
 * the random-code file holds every 2-bit code (3 = +2d, which mainline's quantizer never writes). */
static void test_q2_0_golden(void) {
    golden g, gc;
    CHECK(load_golden(REPO_GOLDEN "/q2_0.bin", &g) == 0, "q2_0.bin missing");
    CHECK(load_golden(REPO_GOLDEN "/q2_0.codes.bin", &gc) == 0, "q2_0.codes.bin missing");
    FILE *f = fopen(REPO_GOLDEN "/q2_0.src.f32", "rb");
    CHECK(f != NULL, "q2_0.src.f32 missing");
    if (!f) return;
    size_t n = (size_t)g.h.rows * g.h.cols;
    float *src = malloc(n * sizeof(float));
    CHECK(fread(src, sizeof(float), n, f) == n && fgetc(f) == EOF, "q2_0.src.f32: not %zu floats", n);
    fclose(f);
    uint8_t *q = mr_aligned_alloc(64, g.h.qbytes);
    size_t row = mr_row_size(MR_TYPE_Q2_0, g.h.cols);
    for (uint32_t r = 0; r < g.h.rows; r++) mr_quantize_q2_0(src + (size_t)r * g.h.cols, q + r * row, g.h.cols);
    long diff = 0;
    for (uint32_t b = 0; b < g.h.qbytes; b++) diff += q[b] != g.q[b];
    CHECK(diff == 0, "q2_0: %ld of %u bytes differ from mainline's quantization", diff, g.h.qbytes);
    int codes[4] = {0};
    for (uint32_t b = 0; b < gc.h.qbytes; b++)
        if (b % sizeof(mr_block_q2_0) >= 2)
            for (int k = 0; k < 4; k++) codes[gc.q[b] >> (2 * k) & 3]++;
    CHECK(codes[0] && codes[1] && codes[2] && codes[3], "q2_0.codes.bin: codes %d %d %d %d", codes[0], codes[1],
          codes[2], codes[3]);
    /* every ISA's dot gives mainline's y bit for bit (tests/golden/quants/README.md) */
    static const char *files[] = {REPO_GOLDEN "/q2_0.bin", REPO_GOLDEN "/q2_0.codes.bin"};
    for (int fi = 0; fi < 2; fi++)
        for (int isa = 0; isa <= mr_cpu_best_isa(); isa++) {
            if (!mr_isa_available(isa)) continue;
            mr_quant_check_result r;
            CHECK(mr_quant_check_file(files[fi], isa, &r) == 0, "%s: %s", files[fi], mr_last_error());
            CHECK(r.y_max_rel == 0 && r.dequant_mismatches == 0, "%s on %s: y rel err %g (row %d col %d), %ld dequant mismatches",
                  files[fi], mr_isa_name(isa), r.y_max_rel, r.y_worst_row, r.y_worst_col, r.dequant_mismatches);
        }
    mr_aligned_free(q);
    free(src);
    free_golden(&g);
    free_golden(&gc);
}

/* ---- synthetic data ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float grand(void) { /* roughly normal */
    return (frand() + frand() + frand() + frand()) * 0.8f;
}

/* Round trips: every value comes back within the type's step. Bounds are per block from the
 * stored scales, so a wrong layout (values swapped between positions) fails. */
static void test_roundtrip(void) {
    enum { N = 1024 };
    float x[N], back[N];
    uint8_t q[N * 4];
    for (int i = 0; i < N; i++) x[i] = grand();
    x[5] = 0; x[77] = -3.1f; x[300] = 2.9f; /* extremes inside blocks */

    /* F16/BF16: exactly the rounded value */
    mr_quantize_f16(x, q, N); mr_dequant_f16(q, back, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += back[i] != mr_fp16_to_fp32(mr_fp32_to_fp16(x[i]));
    CHECK(bad == 0, "f16: %d values", bad);
    mr_quantize_bf16(x, q, N); mr_dequant_bf16(q, back, N);
    bad = 0;
    for (int i = 0; i < N; i++) bad += back[i] != mr_bf16_to_fp32(mr_fp32_to_bf16(x[i]));
    CHECK(bad == 0, "bf16: %d values", bad);

    /* fp16 NaN comes out as a quiet float NaN, as ggml's conversion gives (signaling payloads too) */
    uint16_t nan_h[3] = {0x7c01, 0xfe00, 0x7c00};
    mr_dequant_f16(nan_h, back, 3);
    CHECK(mr_f32_bits(back[0]) == 0x7fc02000u && mr_f32_bits(back[1]) == 0xffc00000u && mr_f32_bits(back[2]) == 0x7f800000u,
          "f16 NaN/inf: %08x %08x %08x", mr_f32_bits(back[0]), mr_f32_bits(back[1]), mr_f32_bits(back[2]));

    /* block types with one or two fp16 parameters: within half a step, plus the fp16 rounding of
     * the scale (2^-11 relative) times the value; Q4_0/Q5_0 clamp the extreme opposite to the
     * largest-magnitude value (it would need level +8/+16), which may be a whole step off */
    struct { int type, qmax; } lin[] = {
        {MR_TYPE_Q8_0, 127}, {MR_TYPE_Q4_0, 8}, {MR_TYPE_Q5_0, 16}, {MR_TYPE_Q4_1, 0}, {MR_TYPE_Q5_1, 0},
    };
    for (size_t k = 0; k < sizeof lin / sizeof lin[0]; k++) {
        const mr_type_traits *t = mr_type_get(lin[k].type);
        t->from_float(x, q, N);
        t->to_float(q, back, N);
        int over = 0;
        double worst = 0;
        for (int b = 0; b < N / 32; b++) {
            uint16_t dh, mh = 0;
            memcpy(&dh, q + b * t->type_size, 2);
            if (!lin[k].qmax) memcpy(&mh, q + b * t->type_size + 2, 2);
            double d = mr_fp16_to_fp32(dh), m = fabs(mr_fp16_to_fp32(mh));
            for (int j = 0; j < 32; j++) {
                double xv = x[32 * b + j], e = fabs((double)back[32 * b + j] - xv);
                double allowed = 0.5 * fabs(d) + (fabs(xv) + m) * 0x1p-10;
                if (lin[k].qmax && lin[k].qmax != 127 && xv / d > lin[k].qmax - 1 - 0.5) allowed += 0.5 * fabs(d);
                over += e > allowed;
                if (e / fabs(d) > worst) worst = e / fabs(d);
            }
        }
        CHECK(over == 0, "%s: %d values off by more than half a step (worst %.3f steps)", t->name, over, worst);
    }

    /* K-quants and ternary: relative RMS error typical of the bit width */
    struct { int type; double max_rel_rms; } kq[] = {
        {MR_TYPE_Q2_K, 0.45}, {MR_TYPE_Q3_K, 0.25}, {MR_TYPE_Q4_K, 0.12}, {MR_TYPE_Q5_K, 0.06},
        {MR_TYPE_Q6_K, 0.03}, {MR_TYPE_Q8_K, 0.01},
    };
    for (size_t k = 0; k < sizeof kq / sizeof kq[0]; k++) {
        const mr_type_traits *t = mr_type_get(kq[k].type);
        t->from_float(x, q, N);
        t->to_float(q, back, N);
        double se = 0, sx = 0;
        for (int i = 0; i < N; i++) { se += (back[i] - x[i]) * (double)(back[i] - x[i]); sx += (double)x[i] * x[i]; }
        double rel = sqrt(se / sx);
        CHECK(rel <= kq[k].max_rel_rms, "%s: relative RMS error %.4f", t->name, rel);
        CHECK(rel > 0 || kq[k].type == MR_TYPE_Q8_K, "%s: suspiciously exact", t->name);
    }

    /* ternary types: exactly sign(round(x / amax)) * amax */
    float tern[N];
    for (int i = 0; i < N; i++) tern[i] = (float)((int)(frand() * 1.5f)) * 0.25f; /* -0.25, 0, 0.25 */
    static const int tt[] = {MR_TYPE_TQ1_0, MR_TYPE_TQ2_0};
    for (int k = 0; k < 2; k++) {
        const mr_type_traits *t = mr_type_get(tt[k]);
        t->from_float(tern, q, N);
        t->to_float(q, back, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += back[i] != tern[i];
        CHECK(bad == 0, "%s: %d of %d ternary values not reproduced", t->name, bad, N);
    }

    /* Q1_0: sign times the block's mean |x| */
    mr_quantize_q1_0(x, q, N);
    mr_dequant_q1_0(q, back, N);
    bad = 0;
    for (int b = 0; b < N / 128; b++) {
        float s = 0;
        for (int j = 0; j < 128; j++) s += fabsf(x[b * 128 + j]);
        float d = mr_fp16_to_fp32(mr_fp32_to_fp16(s / 128));
        for (int j = 0; j < 128; j++) bad += back[b * 128 + j] != (x[b * 128 + j] >= 0 ? d : -d);
    }
    CHECK(bad == 0, "q1_0: %d values", bad);

    /* Q2_0: d = fp16(max |x|), every value within half a step of d plus d's fp16 rounding */
    mr_quantize_q2_0(x, q, N);
    mr_dequant_q2_0(q, back, N);
    bad = 0;
    for (int b = 0; b < N / 64; b++) {
        float amax = 0;
        for (int j = 0; j < 64; j++) amax = fmaxf(amax, fabsf(x[b * 64 + j]));
        const mr_block_q2_0 *blk = (const mr_block_q2_0 *)q + b;
        bad += blk->d != mr_fp32_to_fp16(amax);
        for (int j = 0; j < 64; j++)
            bad += fabs((double)back[b * 64 + j] - x[b * 64 + j]) > 0.5 * amax + amax * 0x1p-10;
    }
    CHECK(bad == 0, "q2_0: %d values or scales", bad);
}

/* Partner quantizers: Q8_K sums and scale, Q8_1 stored sum, all-zero blocks. */
static void test_partner_quantizers(void) {
    enum { N = 512 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = grand();
    for (int i = 256; i < 256 + 32; i++) x[i] = 0; /* one zero Q8_0/Q8_1 block */
    mr_block_q8_k k8[N / 256];
    mr_quantize_q8_k(x, k8, N);
    for (int b = 0; b < N / 256; b++) {
        int bad = 0, at127 = 0;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += k8[b].qs[16 * g + j];
            bad += s != k8[b].bsums[g];
        }
        for (int j = 0; j < 256; j++) {
            at127 += k8[b].qs[j] == -127;
            bad += fabsf(k8[b].d * k8[b].qs[j] - x[256 * b + j]) > fabsf(k8[b].d) * 0.5001f;
        }
        CHECK(bad == 0, "q8_K block %d: %d bad sums/values", b, bad);
        CHECK(at127 >= 1, "q8_K block %d: the largest value must map to -127", b);
    }
    mr_block_q8_1 q81[N / 32];
    mr_quantize_q8_1(x, q81, N);
    /* ggml stores s = fp16(d * sum(q)) with the unrounded float d = amax / 127 */
    for (int b = 0; b < N / 32; b++) {
        int s = 0;
        float amax = 0;
        for (int j = 0; j < 32; j++) s += q81[b].qs[j];
        /* separate loop: GCC 12 for AArch64 crashes vectorizing an fmaxf and an int reduction together */
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        float d = amax / 127.0f;
        CHECK(q81[b].d == mr_fp32_to_fp16(d), "q8_1 block %d: d", b);
        CHECK(q81[b].s == mr_fp32_to_fp16(d * (float)s), "q8_1 block %d: s = %04x, sum %d", b, q81[b].s, s);
    }
    mr_block_q8_0 q80[N / 32];
    mr_quantize_q8_0(x, q80, N);
    int zero_ok = q80[8].d == 0 && q81[8].d == 0 && q81[8].s == 0;
    for (int j = 0; j < 32; j++) zero_ok &= q80[8].qs[j] == 0 && q81[8].qs[j] == 0;
    CHECK(zero_ok, "an all-zero block must quantize to zeros");
    for (int b = 0; b < N / 32; b++) {
        int same = q81[b].d == q80[b].d;
        for (int j = 0; j < 32; j++) same &= q81[b].qs[j] == q80[b].qs[j];
        CHECK(same, "q8_1 block %d: quants differ from q8_0", b);
    }
}

/* vec_dot (scalar and every SIMD kernel present) equals the dot product of the dequantized
 * weights and the dequantized partner activations, up to float summation error. */
static void partner_dequant(int ptype, const void *xq, float *out, int n) {
    if (ptype == MR_TYPE_Q8_1) { /* no to_float in the table: d * q */
        const mr_block_q8_1 *b = xq;
        for (int i = 0; i < n; i++) out[i] = mr_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
        return;
    }
    mr_type_get(ptype)->to_float(xq, out, n);
}

static void test_vec_dot_vs_dequant(void) {
    enum { N = 1024 };
    static const int types[] = {MR_TYPE_F32, MR_TYPE_F16, MR_TYPE_BF16, MR_TYPE_Q4_0, MR_TYPE_Q4_1, MR_TYPE_Q5_0,
                                MR_TYPE_Q5_1, MR_TYPE_Q8_0, MR_TYPE_Q2_K, MR_TYPE_Q3_K, MR_TYPE_Q4_K, MR_TYPE_Q5_K,
                                MR_TYPE_Q6_K, MR_TYPE_TQ1_0, MR_TYPE_TQ2_0, MR_TYPE_Q1_0, MR_TYPE_Q2_0};
    float w[N], x[N], wd[N], xd[N];
    uint8_t *wq = mr_aligned_alloc(64, N * 4), *xq = mr_aligned_alloc(64, N * 4 + 64);
    int isa_max = mr_cpu_best_isa();
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const mr_type_traits *t = mr_type_get(types[k]), *pt = mr_type_get(t->vec_dot_type);
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < N; i++) { w[i] = grand() * (rep + 1); x[i] = grand() * (rep == 2 ? 100 : 1); }
            if (rep == 3) for (int i = 0; i < N; i += 3) x[i] = 0;
            t->from_float(w, wq, N);
            pt->from_float(x, xq, N);
            t->to_float(wq, wd, N);
            partner_dequant(t->vec_dot_type, xq, xd, N);
            double ref = 0, mag = 0;
            for (int i = 0; i < N; i++) { ref += (double)wd[i] * xd[i]; mag += fabs((double)wd[i] * xd[i]); }
            if (types[k] == MR_TYPE_Q4_1 || types[k] == MR_TYPE_Q5_1) {
                /* ggml's min term uses the activation block's fp16 s instead of d * sum(q) */
                size_t bs = t->type_size;
                const mr_block_q8_1 *xb = (const mr_block_q8_1 *)xq;
                for (int b = 0; b < N / 32; b++) {
                    uint16_t m;
                    memcpy(&m, wq + b * bs + 2, 2);
                    int sq = 0;
                    for (int j = 0; j < 32; j++) sq += xb[b].qs[j];
                    ref += (double)mr_fp16_to_fp32(m) *
                           ((double)mr_fp16_to_fp32(xb[b].s) - (double)mr_fp16_to_fp32(xb[b].d) * sq);
                }
            }
            for (int isa = 0; isa <= isa_max; isa++) {
                if (!mr_isa_available(isa)) continue;
                mr_vec_dot_fn dot = isa == 0 ? t->vec_dot : mr_type_vec_dot_isa(types[k], isa);
                if (!dot) continue;
                float got;
                dot(N, &got, wq, xq);
                double rel = fabs(got - ref) / mag;
                CHECK(rel <= 1e-6, "%s on %s rep %d: dot %.9g, dequantized %.9g (rel %.3g)", t->name,
                      mr_isa_name(isa), rep, got, ref, rel);
            }
        }
    }
    mr_aligned_free(wq);
    mr_aligned_free(xq);
}

/* mr_matmul: same per-element result whatever the batch size and thread count. */
static void test_matmul(void) {
    enum { R = 13, C = 512, B = 3 };
    static const int types[] = {MR_TYPE_Q4_K, MR_TYPE_Q8_0, MR_TYPE_F16, MR_TYPE_Q5_1, MR_TYPE_F32, MR_TYPE_Q2_0};
    float *w = malloc(sizeof(float) * R * C), *x = malloc(sizeof(float) * C * B);
    float y1[R * B], y2[R * B], yc[R];
    for (int i = 0; i < R * C; i++) w[i] = grand();
    for (int i = 0; i < C * B; i++) x[i] = grand();
    mr_pool *pool = mr_pool_create(2);
    CHECK(pool != NULL, "pool");
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const mr_type_traits *t = mr_type_get(types[k]);
        size_t row = mr_row_size(types[k], C);
        uint8_t *wq = mr_aligned_alloc(64, row * R);
        for (int r = 0; r < R; r++) t->from_float(w + r * C, wq + r * row, C);
        CHECK(mr_matmul(NULL, wq, types[k], R, C, x, B, y1) == 0, "%s: %s", t->name, mr_last_error());
        CHECK(mr_matmul(pool, wq, types[k], R, C, x, B, y2) == 0, "%s: %s", t->name, mr_last_error());
        CHECK(!memcmp(y1, y2, sizeof y1), "%s: threads change the result", t->name);
        for (int c = 0; c < B; c++) {
            CHECK(mr_matmul(pool, wq, types[k], R, C, x + c * C, 1, yc) == 0, "%s", t->name);
            CHECK(!memcmp(yc, y1 + c * R, sizeof yc), "%s: column %d alone differs from the batch", t->name, c);
        }
        /* against float arithmetic on the dequantized weights (activation rounding aside) */
        float wd[C];
        double worst = 0;
        for (int r = 0; r < R; r++) {
            t->to_float(wq + r * row, wd, C);
            double ref = 0, mag = 0;
            for (int i = 0; i < C; i++) { ref += (double)wd[i] * x[i]; mag += fabs((double)wd[i] * x[i]); }
            double e = fabs(y1[r] - ref) / mag;
            if (e > worst) worst = e;
        }
        CHECK(worst < 0.01, "%s: matmul far from dequantized product (%g)", t->name, worst);
        mr_aligned_free(wq);
    }
    mr_pool_free(pool);
    free(w);
    free(x);
}

/* ---- malformed golden files are rejected, not trusted ---- */

static const char *write_tmp(const void *data, size_t n) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/mr_test_quant_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fwrite(data, 1, n, f);
    fclose(f);
    return path;
}

static void test_malformed(void) {
    golden_hdr h = {0x444c4751, 1, MR_TYPE_Q4_0, 2, 64, 1, 2 * 2 * 18};
    size_t n = sizeof h + h.qbytes + 4 * (2 * 64 + 64 + 2);
    uint8_t *buf = calloc(1, n + 16);
    for (int b = 0; b < 4; b++) memset(buf + sizeof h + 18 * b + 2, 0x88, 16); /* d = 0, levels 8: +0.0 */
    mr_quant_check_result r;
    struct { const char *what; golden_hdr h; long size_delta; } cases[] = {
        {"valid", h, 0},
        {"truncated", h, -1},
        {"trailing byte", h, 1},
        {"bad magic", {0x444c4752, 1, MR_TYPE_Q4_0, 2, 64, 1, 72}, 0},
        {"version 2", {0x444c4751, 2, MR_TYPE_Q4_0, 2, 64, 1, 72}, 0},
        {"unknown type", {0x444c4751, 1, 99, 2, 64, 1, 72}, 0},
        {"retired type id", {0x444c4751, 1, 4, 2, 64, 1, 72}, 0},
        {"integer type", {0x444c4751, 1, MR_TYPE_I32, 2, 64, 1, 72}, 0},
        {"qbytes mismatch", {0x444c4751, 1, MR_TYPE_Q4_0, 2, 64, 1, 70}, 0},
        {"cols not a block multiple", {0x444c4751, 1, MR_TYPE_Q4_0, 2, 63, 1, 72}, 0},
        {"zero rows", {0x444c4751, 1, MR_TYPE_Q4_0, 0, 64, 1, 0}, 0},
        {"huge rows", {0x444c4751, 1, MR_TYPE_Q4_0, 0x80000000u, 64, 1, 72}, 0},
        {"huge nx", {0x444c4751, 1, MR_TYPE_Q4_0, 2, 64, 0xffffffffu, 72}, 0},
        {"overflowing product", {0x444c4751, 1, MR_TYPE_F32, 0x100000, 0x100000, 1, 0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(buf, &cases[i].h, sizeof h);
        const char *p = write_tmp(buf, (size_t)((long)n + cases[i].size_delta));
        mr_clear_error();
        int rc = mr_quant_check_file(p, MR_ISA_SCALAR, &r);
        if (i == 0) {
            /* zero weights and activations: a well-formed file, and y = 0 is right */
            CHECK(rc == 0 && r.pass, "valid file: rc %d (%s)", rc, mr_last_error());
        } else {
            CHECK(rc == -1, "%s: accepted", cases[i].what);
            CHECK(strlen(mr_last_error()) > 0, "%s: no error message", cases[i].what);
        }
        remove(p);
    }
    /* a valid file whose y is wrong fails the check (but is not an error) */
    memcpy(buf, &h, sizeof h);
    float one = 1.0f;
    memset(buf + sizeof h, 0x99, h.qbytes);                            /* nonzero weights */
    for (int i = 0; i < 64; i++) memcpy(buf + sizeof h + h.qbytes + 4 * (128 + i), &one, 4); /* x = 1 */
    const char *p = write_tmp(buf, n);
    CHECK(mr_quant_check_file(p, MR_ISA_SCALAR, &r) == 0, "%s", mr_last_error());
    CHECK(!r.pass && r.dequant_mismatches > 0 && r.y_max_rel > 0.1, "garbage golden data passed");
    remove(p);
    CHECK(mr_quant_check_file("/nonexistent/q4_0.bin", MR_ISA_SCALAR, &r) == -1, "missing file accepted");
    CHECK(mr_quant_check_file(t_shared("golden/quants"), MR_ISA_SCALAR, &r) == -1, "directory accepted");
    free(buf);
}

int main(void) {
    list_golden();
    RUN(test_table_vs_golden);
    RUN(test_golden_own_types);
    RUN(test_golden_requantize);
    RUN(test_q2_0_golden);
    RUN(test_roundtrip);
    RUN(test_partner_quantizers);
    RUN(test_vec_dot_vs_dequant);
    RUN(test_matmul);
    RUN(test_malformed);
    return t_finish();
}
