/* Q4_0 x Q8_0 under AVX-512 VNNI, with block-sum numerics and 16-row repacked weights; IQ4_NL and
 * MXFP4 (4-bit codes into a level table) in the same 16-row kind of layout, with the numerics of
 * their AVX2 kernels (fp4_avx2.c) and a GEMM block that packs plain rows on the fly.
 *
 * Numerics (every AVX-512 Q4_0 kernel: vec_dot, the 4-column kernel, the repacked GEMV/GEMM):
 *   acc = 0; for each 32-value block b in order:
 *       isum_b = sum_i (nibble_i - 8) * y_i            (exact int32)
 *       acc = fmaf(fp16(dw_b) * fp16(dy_b), (float)isum_b, acc)
 * so a row gives the same bits whichever kernel computes it (a batch equals one token at a time,
 * paged experts equal resident ones). Each block's integer sum is exact (more accurate than 8-lane
 * float partials, and the way the reference's own repacked Q4_0 kernels sum).
 *
 * Repacked layout (mr_repack_interleave4 with 16 rows): per group of 16 rows and per block, uint16 d[16] (the rows'
 * scales) then four 64-byte vectors P_m (m = 0..3) whose 32-bit lane j holds bytes 4m..4m+3 of row j's
 * nibbles: the low nibbles are values 4m..4m+3, the high nibbles 16+4m..16+4m+3. One AND and one shift
 * give vpdpbusd operands for 16 rows at once; the activation's 4-byte groups are broadcast; the -8 is
 * folded into the start value (-8 x the block's activation sum). One float multiply-add per block then
 * serves 16 rows. Prepared activations (mr_q4_0_rp_prep): per block int8 y[32], float d, int32 -8*sum. */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"

#include <stddef.h>
#include <immintrin.h>
#include <string.h>

#define Q4R_UNROLL _Pragma("GCC unroll 8")

typedef struct { uint16_t d[16]; uint8_t q[4][64]; } q4r_blk;
_Static_assert(sizeof(q4r_blk) == MR_Q4_0_RP_BLOCK_BYTES, "repacked q4_0 block (16 rows x 32 values)");
typedef struct { int8_t y[32]; float d; int32_t corr; } q4r_act;
_Static_assert(sizeof(q4r_act) == MR_Q4_0_RP_ACT_BYTES, "prepared q8_0 block for the repacked kernels");

/* ---- one row: vec_dot and 4 columns ---- */

/* int32 lanes of sum (nibble * y) - 8 * sum(y) over 4-value groups (their total is isum) */
static inline __m256i q4r_lanes(const mr_block_q4_0 *b, const int8_t *y) {
    const __m128i t = _mm_loadu_si128((const __m128i *)b->qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y);
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), nib, yv);
    return _mm256_sub_epi32(p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), yv));
}

static inline int q4r_hsum_i32(__m256i v) {
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(a);
}

void mr_vd_q4_0_bs_avx512(int n, float *s, const void *w, const void *vy) {
    const mr_block_q4_0 *x = w;
    const mr_block_q8_0 *y = vy;
    float acc = 0.0f;
    for (int b = 0; b < n / 32; b++) {
        const float d = _cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d);
        acc = __builtin_fmaf(d, (float)q4r_hsum_i32(q4r_lanes(&x[b], y[b].qs)), acc);
    }
    *s = acc;
}

/* four columns (rows of Q8_0 blocks by bytes apart): the same per-column operations, the four
 * block sums reduced together and their float steps done as one 4-lane vector */
void mr_vd4_q4_0_bs_avx512(int n, float *s, const void *w, const void *vy, size_t by) {
    const mr_block_q4_0 *x = w;
    const mr_block_q8_0 *y[4];
    for (int c = 0; c < 4; c++) y[c] = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)c * by);
    __m128 acc = _mm_setzero_ps();
    for (int b = 0; b < n / 32; b++) {
        const __m128i t = _mm_loadu_si128((const __m128i *)x[b].qs);
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
        __m256i l[4];
        Q4R_UNROLL for (int c = 0; c < 4; c++) {
            const __m256i yv = _mm256_loadu_si256((const __m256i *)y[c][b].qs);
            l[c] = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), nib, yv),
                                    _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), yv));
        }
        /* [sum l0, sum l1, sum l2, sum l3] (integer adds: exact, any order) */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(l[0], l[1]), _mm256_hadd_epi32(l[2], l[3]));
        const __m128i is = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128 dy = _mm_setr_ps(_cvtsh_ss(y[0][b].d), _cvtsh_ss(y[1][b].d), _cvtsh_ss(y[2][b].d), _cvtsh_ss(y[3][b].d));
        const __m128 d = _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(x[b].d)), dy);
        acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(is), acc);
    }
    _mm_storeu_ps(s, acc);
}


