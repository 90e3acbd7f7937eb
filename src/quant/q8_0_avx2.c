/* Q8_0 x Q8_0 under AVX2 with block-sum numerics and 8-row repacked weights (the scheme of
 * q4_0_avx2.c for signed 8-bit weights).
 *
 * Numerics (every AVX2 Q8_0 kernel): acc = 0; per 32-value block b in order,
 *   isum_b = sum_i w_i * y_i (exact int32), acc = fmaf(fp16(dw_b) * fp16(dy_b), (float)isum_b, acc).
 * Products of signed bytes: vpmaddubsw(|w|, sign(y, w)) (pairs <= 2 x 128 x 127, no saturation),
 * widened by vpmaddwd at once (two pairs would overflow int16).
 *
 * Repacked layout (mr_repack_interleave4 with 8 rows): per group of 8 rows and block, uint16 d[8] then eight 32-byte
 * vectors Q_m whose 32-bit lane r holds bytes 4m..4m+3 of row r (272 bytes, the plain size). The
 * activations are the AVX2 Q8_0 rprep layout (q4_0_avx2.c: y[32], float d, a correction this kernel
 * does not use). */
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

static inline int q8a_hsum_i32(__m256i v) {
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(a);
}

void mr_vd_q8_0_bs_avx2(int n, float *s, const void *w, const void *vy) {
    const mr_block_q8_0 *x = w, *y = vy;
    float acc = 0.0f;
    for (int b = 0; b < n / 32; b++) {
        const __m256i l = q8a_dot(_mm256_loadu_si256((const __m256i *)x[b].qs), _mm256_loadu_si256((const __m256i *)y[b].qs));
        acc = __builtin_fmaf(_cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d), (float)q8a_hsum_i32(l), acc);
    }
    *s = acc;
}

void mr_vd4_q8_0_bs_avx2(int n, float *s, const void *w, const void *vy, size_t by) {
    const mr_block_q8_0 *x = w;
    const mr_block_q8_0 *y[4];
    for (int c = 0; c < 4; c++) y[c] = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)c * by);
    __m128 acc = _mm_setzero_ps();
    for (int b = 0; b < n / 32; b++) {
        const __m256i wv = _mm256_loadu_si256((const __m256i *)x[b].qs), aw = _mm256_abs_epi8(wv);
        __m256i l[4];
        Q8A_UNROLL for (int c = 0; c < 4; c++) {
            const __m256i yv = _mm256_loadu_si256((const __m256i *)y[c][b].qs);
            l[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(yv, wv)), _mm256_set1_epi16(1));
        }
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(l[0], l[1]), _mm256_hadd_epi32(l[2], l[3]));
        const __m128i is = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128 dy = _mm_setr_ps(_cvtsh_ss(y[0][b].d), _cvtsh_ss(y[1][b].d), _cvtsh_ss(y[2][b].d), _cvtsh_ss(y[3][b].d));
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(_cvtsh_ss(x[b].d)), dy), _mm_cvtepi32_ps(is), acc);
    }
    _mm_storeu_ps(s, acc);
}

#define Q8A_KERNEL(NC)                                                                                   \
    static void q8a_rows_##NC(const q8a_blk *w, int nb, const q8a_act *const *a, float *const *y) {      \
        const __m256i one = _mm256_set1_epi16(1);                                                        \
        __m256 acc[NC];                                                                                  \
        Q8A_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();                           \
        for (int b = 0; b < nb; b++) {                                                                   \
            __m256i s[NC];                                                                               \
            Q8A_UNROLL for (int c = 0; c < NC; c++) s[c] = _mm256_setzero_si256();                      \
            Q8A_UNROLL for (int m = 0; m < 8; m++) {                                                     \
                const __m256i wv = _mm256_loadu_si256((const __m256i *)w[b].q[m]), aw = _mm256_abs_epi8(wv); \
                Q8A_UNROLL for (int c = 0; c < NC; c++) {                                                \
                    int32_t y4;                                                                          \
                    memcpy(&y4, a[c][b].y + 4 * m, 4);                                                   \
                    const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(y4), wv)); \
                    s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(p, one));                            \
                }                                                                                        \
            }                                                                                            \
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[b].d));                \
            Q8A_UNROLL for (int c = 0; c < NC; c++)                                                      \
                acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[c][b].d)), _mm256_cvtepi32_ps(s[c]), acc[c]); \
        }                                                                                                \
        Q8A_UNROLL for (int c = 0; c < NC; c++) _mm256_storeu_ps(y[c], acc[c]);                         \
    }
Q8A_KERNEL(1)
Q8A_KERNEL(4)

void mr_q8_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 32);
    const q8a_act *const *a = (const q8a_act *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) q8a_rows_4(w, nb, a + c, y + c);
    for (; c < nc; c++) q8a_rows_1(w, nb, a + c, y + c);
}
