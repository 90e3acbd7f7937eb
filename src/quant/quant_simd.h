/* The kernel tables: one table per instruction set, one entry (mr_kern) per tensor type.
 * No intrinsics here; the kernels live in *_avx2.c / *_avx512.c (and *_neon.c for ARM), and each
 * ISA's table is defined in its quant_ISA.c. The matrix engine (matmul.c) asks for the resolved
 * entry of a type under an ISA (mr_kern_get), never for a table directly.
 *
 * Fields of a WEIGHT type T (activations are rows of T's partner type P = vec_dot_type):
 *   dot    one column: *s = dot(w, y) over n values
 *   dot4   four columns: s[c] = dot(w, y + c*by), c = 0..3, with exactly the float operations (same
 *          order, same lanes) of the same ISA's dot, so GEMM == 4 x GEMV bit for bit; it only shares
 *          the unpacking of each weight block between the four columns
 *   dot4p  the same on PREPARED partner rows (P's prep below), which does less work per block
 *   gemm   blocks of nr <= MR_GEMM_NR rows x nc <= MR_GEMM_NC columns (types where decoding the
 *          weights dominates): s[c * s_col + r] = dot(w + r * w_row, y + c * by), bit for bit dot
 *   rp     a repacked row-interleaved layout (repack.h) and its kernels, or NULL
 * Fields of a PARTNER (activation) type P:
 *   from_float  floats -> rows of P (bit for bit the scalar reference quantizer)
 *   prep        a row of P -> a prepared row of prep_bytes per 32 values, for dot4p
 *   rprep       a row of P -> the activation layout of the repacked kernels (rprep_bytes per 32
 *               values); every repacked weight type with partner P under one ISA reads this layout
 *               (NULL: the repacked kernels read the rows of P as they are)
 * NULL means "none"; mr_kern_get fills the gaps from lower ISAs (see quant.c). */
#ifndef MR_QUANT_SIMD_H
#define MR_QUANT_SIMD_H
#include <stddef.h>
#include <stdint.h>
#include "quant/quant.h"

typedef void (*mr_vec_dot_x4_fn)(int n, float *s, const void *w, const void *y, size_t by);
typedef void (*mr_gemm_fn)(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc,
                           float *s, size_t s_col);
#define MR_GEMM_NR 16
#define MR_GEMM_NC 32
typedef void (*mr_prep_fn)(const void *y, void *yp, int n);

/* A repacked layout: groups of `rows` weight rows stored interleaved, block_bytes per group and
 * 32 values of a row.
 *   pack:  groups [g0, g1) of the plain matrix at src (rows of cols values) into dst (group g0 at
 *          dst + g0 * group bytes)
 *   group: the `rows` rows of one group (w: its first byte) for nc <= max_nc columns: act[c] the
 *          column's activation row (the partner's rprep layout, or its plain rows), y[c][0..rows)
 *          the outputs; bit for bit the same ISA's dot. matmul.c drives it over groups and columns. */
typedef struct {
    int rows;
    size_t block_bytes;
    void (*pack)(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst);
    void (*group)(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
    int max_nc;            /* <= MR_RP_MAX_NC */
    /* a mr_repack_interleave4 layout (the same bytes as the plain rows, only moved): the plain
     * block's head bytes; 0 for the other layouts. Such a layout can be made in place of the plain
     * rows and undone (repack.h mr_repack_in_place, mr_repack_undo): paged experts use it. */
    int i4_head;
} mr_repack_kern;
#define MR_RP_MAX_NC 8
/* The AVX2 repacked kernels of Q2_0, IQ4_NL, MXFP4 and IQ4_XS prefetch their stream MR_RP_PF_BYTES
 * ahead (blocks larger than that: the next block), one call per 64-byte line of a block: from DRAM
 * they otherwise stall on it (one thread on Zen 4, 32768 x 4096 GEMV: Q2_0 and IQ4_NL 1.8x, IQ4_XS
 * 1.4x faster). The other layouts (Q4_K, Q6_K, Q8_0, IQ3_S) and every AVX-512 kernel (AVX-512 Q4_K: 1.1-1.2x
 * slower from DRAM, 1.3x in cache) measured the same or slower with it, so they have none. */
#define MR_RP_PF_BYTES 1024
static inline void mr_rp_prefetch(const void *block, size_t bytes) {
    const char *p = (const char *)block + (bytes > MR_RP_PF_BYTES ? bytes : MR_RP_PF_BYTES);
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 0);
}