/* ---- repacked: 16 rows at a time ---- */

void mr_q4_0_rp_prep(const void *src, void *dst, int n) {
    const mr_block_q8_0 *x = src;
    q4r_act *a = dst;
    const __m256i eight = _mm256_set1_epi8(8);
    for (int b = 0; b < n / 32; b++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)x[b].qs);
        memcpy(a[b].y, x[b].qs, 32);
        a[b].d = _cvtsh_ss(x[b].d);
        a[b].corr = -q4r_hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, q));
    }
}

/* ---- the 16-row kernel of the 4-bit code types (Q4_0, IQ4_NL, MXFP4) ----
 * Per block the uint8 vpdpbusd operand u of each code and its offset o, so that level = u - o:
 *   Q4_0: u = nibble, o = 8; IQ4_NL / MXFP4: u = level + 128 by a byte shuffle of the code, o = 128,
 * and the sum starts at -o * sum(y) = corr * o / 8 (corr = -8 sum(y), the prepared activations):
 *   isum = -o sum(y) + sum u_v y_v = sum level_v y_v   (exact int32: |u y| <= 255 x 128 per product).
 * Scales: fp16 d[16] (Q4_0, IQ4_NL), E8M0 e[16] as 2^(e - 128) with MXFP4's doubled level table; the
 * float step acc = fmaf(dw * dy, (float)isum, acc) per block is the AVX2 kernels' (fp4_avx2.c). */
enum { Q4R_Q4_0, Q4R_IQ4_NL, Q4R_MXFP4 };

/* E8M0 exponents e[0..15] -> 2^(e - 128) (fp4_avx2.c's f4a_e8m0_half8 on 16 lanes) */
static inline __m512 q4r_e8m0_half16(const uint8_t *e) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(v, _mm512_set1_epi32(2)), normal, small));
}

/* 16 rows x nc columns of a group: blocks stride bytes apart, each the 16 scales then the code
 * vectors at qoff; columns a[c] (prepared), out y[c][0..15]; carry: continue the sums already in
 * y (a chunk of a longer row), else start from 0 */
static inline void q4r_rows(const uint8_t *w, size_t stride, size_t qoff, int nb, const q4r_act *const *a, float *const *y,
                            const int nc, const int kind, const int carry) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int8_t *kv = kind == Q4R_MXFP4 ? mr_kvalues_mxfp4 : mr_kvalues_iq4nl;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)kv), _mm_set1_epi8((char)0x80)));
    __m512 acc[8];
    Q4R_UNROLL for (int c = 0; c < 8; c++) acc[c] = c < nc && carry ? _mm512_loadu_ps(y[c]) : _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * stride;
        __m512i v[8];
        Q4R_UNROLL for (int m = 0; m < 4; m++) {
            const __m512i p = _mm512_loadu_si512(blk + qoff + 64 * m);
            v[m] = _mm512_and_si512(p, m4);
            v[m + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);
            if (kind != Q4R_Q4_0) {
                v[m] = _mm512_shuffle_epi8(lut, v[m]);
                v[m + 4] = _mm512_shuffle_epi8(lut, v[m + 4]);
            }
        }
        const __m512 dw = kind == Q4R_MXFP4 ? q4r_e8m0_half16(blk) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        Q4R_UNROLL for (int c = 0; c < nc; c++) {
            const q4r_act *ab = &a[c][b];
            int32_t yq[8];
            memcpy(yq, ab->y, 32);
            __m512i s0 = _mm512_set1_epi32(kind == Q4R_Q4_0 ? ab->corr : 16 * ab->corr), s1 = _mm512_setzero_si512();
            Q4R_UNROLL for (int m = 0; m < 4; m++) {
                s0 = _mm512_dpbusd_epi32(s0, v[m], _mm512_set1_epi32(yq[m]));
                s1 = _mm512_dpbusd_epi32(s1, v[m + 4], _mm512_set1_epi32(yq[m + 4]));
            }
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(ab->d)), _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[c]);
        }
    }
    Q4R_UNROLL for (int c = 0; c < nc; c++) _mm512_storeu_ps(y[c], acc[c]);
}

