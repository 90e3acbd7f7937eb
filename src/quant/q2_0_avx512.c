/* Q2_0 x Q8_0 under AVX-512 VNNI: vec_dot, the 4-column kernel and 16-row repacked GEMV/GEMM.
 *
 * Numerics (every kernel here, and the scalar reference mr_vec_dot_q2_0): per 64-value block i,
 *   isum0, isum1 = sum (code - 1) * y over its two Q8_0 blocks          (exact int32)
 *   part = fma(dy0, isum0, 0); part = fma(dy1, isum1, part); acc = fma(dw_i, part, acc)
 * so every kernel equals the scalar reference bit for bit (and mainline's x86 build, whose generic
 * dot its compiler contracts into these FMAs).
 *
 * Plain rows: one block's 16 code bytes (byte j: values 4j..4j+3 at bits 0,2,4,6) become its 64
 * codes in value order with a broadcast, a per-qword shift (128-bit lane k gets code k of every
 * byte), a 4x4 dword transpose across the lanes and a 4x4 byte transpose inside each lane. The
 * weights c - 1 in -1..2 multiply through vpdpbusd as |c - 1| times y negated where c - 1 < 0.
 *
 * Repacked (q2_0_pack.c, R = 16): (P_m >> 2k) & 3 gives 16 rows' codes of 4 consecutive values,
 * one vpdpbusd per broadcast activation dword; the -1 is the start value -sum(y) (the prepared
 * activation's corr = -8 sum(y), divided by 8, exact). */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <string.h>

#define Q2Z_UNROLL _Pragma("GCC unroll 16")

typedef struct { uint16_t d[16]; uint8_t q[4][64]; } q2z_blk;
_Static_assert(sizeof(q2z_blk) == 16 * sizeof(mr_block_q2_0), "repacked q2_0 block (16 rows x 64 values)");
typedef struct { int8_t y[32]; float d; int32_t corr; } q2z_act;
_Static_assert(sizeof(q2z_act) == MR_Q4_0_RP_ACT_BYTES, "prepared q8_0 block for the repacked kernels");

/* the 64 codes of a block in value order, minus 1 (int8 -1..2) */
static inline __m512i q2z_weights(const mr_block_q2_0 *b) {
    const __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)b->qs));
    /* lane k, byte j: code of value 4j + k */
    const __m512i z = _mm512_and_si512(_mm512_srlv_epi64(q, _mm512_setr_epi64(0, 0, 2, 2, 4, 4, 6, 6)), _mm512_set1_epi8(3));
    /* lane L, dword k := lane k, dword L: byte m = code of value 16L + 4m + k */
    const __m512i t = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
    /* byte 4m + k := byte 4k + m: value 16L + 4m + k */
    const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    return _mm512_sub_epi8(_mm512_shuffle_epi8(t, tr), _mm512_set1_epi8(1));
}

/* int32 lanes 0..7: products of the first Q8_0 block, 8..15: of the second (y0, y1: their values) */
static inline __m512i q2z_prod(__m512i aw, __mmask64 neg, const int8_t *y0, const int8_t *y1) {
    const __m512i y = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0)),
                                         _mm256_loadu_si256((const __m256i *)y1), 1);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y));
}

/* nc = 1 or 4 columns by bytes apart; lane c of the float vectors is column c, so each column runs
 * the same float operations whatever nc */
static inline void q2z_dot(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_q2_0 *x = w;
    const mr_block_q8_0 *y[4];
    Q2Z_UNROLL for (int c = 0; c < 4; c++) y[c] = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)(c < nc ? c : 0) * by);
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < n / MR_QK2_0; i++) {
        const __m512i wv = q2z_weights(&x[i]);
        const __m512i aw = _mm512_abs_epi8(wv);
        const __mmask64 neg = _mm512_movepi8_mask(wv);
        __m256i lo[4], hi[4];
        Q2Z_UNROLL for (int c = 0; c < nc; c++) {
            const __m512i p = q2z_prod(aw, neg, y[c][2 * i].qs, y[c][2 * i + 1].qs);
            lo[c] = _mm512_castsi512_si256(p);
            hi[c] = _mm512_extracti64x4_epi64(p, 1);
        }
        __m128i i0, i1; /* lane c: column c's exact sums over the two Q8_0 blocks */
        if (nc == 4) {
            const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(lo[0], lo[1]), _mm256_hadd_epi32(lo[2], lo[3]));
            const __m256i f = _mm256_hadd_epi32(_mm256_hadd_epi32(hi[0], hi[1]), _mm256_hadd_epi32(hi[2], hi[3]));
            i0 = _mm_add_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
            i1 = _mm_add_epi32(_mm256_castsi256_si128(f), _mm256_extracti128_si256(f, 1));
        } else {
            const __m256i e = _mm256_hadd_epi32(lo[0], hi[0]);             /* [l01 l23 h01 h23 | l45 l67 h45 h67] */
            const __m128i g = _mm_add_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
            const __m128i h = _mm_hadd_epi32(g, g);                        /* [isum0 isum1 ..] */
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
    Q2Z_UNROLL for (int c = 0; c < nc; c++) s[c] = out[c];
}

