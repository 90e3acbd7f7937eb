/* Q8_0 x Q8_0 under AVX2 in the float order of ggml-cpu's x86 Q8_0 dot (the golden reference's and
 * the scalar mr_vec_dot_q8_0's), with 8-row repacked weights.
 *
 * Numerics (every AVX2 Q8_0 kernel, bit for bit the scalar reference): 8 float lanes l; per 32-value
 * block b in order, isum_bl = sum of products 4l..4l+3 (exact int32), acc_l = fmaf(fp16(dw_b) *
 * fp16(dy_b), (float)isum_bl, acc_l); then r_l = acc_l+4 + acc_l, result (r0 + r2) + (r1 + r3).
 * (One integer sum per block scaled in a single chain lands on the other side of a near tie in
 * kjv-moe-q8_0's golden logits: max KL 0.027 at one row.)
 * Products of signed bytes: vpmaddubsw(|w|, sign(y, w)) (pairs <= 2 x 128 x 127, no saturation),
 * vpmaddwd by 1 gives the 8 lane sums of 4 products.
 *
 * Repacked layout (mr_repack_interleave4 with 8 rows): per group of 8 rows and block, uint16 d[8]
 * then eight 32-byte vectors Q_m whose 32-bit lane r holds bytes 4m..4m+3 of row r (272 bytes, the
 * plain size): vector m gives every row's lane m sum, so the kernel keeps one float accumulator
 * vector per lane m (8 rows each) and adds them in the lane tree at the end. The activations are the
 * AVX2 Q8_0 rprep layout (q4_0_avx2.c: y[32], float d, a correction this kernel does not use). */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <string.h>

#define Q8A_UNROLL _Pragma("GCC unroll 8")

typedef struct { uint16_t d[8]; int8_t q[8][32]; } q8a_blk;
_Static_assert(sizeof(q8a_blk) == MR_Q8_0_RP8_BLOCK_BYTES, "repacked q8_0 block (8 rows x 32 values)");
typedef struct { int8_t y[32]; float d; int32_t corr; } q8a_act;
_Static_assert(sizeof(q8a_act) == MR_Q4_0_RP_ACT_BYTES, "prepared q8_0 block for the repacked kernels");

/* int32 lanes whose total is sum(w * y) for 32 signed bytes each */
static inline __m256i q8a_dot(__m256i w, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(y, w)), _mm256_set1_epi16(1));
}

/* the lane tree: (r0 + r2) + (r1 + r3) with r_l = acc_l+4 + acc_l */
static inline float q8a_lanes(__m256 acc) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* one row, nc = 1 or 4 columns by bytes apart */
static inline void q8a_dot_rows(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_q8_0 *x = w;
    const mr_block_q8_0 *y[4];
    __m256 acc[4];
    Q8A_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)c * by);
        acc[c] = _mm256_setzero_ps();
    }
    for (int b = 0; b < n / 32; b++) {
        const __m256i wv = _mm256_loadu_si256((const __m256i *)x[b].qs);
        const float dx = _cvtsh_ss(x[b].d);
        Q8A_UNROLL for (int c = 0; c < nc; c++) {
            const __m256i l = q8a_dot(wv, _mm256_loadu_si256((const __m256i *)y[c][b].qs));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * _cvtsh_ss(y[c][b].d)), _mm256_cvtepi32_ps(l), acc[c]);
        }
    }
    Q8A_UNROLL for (int c = 0; c < nc; c++) s[c] = q8a_lanes(acc[c]);
}

void mr_vd_q8_0_bs_avx2(int n, float *s, const void *w, const void *vy) { q8a_dot_rows(n, s, w, vy, 0, 1); }
void mr_vd4_q8_0_bs_avx2(int n, float *s, const void *w, const void *vy, size_t by) { q8a_dot_rows(n, s, w, vy, by, 4); }

/* 8 rows x 1 column of group w (nb blocks), column a (prepared), out y[0..7]: one accumulator
 * vector per lane m, so a column at a time (2 columns = 16 accumulators measured no faster) */
static void q8a_rows(const q8a_blk *w, int nb, const q8a_act *a, float *y) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc[8];
    Q8A_UNROLL for (int m = 0; m < 8; m++) acc[m] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[b].d)), _mm256_set1_ps(a[b].d));
        Q8A_UNROLL for (int m = 0; m < 8; m++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)w[b].q[m]);
            int32_t y4;
            memcpy(&y4, a[b].y + 4 * m, 4);
            const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(_mm256_set1_epi32(y4), wv));
            acc[m] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_madd_epi16(p, one)), acc[m]);
        }
    }
    const __m256 r0 = _mm256_add_ps(acc[4], acc[0]), r1 = _mm256_add_ps(acc[5], acc[1]);
    const __m256 r2 = _mm256_add_ps(acc[6], acc[2]), r3 = _mm256_add_ps(acc[7], acc[3]);
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3)));
}

void mr_q8_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 32);
    for (int c = 0; c < nc; c++) q8a_rows(w, nb, act[c], y[c]);
}