/* nc columns 8, 4, then 1 at a time (constant counts: the accumulators stay in registers) */
static inline void q4r_cols(const void *w, size_t stride, size_t qoff, int nb, const q4r_act *const *a, float *const *y, int nc,
                            const int kind, const int carry) {
    int c = 0;
    for (; c + 8 <= nc; c += 8) q4r_rows(w, stride, qoff, nb, a + c, y + c, 8, kind, carry);
    for (; c + 4 <= nc; c += 4) q4r_rows(w, stride, qoff, nb, a + c, y + c, 4, kind, carry);
    for (; c < nc; c++) q4r_rows(w, stride, qoff, nb, a + c, y + c, 1, kind, carry);
}
static inline void q4r_group(const void *w, size_t stride, size_t qoff, int64_t cols, const void *const *act, float *const *y,
                             int nc, const int kind) {
    q4r_cols(w, stride, qoff, (int)(cols / 32), (const q4r_act *const *)act, y, nc, kind, 0);
}

void mr_q4_0_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    q4r_group(w, sizeof(q4r_blk), offsetof(q4r_blk, q), cols, act, y, nc, Q4R_Q4_0);
}

/* IQ4_NL: fp16 d[16] then the codes (mr_repack_interleave4 with 16 rows, 18-byte blocks) */
typedef struct { uint16_t d[16]; uint8_t q[4][64]; } q4r_nl;
_Static_assert(sizeof(q4r_nl) == 16 * sizeof(mr_block_iq4_nl), "repacked iq4_nl block (16 rows x 32 values)");
void mr_iq4_nl_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    q4r_group(w, sizeof(q4r_nl), offsetof(q4r_nl, q), cols, act, y, nc, Q4R_IQ4_NL);
}

/* MXFP4: E8M0 e[16] then the codes (17-byte blocks) */
typedef struct { uint8_t e[16]; uint8_t q[4][64]; } q4r_mx;
_Static_assert(sizeof(q4r_mx) == 16 * sizeof(mr_block_mxfp4), "repacked mxfp4 block (16 rows x 32 values)");
void mr_mxfp4_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    q4r_group(w, sizeof(q4r_mx), offsetof(q4r_mx, q), cols, act, y, nc, Q4R_MXFP4);
}

/* ---- GEMM block on plain rows (paged experts, row tails) ---- */

/* blocks [i0, i0 + nb) of 16 plain rows (w_row bytes apart; blocks of blk bytes, head bytes of
 * scale then 16 of codes) into the 16-row layout at o: per block the heads, then the 16 x 4 dword
 * transpose of the codes (dword m of row r -> vector m, lane r) */
static void q4r_pack16(const uint8_t *w, size_t w_row, size_t blk, size_t head, int i0, int nb, uint8_t *o) {
    /* rows 4k..4k+3 of A_k one per 128-bit lane -> dwords 0, 1 (lo) and 2, 3 (hi) of 8 rows */
    const __m512i ilo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i ihi = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    for (int i = 0; i < nb; i++, o += 16 * blk) {
        const uint8_t *b[16];
        for (int r = 0; r < 16; r++) {
            b[r] = w + (size_t)r * w_row + (size_t)(i0 + i) * blk;
            memcpy(o + (size_t)r * head, b[r], head);
        }
#define Q4R_C(r) _mm_loadu_si128((const __m128i *)(b[r] + head))
        __m512i A[4];
        Q4R_UNROLL for (int k = 0; k < 4; k++) {
            A[k] = _mm512_inserti32x4(_mm512_castsi128_si512(Q4R_C(4 * k)), Q4R_C(4 * k + 1), 1);
            A[k] = _mm512_inserti32x4(_mm512_inserti32x4(A[k], Q4R_C(4 * k + 2), 2), Q4R_C(4 * k + 3), 3);
        }
#undef Q4R_C
        const __m512i xlo = _mm512_permutex2var_epi32(A[0], ilo, A[1]), xhi = _mm512_permutex2var_epi32(A[0], ihi, A[1]);
        const __m512i ylo = _mm512_permutex2var_epi32(A[2], ilo, A[3]), yhi = _mm512_permutex2var_epi32(A[2], ihi, A[3]);
        uint8_t *q = o + 16 * head;
        _mm512_storeu_si512(q, _mm512_shuffle_i64x2(xlo, ylo, _MM_SHUFFLE(1, 0, 1, 0)));
        _mm512_storeu_si512(q + 64, _mm512_shuffle_i64x2(xlo, ylo, _MM_SHUFFLE(3, 2, 3, 2)));
        _mm512_storeu_si512(q + 128, _mm512_shuffle_i64x2(xhi, yhi, _MM_SHUFFLE(1, 0, 1, 0)));
        _mm512_storeu_si512(q + 192, _mm512_shuffle_i64x2(xhi, yhi, _MM_SHUFFLE(3, 2, 3, 2)));
    }
}

