/* Q2_0 x Q8_0 under AVX2: vec_dot, the 4-column kernel and 8-row repacked GEMV/GEMM, with the
 * numerics of q2_0_avx512.c (per Q8_0 block exact integer sums, then the scalar reference's three
 * FMAs per 64-value block), so each equals mr_vec_dot_q2_0 bit for bit.
 *
 * Plain rows: one block's 16 code bytes become its 64 codes in value order: a broadcast and a
 * per-qword shift give lanes [code 0 | code 2] and [code 1 | code 3] of every byte; interleaving
 * their bytes, swapping qwords across the lanes and interleaving 16-bit pairs puts values
 * 0..31 (low bytes) and 32..63 (high bytes) in order. The weights c - 1 multiply through
 * vpmaddubsw as |c - 1| times sign(y, c - 1).
 *
 * Repacked (q2_0_pack.c, R = 8): (P_m >> 2k) & 3 gives 8 rows' codes of 4 consecutive values; the
 * 8 vpmaddubsw products of a Q8_0 block are added as int16 (|sum| <= 8 x 2 x 3 x 128 = 6144, exact)
 * and widened once; the -1 is the start value -sum(y) = corr / 8 of the prepared activation. */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <string.h>

#define Q2A_UNROLL _Pragma("GCC unroll 16")

typedef struct { uint16_t d[8]; uint8_t q[4][32]; } q2a_blk;
_Static_assert(sizeof(q2a_blk) == 8 * sizeof(mr_block_q2_0), "repacked q2_0 block (8 rows x 64 values)");
typedef struct { int8_t y[32]; float d; int32_t corr; } q2a_act;
_Static_assert(sizeof(q2a_act) == MR_Q4_0_RP_ACT_BYTES, "prepared q8_0 block for the repacked kernels");

/* the codes of values 0..31 (w[0]) and 32..63 (w[1]) of a block, minus 1 (int8 -1..2) */
static inline void q2a_weights(const mr_block_q2_0 *b, __m256i *w) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b->qs));
    const __m256i m3 = _mm256_set1_epi8(3);
    /* byte j of lane 0 / lane 1: code of value 4j + 0 / 4j + 2 (a), 4j + 1 / 4j + 3 (b) */
    const __m256i a = _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)), m3);
    const __m256i b2 = _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(2, 2, 6, 6)), m3);
    /* 16-bit pair j of lane 0: values (4j, 4j+1); of lane 1: (4j+2, 4j+3) */
    const __m256i pairs[2] = {_mm256_unpacklo_epi8(a, b2), _mm256_unpackhi_epi8(a, b2)};
    const __m256i tr = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
                                        0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
    for (int h = 0; h < 2; h++) {
        const __m256i s = _mm256_permute4x64_epi64(pairs[h], _MM_SHUFFLE(3, 1, 2, 0));
        w[h] = _mm256_sub_epi8(_mm256_shuffle_epi8(s, tr), _mm256_set1_epi8(1));
    }
}

/* 8 int32 lanes whose total is sum(w * y) for signed w in -2..2 */
static inline __m256i q2a_prod(__m256i aw, __m256i w, const int8_t *y) {
    const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y), w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* nc = 1 or 4 columns by bytes apart; lane c of the float vectors is column c */
static inline void q2a_dot(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_q2_0 *x = w;
    const mr_block_q8_0 *y[4];
    Q2A_UNROLL for (int c = 0; c < 4; c++) y[c] = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)(c < nc ? c : 0) * by);
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < n / MR_QK2_0; i++) {
        __m256i wv[2];
        q2a_weights(&x[i], wv);
        const __m256i aw0 = _mm256_abs_epi8(wv[0]), aw1 = _mm256_abs_epi8(wv[1]);
        __m256i lo[4], hi[4];
        Q2A_UNROLL for (int c = 0; c < nc; c++) {
            lo[c] = q2a_prod(aw0, wv[0], y[c][2 * i].qs);
            hi[c] = q2a_prod(aw1, wv[1], y[c][2 * i + 1].qs);
        }
        __m128i i0, i1; /* lane c: column c's exact sums over the two Q8_0 blocks */
        if (nc == 4) {
            const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(lo[0], lo[1]), _mm256_hadd_epi32(lo[2], lo[3]));
            const __m256i f = _mm256_hadd_epi32(_mm256_hadd_epi32(hi[0], hi[1]), _mm256_hadd_epi32(hi[2], hi[3]));
            i0 = _mm_add_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
            i1 = _mm_add_epi32(_mm256_castsi256_si128(f), _mm256_extracti128_si256(f, 1));
        } else {
            const __m256i e = _mm256_hadd_epi32(lo[0], hi[0]);
            const __m128i g = _mm_add_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
            const __m128i h = _mm_hadd_epi32(g, g);
            i0 = h;
            i1 = _mm_shuffle_epi32(h, 1);
        }
        __m128i dh0 = _mm_cvtsi32_si128(y[0][2 * i].d), dh1 = _mm_cvtsi32_si128(y[0][2 * i + 1].d);
        if (nc == 4) { /* the four columns' scales in lanes 0..3 (inserts, not stores and a load) */
            dh0 = _mm_insert_epi16(_mm_insert_epi16(_mm_insert_epi16(dh0, y[1][2 * i].d, 1), y[2][2 * i].d, 2), y[3][2 * i].d, 3);
            dh1 = _mm_insert_epi16(_mm_insert_epi16(_mm_insert_epi16(dh1, y[1][2 * i + 1].d, 1), y[2][2 * i + 1].d, 2),
                                   y[3][2 * i + 1].d, 3);
        }
        const __m128 dy0 = _mm_cvtph_ps(dh0), dy1 = _mm_cvtph_ps(dh1);
        __m128 part = _mm_fmadd_ps(dy0, _mm_cvtepi32_ps(i0), _mm_setzero_ps());
        part = _mm_fmadd_ps(dy1, _mm_cvtepi32_ps(i1), part);
        acc = _mm_fmadd_ps(_mm_set1_ps(_cvtsh_ss(x[i].d)), part, acc);
    }
    float out[4];
    _mm_storeu_ps(out, acc);
    Q2A_UNROLL for (int c = 0; c < nc; c++) s[c] = out[c];
}

