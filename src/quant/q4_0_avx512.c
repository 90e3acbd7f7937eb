/* Q4_0 x Q8_0 under AVX-512 VNNI, with block-sum numerics and 16-row repacked weights.
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

/* 16 rows x NC columns of group w (nb blocks), columns a[c] (prepared), out y[c][0..15] */
#define Q4R_KERNEL(NC)                                                                                   \
    static void q4r_rows_##NC(const q4r_blk *w, int nb, const q4r_act *const *a, float *const *y) {      \
        const __m512i m4 = _mm512_set1_epi8(0x0f);                                                       \
        __m512 acc[NC];                                                                                  \
        Q4R_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();                           \
        for (int b = 0; b < nb; b++) {                                                                   \
            __m512i v[8];                                                                                \
            Q4R_UNROLL for (int m = 0; m < 4; m++) {                                                     \
                const __m512i p = _mm512_loadu_si512(w[b].q[m]);                                         \
                v[m] = _mm512_and_si512(p, m4);                                                          \
                v[m + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);                                \
            }                                                                                            \
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w[b].d));             \
            Q4R_UNROLL for (int c = 0; c < NC; c++) {                                                    \
                const q4r_act *ab = &a[c][b];                                                            \
                int32_t yq[8];                                                                           \
                memcpy(yq, ab->y, 32);                                                                   \
                __m512i s0 = _mm512_set1_epi32(ab->corr), s1 = _mm512_setzero_si512();                   \
                Q4R_UNROLL for (int m = 0; m < 4; m++) {                                                 \
                    s0 = _mm512_dpbusd_epi32(s0, v[m], _mm512_set1_epi32(yq[m]));                        \
                    s1 = _mm512_dpbusd_epi32(s1, v[m + 4], _mm512_set1_epi32(yq[m + 4]));                \
                }                                                                                        \
                acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(ab->d)),                      \
                                         _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[c]);           \
            }                                                                                            \
        }                                                                                                \
        Q4R_UNROLL for (int c = 0; c < NC; c++) _mm512_storeu_ps(y[c], acc[c]);                         \
    }
Q4R_KERNEL(1)
Q4R_KERNEL(4)
Q4R_KERNEL(8)

void mr_q4_0_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 32);
    const q4r_act *const *a = (const q4r_act *const *)act;
    int c = 0;
    for (; c + 8 <= nc; c += 8) q4r_rows_8(w, nb, a + c, y + c);
    for (; c + 4 <= nc; c += 4) q4r_rows_4(w, nb, a + c, y + c);
    for (; c < nc; c++) q4r_rows_1(w, nb, a + c, y + c);
}
