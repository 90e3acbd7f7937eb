/* Q4_0 x Q8_0 under AVX2, with block-sum numerics and 8-row repacked weights (the AVX2 sibling of
 * q4_0_avx512.c: the same numerics and the same prepared activations, 8 rows per 256-bit vector
 * instead of 16 per 512-bit one).
 *
 * Numerics (every AVX2 Q4_0 kernel: vec_dot, the 4-column kernel, the repacked GEMV/GEMM):
 *   acc = 0; for each 32-value block b in order:
 *       isum_b = sum_i (nibble_i - 8) * y_i            (exact int32)
 *       acc = fmaf(fp16(dw_b) * fp16(dy_b), (float)isum_b, acc)
 * so a row gives the same bits whichever kernel computes it.
 *
 * Repacked layout (mr_repack_interleave4 with 8 rows): per group of 8 rows and per block, uint16 d[8] then four
 * 32-byte vectors P_m (m = 0..3) whose 32-bit lane j holds bytes 4m..4m+3 of row j's nibbles (low
 * nibbles: values 4m..4m+3, high nibbles: 16+4m..16+4m+3); 144 bytes, the size of the 8 plain
 * blocks. Without VNNI, vpmaddubsw multiplies the unsigned nibbles by the broadcast signed
 * activation bytes into int16 pairs; the 8 products of a block are added as int16 (|sum| <= 8 x 2
 * x 15 x 128 = 30720, exact) and widened once with vpmaddwd. The -8 is the prepared activation's
 * correction (-8 x the block's activation sum, mr_q4_0_rp_prep_avx2: the AVX-512 layout). */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <string.h>

#define Q4A_UNROLL _Pragma("GCC unroll 8")

typedef struct { uint16_t d[8]; uint8_t q[4][32]; } q4a_blk;
_Static_assert(sizeof(q4a_blk) == MR_Q4_0_RP8_BLOCK_BYTES, "repacked q4_0 block (8 rows x 32 values)");
typedef struct { int8_t y[32]; float d; int32_t corr; } q4a_act;
_Static_assert(sizeof(q4a_act) == MR_Q4_0_RP_ACT_BYTES, "prepared q8_0 block for the repacked kernels");

static inline int q4a_hsum_i32(__m256i v) {
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(a);
}

/* int32 lanes whose total is sum(u * y) for 32 unsigned bytes u and signed bytes y */
static inline __m256i q4a_dot(__m256i u, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

/* the 32 nibbles of a block in value order: low nibbles (0..15) then high (16..31) */
static inline __m256i q4a_nib(const mr_block_q4_0 *b) {
    const __m128i t = _mm_loadu_si128((const __m128i *)b->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
}

/* isum of one block: sum(nibble * y) - 8 sum(y) */
static inline int q4a_isum(__m256i nib, const int8_t *y) {
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y);
    return q4a_hsum_i32(_mm256_sub_epi32(q4a_dot(nib, yv), q4a_dot(_mm256_set1_epi8(8), yv)));
}

void mr_vd_q4_0_bs_avx2(int n, float *s, const void *w, const void *vy) {
    const mr_block_q4_0 *x = w;
    const mr_block_q8_0 *y = vy;
    float acc = 0.0f;
    for (int b = 0; b < n / 32; b++) {
        const float d = _cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d);
        acc = __builtin_fmaf(d, (float)q4a_isum(q4a_nib(&x[b]), y[b].qs), acc);
    }
    *s = acc;
}

/* four columns: the same per-column operations, the four float steps as one 4-lane vector */
void mr_vd4_q4_0_bs_avx2(int n, float *s, const void *w, const void *vy, size_t by) {
    const mr_block_q4_0 *x = w;
    const mr_block_q8_0 *y[4];
    for (int c = 0; c < 4; c++) y[c] = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)c * by);
    __m128 acc = _mm_setzero_ps();
    for (int b = 0; b < n / 32; b++) {
        const __m256i nib = q4a_nib(&x[b]);
        __m256i l[4];
        Q4A_UNROLL for (int c = 0; c < 4; c++) {
            const __m256i yv = _mm256_loadu_si256((const __m256i *)y[c][b].qs);
            l[c] = _mm256_sub_epi32(q4a_dot(nib, yv), q4a_dot(_mm256_set1_epi8(8), yv));
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

/* ---- repacked: 8 rows at a time ---- */

void mr_q4_0_rp_prep_avx2(const void *src, void *dst, int n) {
    const mr_block_q8_0 *x = src;
    q4a_act *a = dst;
    for (int b = 0; b < n / 32; b++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)x[b].qs);
        memcpy(a[b].y, x[b].qs, 32);
        a[b].d = _cvtsh_ss(x[b].d);
        a[b].corr = -q4a_hsum_i32(q4a_dot(_mm256_set1_epi8(8), q));
    }
}

/* 8 rows x NC columns of group w (nb blocks), columns a[c] (prepared), out y[c][0..7]. The weight
 * vectors are unpacked once per block for the NC columns; per column the block's 8 int16 product
 * vectors are summed, widened, corrected and scaled. */
#define Q4A_KERNEL(NC)                                                                                   \
    static void q4a_rows_##NC(const q4a_blk *w, int nb, const q4a_act *const *a, float *const *y) {      \
        const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);                          \
        __m256 acc[NC];                                                                                  \
        Q4A_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();                           \
        for (int b = 0; b < nb; b++) {                                                                   \
            __m256i s[NC];                                                                               \
            Q4A_UNROLL for (int c = 0; c < NC; c++) s[c] = _mm256_setzero_si256();                      \
            Q4A_UNROLL for (int m = 0; m < 4; m++) {                                                     \
                const __m256i p = _mm256_loadu_si256((const __m256i *)w[b].q[m]);                       \
                const __m256i lo = _mm256_and_si256(p, m4), hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), m4); \
                Q4A_UNROLL for (int c = 0; c < NC; c++) {                                                \
                    int32_t y0, y1;                                                                      \
                    memcpy(&y0, a[c][b].y + 4 * m, 4);                                                   \
                    memcpy(&y1, a[c][b].y + 16 + 4 * m, 4);                                              \
                    s[c] = _mm256_add_epi16(s[c], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(y0)));      \
                    s[c] = _mm256_add_epi16(s[c], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(y1)));      \
                }                                                                                        \
            }                                                                                            \
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[b].d));                \
            Q4A_UNROLL for (int c = 0; c < NC; c++) {                                                    \
                const __m256i is = _mm256_add_epi32(_mm256_madd_epi16(s[c], one), _mm256_set1_epi32(a[c][b].corr)); \
                acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[c][b].d)), _mm256_cvtepi32_ps(is), acc[c]); \
            }                                                                                            \
        }                                                                                                \
        Q4A_UNROLL for (int c = 0; c < NC; c++) _mm256_storeu_ps(y[c], acc[c]);                         \
    }
Q4A_KERNEL(1)
Q4A_KERNEL(4)

void mr_q4_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 32);
    const q4a_act *const *a = (const q4a_act *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) q4a_rows_4(w, nb, a + c, y + c);
    for (; c < nc; c++) q4a_rows_1(w, nb, a + c, y + c);
}