void mr_vd_q2_0_avx2(int n, float *s, const void *w, const void *y) { q2a_dot(n, s, w, y, 0, 1); }
void mr_vd4_q2_0_avx2(int n, float *s, const void *w, const void *y, size_t by) { q2a_dot(n, s, w, y, by, 4); }

/* ---- repacked: 8 rows at a time ---- */

/* exact sums of one Q8_0 block (prepared: a) for 8 rows from the 8 code vectors u[4h + k] (values
 * 16h + 4k .. +3 of the block). The activation dwords are broadcast straight from a (no copy), the
 * int16 products added as a tree, and -sum(y) = corr >> 3 (corr = -8 sum(y): exact). */
static inline __m256i q2a_rp_isum(const __m256i *u, const q2a_act *a) {
    __m256i p[8];
    Q2A_UNROLL for (int j = 0; j < 8; j++) {
        int32_t yj;
        memcpy(&yj, a->y + 4 * j, 4);
        p[j] = _mm256_maddubs_epi16(u[j], _mm256_set1_epi32(yj));
    }
    const __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3])),
                                       _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7])));
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), _mm256_srai_epi32(_mm256_set1_epi32(a->corr), 3));
}

/* 8 rows x NC columns: each 64-value block in two halves (one Q8_0 block each), the 8 code vectors
 * of a half decoded once for the NC columns (few live registers: no spills of the accumulators) */
#define Q2A_KERNEL(NC)                                                                                   \
    static void q2a_rows_##NC(const q2a_blk *w, int nb, const q2a_act *const *a, float *const *y) {      \
        const __m256i m3 = _mm256_set1_epi8(3);                                                          \
        __m256 acc[NC];                                                                                  \
        Q2A_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();                           \
        for (int b = 0; b < nb; b++) {                                                                   \
            mr_rp_prefetch(&w[b], sizeof(q2a_blk));                                                      \
            __m256 part[NC];                                                                             \
            Q2A_UNROLL for (int h = 0; h < 2; h++) {                                                     \
                __m256i u[8];                                                                            \
                Q2A_UNROLL for (int m = 0; m < 2; m++) {                                                 \
                    const __m256i p = _mm256_loadu_si256((const __m256i *)w[b].q[2 * h + m]);           \
                    Q2A_UNROLL for (int k = 0; k < 4; k++) u[4 * m + k] = _mm256_and_si256(_mm256_srli_epi32(p, 2 * k), m3); \
                }                                                                                        \
                Q2A_UNROLL for (int c = 0; c < NC; c++) {                                                \
                    const q2a_act *ah = &a[c][2 * b + h];                                                \
                    part[c] = _mm256_fmadd_ps(_mm256_set1_ps(ah->d), _mm256_cvtepi32_ps(q2a_rp_isum(u, ah)), \
                                              h ? part[c] : _mm256_setzero_ps());                        \
                }                                                                                        \
            }                                                                                            \
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[b].d));               \
            Q2A_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_fmadd_ps(dw, part[c], acc[c]);       \
        }                                                                                                \
        Q2A_UNROLL for (int c = 0; c < NC; c++) _mm256_storeu_ps(y[c], acc[c]);                         \
    }
Q2A_KERNEL(1)
Q2A_KERNEL(4)

void mr_q2_0_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / MR_QK2_0);
    const q2a_act *const *a = (const q2a_act *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) q2a_rows_4(w, nb, a + c, y + c);
    for (; c < nc; c++) q2a_rows_1(w, nb, a + c, y + c);
}