#define Q4R_CHUNK 16  /* blocks per pass: 16 rows x 16 x 18 bytes packed, 32 columns x 16 x 40 prepared (25 KB) */
/* columns from which the rows are packed on the fly: from one (the plain one-row kernel is one fma
 * chain; 16 rows packed run 16 at once, so the GEMV on plain rows takes this block too, gemm1) */
#define Q4R_OTF_NC 1

/* mr_gemm_fn: a block of exactly 16 rows and >= Q4R_OTF_NC columns is packed a chunk of blocks at a
 * time (weights and the columns' prepared activations) and run through the repacked kernel, its
 * sums carried across chunks; other blocks row by row with the AVX2 plain kernels. Both give the
 * bits of vec_dot. */
static void q4r_gemm(int n, const void *w, size_t w_row, int nr, const void *vy, size_t by, int nc, float *s, size_t s_col,
                     const int kind) {
    const size_t blk = kind == Q4R_MXFP4 ? sizeof(mr_block_mxfp4) : sizeof(mr_block_iq4_nl), head = kind == Q4R_MXFP4 ? 1 : 2;
    const int nb = n / 32;
    if (nr == 16 && nc >= Q4R_OTF_NC) {
        uint8_t pk[Q4R_CHUNK * 16 * sizeof(mr_block_iq4_nl)] __attribute__((aligned(64)));
        q4r_act act[MR_GEMM_NC * Q4R_CHUNK];
        for (int i0 = 0; i0 < nb; i0 += Q4R_CHUNK) {
            const int nbc = nb - i0 < Q4R_CHUNK ? nb - i0 : Q4R_CHUNK;
            q4r_pack16(w, w_row, blk, head, i0, nbc, pk);
            const q4r_act *a[MR_GEMM_NC];
            float *y[MR_GEMM_NC];
            for (int c = 0; c < nc; c++) {
                mr_q4_0_rp_prep((const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)c * by) + i0, &act[c * Q4R_CHUNK], 32 * nbc);
                a[c] = &act[c * Q4R_CHUNK];
                y[c] = s + (size_t)c * s_col;
            }
            q4r_cols(pk, 16 * blk, 16 * head, nbc, a, y, nc, kind, i0 > 0);
        }
        return;
    }
    const mr_vec_dot_fn dot = kind == Q4R_MXFP4 ? mr_vd_mxfp4_bs_avx2 : mr_vd_iq4_nl_bs_avx2;
    const mr_vec_dot_x4_fn dot4 = kind == Q4R_MXFP4 ? mr_vd4_mxfp4_bs_avx2 : mr_vd4_iq4_nl_bs_avx2;
    for (int r = 0; r < nr; r++) {
        const uint8_t *x = (const uint8_t *)w + (size_t)r * w_row;
        int c = 0;
        for (; c + 4 <= nc; c += 4) {
            float t[4];
            dot4(n, t, x, (const uint8_t *)vy + (size_t)c * by, by);
            for (int k = 0; k < 4; k++) s[(size_t)(c + k) * s_col + r] = t[k];
        }
        for (; c < nc; c++) dot(n, &s[(size_t)c * s_col + r], x, (const uint8_t *)vy + (size_t)c * by);
    }
}

void mr_gemm_iq4_nl_bs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col) {
    q4r_gemm(n, w, w_row, nr, y, by, nc, s, s_col, Q4R_IQ4_NL);
}
void mr_gemm_mxfp4_bs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col) {
    q4r_gemm(n, w, w_row, nr, y, by, nc, s, s_col, Q4R_MXFP4);
}