/* The layouts whose blocks are a head (the scale, head bytes) and a body of 4-byte groups (Q4_0,
 * Q8_0, IQ4_NL, MXFP4): per group and block, the R rows' heads, then per 4-byte group m the R rows'
 * bytes (so 32-bit lane r of a vector holds row r's group m). blk_bytes per 32-value block. */
void mr_repack_interleave4(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst, int R, size_t blk_bytes,
                           size_t head);

typedef struct {
    mr_vec_dot_fn dot;
    mr_vec_dot_x4_fn dot4, dot4p;
    mr_gemm_fn gemm;
    int gemm1;                /* gemm also beats dot on one column (matmul.c then uses it for GEMV) */
    const mr_repack_kern *rp;
    mr_from_float_fn from_float;
    mr_prep_fn prep, rprep;
    int prep_bytes, rprep_bytes;
    int isa;                  /* filled by mr_kern_get: the ISA the weight kernels (dot...) belong to */
} mr_kern;

/* The tables, indexed by type (entries left zero: nothing of that ISA). */
extern const mr_kern mr_kern_avx2[MR_TYPE_COUNT];
extern const mr_kern mr_kern_avx512[MR_TYPE_COUNT];
extern const mr_kern mr_kern_neon[MR_TYPE_COUNT];      /* AArch64 builds only (quant_neon.c) */
extern const mr_kern mr_kern_dotprod[MR_TYPE_COUNT];   /* AArch64 builds only (quant_dotprod.c) */
/* NEON activation quantizers (quant_act_neon.c), bit for bit the scalar ones; AArch64 builds only */
void mr_quantize_q8_0_neon(const float *src, void *dst, int64_t k);
void mr_quantize_q8_k_neon(const float *src, void *dst, int64_t k);

/* The entry a product under `isa` uses for `type` (never NULL for a known type; NULL otherwise):
 * the weight kernels (dot, dot4, dot4p, gemm, rp) all come from the highest ISA <= isa whose table
 * has a dot for the type (the scalar reference's dot otherwise, with no other kernel), so they
 * share numerics; the partner fields (from_float, prep, rprep) each from the highest ISA <= isa
 * that has one (prep and rprep from `isa` itself, since they feed that ISA's kernels). */
const mr_kern *mr_kern_get(int type, int isa);
/* One ISA's own table entry (tests, benchmarks): NULL for an unknown type or ISA. */
const mr_kern *mr_kern_isa(int type, int isa);

/* Q4_0 under AVX-512 VNNI (q4_0_avx512.c): block-sum numerics in every kernel (per 32-value block
 * the exact integer sum, then acc = fma(dw * dy, sum, acc)), and weights repacked in groups of 16
 * rows (288 bytes per group and block) multiplied with prepared activations (40 bytes per block,
 * the Q8_0 rprep under AVX-512). */
void mr_vd_q4_0_bs_avx512(int n, float *s, const void *w, const void *y);
void mr_vd4_q4_0_bs_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_q4_0_rp_prep(const void *q8_0_row, void *dst, int n);
void mr_q4_0_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
/* IQ4_NL and MXFP4 in the same 16-row kind of layout (mr_repack_interleave4, 16 rows), the numerics
 * of their AVX2 kernels; the GEMM block on plain rows packs 16 rows on the fly from enough columns */
void mr_iq4_nl_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
void mr_mxfp4_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
void mr_gemm_iq4_nl_bs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_mxfp4_bs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
#define MR_Q4_0_RP_BLOCK_BYTES 288
#define MR_Q4_0_RP_ACT_BYTES 40

/* Q4_0 under AVX2 (q4_0_avx2.c): the same block-sum numerics and prepared activations (the AVX2
 * Q8_0 rprep writes the AVX-512 layout), weights repacked in groups of 8 rows (144 bytes per group
 * and block). */