void mr_vd_q2_0_avx512(int n, float *s, const void *w, const void *y) { q2z_dot(n, s, w, y, 0, 1); }
void mr_vd4_q2_0_avx512(int n, float *s, const void *w, const void *y, size_t by) { q2z_dot(n, s, w, y, by, 4); }

/* ---- repacked: 16 rows at a time ---- */

/* exact sums of one Q8_0 block (prepared: a) for 16 rows from the 8 code vectors u[0..7] (u[4h + k]:
 * values 16h + 4k .. +3 of the block), two chains of vpdpbusd on activation dwords broadcast straight
 * from a; -sum(y) = corr >> 3 (corr = -8 sum(y): exact) */
static inline __m512i q2z_rp_isum(const __m512i *u, const q2z_act *a) {
    __m512i s0 = _mm512_srai_epi32(_mm512_set1_epi32(a->corr), 3), s1 = _mm512_setzero_si512();
    Q2Z_UNROLL for (int j = 0; j < 8; j += 2) {
        int32_t y0, y1;
        memcpy(&y0, a->y + 4 * j, 4);
        memcpy(&y1, a->y + 4 * j + 4, 4);
        s0 = _mm512_dpbusd_epi32(s0, u[j], _mm512_set1_epi32(y0));
        s1 = _mm512_dpbusd_epi32(s1, u[j + 1], _mm512_set1_epi32(y1));
    }
    return _mm512_add_epi32(s0, s1);
}

#define Q2Z_KERNEL(NC)                                                                                   \
    static void q2z_rows_##NC(const q2z_blk *w, int nb, const q2z_act *const *a, float *const *y) {      \
        const __m512i m3 = _mm512_set1_epi8(3);                                                          \
        __m512 acc[NC];                                                                                  \
        Q2Z_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();                           \
        for (int b = 0; b < nb; b++) {                                                                   \
            __m512i u[16];                                                                               \
            Q2Z_UNROLL for (int m = 0; m < 4; m++) {                                                     \
                const __m512i p = _mm512_loadu_si512(w[b].q[m]);                                         \
                Q2Z_UNROLL for (int k = 0; k < 4; k++) u[4 * m + k] = _mm512_and_si512(_mm512_srli_epi32(p, 2 * k), m3); \
            }                                                                                            \
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w[b].d));             \
            Q2Z_UNROLL for (int c = 0; c < NC; c++) {                                                    \
                const q2z_act *a0 = &a[c][2 * b], *a1 = &a[c][2 * b + 1];                                \
                __m512 part = _mm512_fmadd_ps(_mm512_set1_ps(a0->d), _mm512_cvtepi32_ps(q2z_rp_isum(u, a0)), \
                                              _mm512_setzero_ps());                                      \
                part = _mm512_fmadd_ps(_mm512_set1_ps(a1->d), _mm512_cvtepi32_ps(q2z_rp_isum(u + 8, a1)), part); \
                acc[c] = _mm512_fmadd_ps(dw, part, acc[c]);                                              \
            }                                                                                            \
        }                                                                                                \
        Q2Z_UNROLL for (int c = 0; c < NC; c++) _mm512_storeu_ps(y[c], acc[c]);                         \
    }
Q2Z_KERNEL(1)
Q2Z_KERNEL(4)
Q2Z_KERNEL(8)

void mr_q2_0_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / MR_QK2_0);
    const q2z_act *const *a = (const q2z_act *const *)act;
    int c = 0;
    for (; c + 8 <= nc; c += 8) q2z_rows_8(w, nb, a + c, y + c);
    for (; c + 4 <= nc; c += 4) q2z_rows_4(w, nb, a + c, y + c);
    for (; c < nc; c++) q2z_rows_1(w, nb, a + c, y + c);
}