void mr_vd_q4_0_bs_avx2(int n, float *s, const void *w, const void *y);
void mr_vd4_q4_0_bs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_q4_0_rp_prep_avx2(const void *q8_0_row, void *dst, int n);
void mr_q4_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
#define MR_Q4_0_RP8_BLOCK_BYTES 144

/* Q8_0 under AVX2 (q8_0_avx2.c): block-sum numerics, 8-row repacked layout (272 bytes per group and
 * block) on the same prepared activations as Q4_0. */
void mr_vd_q8_0_bs_avx2(int n, float *s, const void *w, const void *y);
void mr_vd4_q8_0_bs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_q8_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
#define MR_Q8_0_RP8_BLOCK_BYTES 272

/* IQ4_NL and MXFP4 under AVX2 (fp4_avx2.c): block-sum numerics, 8-row repacked layouts (the size of
 * the plain blocks) on the same prepared activations. */
void mr_vd_iq4_nl_bs_avx2(int n, float *s, const void *w, const void *y);
void mr_vd4_iq4_nl_bs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vd_mxfp4_bs_avx2(int n, float *s, const void *w, const void *y);
void mr_vd4_mxfp4_bs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_iq4_nl_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
void mr_mxfp4_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
/* IQ4_XS under AVX2 (fp4_avx2.c) and AVX-512 (iq4_xs_avx512.c): per-super-block integer numerics
 * (the same bits under both), 8-row repacked layout (1104 bytes per group and super-block) on Q8_K
 * rows as they are. */
typedef struct {
    uint16_t d[8];          /* the rows' fp16 super-block scales */
    int8_t sc[8][8];        /* [32-value group j][row]: l_j - 32 */
    uint8_t q[8][4][32];    /* [j][m][32-bit lane = row]: code bytes 16j+4m..16j+4m+3 of the row */
} mr_iq4_xs_rp8;
#define MR_IQ4_XS_RP8_BLOCK_BYTES 1104
void mr_vd_iq4_xs_bs_avx2(int n, float *s, const void *w, const void *y);
void mr_vd4_iq4_xs_bs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_iq4_xs_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst);
void mr_iq4_xs_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
void mr_vd_iq4_xs_bs_avx512(int n, float *s, const void *w, const void *y);
void mr_vd4_iq4_xs_bs_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_gemm_iq4_xs_bs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s,
                              size_t s_col);
void mr_iq4_xs_rp8_group_avx512(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);

/* Q4_K under AVX-512 (q4_k_avx512.c): weights repacked in groups of 16 rows (2368 bytes per group
 * and super-block) with the numerics of the AVX-512 vec_dot, multiplied with the Q8_K rows as they
 * are. */
#define MR_Q4_K_RP16_BLOCK_BYTES 2368
void mr_q4_k_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst);
void mr_q4_k_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);

/* IQ3_S under AVX2 (quant_iq_avx2.c): per-super-block integer numerics in every kernel, weights
 * repacked in groups of 8 rows with the grid lookups done (nibbles u = (w + 15) / 2, 1104 bytes per
 * group and super-block); the repacked kernel reads the Q8_K activation rows as they are. */
void mr_iq3_s_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst);
void mr_iq3_s_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
#define MR_IQ3_S_RP8_BLOCK_BYTES 1104

/* Q2_0 (q2_0_avx2.c, q2_0_avx512.c): per-Q8_0-block exact integer sums and the scalar reference's
 * float steps (part = fma(dy0, isum0, 0), part = fma(dy1, isum1, part), acc = fma(dw, part, acc))
 * in every kernel, so each equals mr_vec_dot_q2_0 bit for bit. Repacked groups of 16 (AVX-512) or
 * 8 (AVX2) rows in the layout of q2_0_pack.c, multiplied with the Q8_0 rprep rows of Q4_0. */
void mr_q2_0_repack(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst, int R);
void mr_vd_q2_0_avx512(int n, float *s, const void *w, const void *y);
void mr_vd4_q2_0_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_q2_0_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);
void mr_vd_q2_0_avx2(int n, float *s, const void *w, const void *y);
void mr_vd4_q2_0_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_q2_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc);

#endif
