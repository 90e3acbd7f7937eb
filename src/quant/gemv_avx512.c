/* GEMV on prepared activations (AVX-512 VNNI), bit for bit the AVX-512 vec_dot of the type.
 *
 * Q4_0 x Q8_0: vec_dot (quant_kern_x86.h, KX_SIGNED32) turns the nibbles into signed weights
 * (nibble - 8) and needs the abs/sign trick to feed vpdpbusd (unsigned x signed). Here the nibbles
 * stay unsigned and multiply the signed activations directly; the -8 is folded into the start value
 * of each 32-bit lane: corr[i] = -8 * (y[4i] + y[4i+1] + y[4i+2] + y[4i+3]), computed once per
 * activation row. The lane sums are exact integers and equal vec_dot's, and the float steps are the
 * same (d = dw * dy; acc = fma(d, float(p), acc) with even / odd blocks in two accumulators; the same
 * horizontal sum), so the results are identical; per block the work drops from ~16 to ~12 operations.
 *
 * Prepared row (mr_gemv_prep_row_size): per pair of 32-value blocks, int32 corr[16], int8 qs[64] and
 * float dy[16] (each block's scale eight times). */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <string.h>

/* Blocks go in pairs through 512-bit vectors: the lower half of every vector is the even block, the
 * upper half the odd one, so the float accumulator's halves are exactly vec_dot's two chains. */
typedef struct { int32_t corr[16]; int8_t qs[64]; float dy[16]; } mr_gemv_q8p2;
_Static_assert(sizeof(mr_gemv_q8p2) == 192, "prepared pair of q8_0 blocks for the GEMV");

static void mr_gemv_prep_q8_0(const void *src, void *dst, int n) {
    const mr_block_q8_0 *x = src;
    mr_gemv_q8p2 *y = dst;
    const int nb = n / 32;
    const __m256i eight = _mm256_set1_epi8(8);
    memset(y, 0, sizeof(mr_gemv_q8p2) * (size_t)((nb + 1) / 2));
    for (int i = 0; i < nb; i++) {
        mr_gemv_q8p2 *p = &y[i / 2];
        const int h = i & 1;
        const __m256i q = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i s8 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, q); /* 8 * lane sums */
        _mm256_storeu_si256((__m256i *)(p->corr + 8 * h), _mm256_sub_epi32(_mm256_setzero_si256(), s8));
        _mm256_storeu_si256((__m256i *)(p->qs + 32 * h), q);
        _mm256_storeu_ps(p->dy + 8 * h, _mm256_set1_ps(_cvtsh_ss(x[i].d)));
    }
}

/* as kx_hsum (quant_kern_x86.h): the same adds in the same order */
static inline float mr_gemv_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static void mr_vd1p_q4_0_avx512(int n, float *s, const void *w, const void *vy) {
    const int nb = n / 32;
    const mr_block_q4_0 *x = w;
    const mr_gemv_q8p2 *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc = _mm512_setzero_ps();
    int ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        const mr_gemv_q8p2 *p = &y[ib / 2];
        const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)x[ib].qs)),
                                                  _mm_loadu_si128((const __m128i *)x[ib + 1].qs), 1);
        /* [t0 | t1 | t0 >> 4 | t1 >> 4] -> [t0 | t0 >> 4 | t1 | t1 >> 4]: each block's low then high nibbles */
        const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
        const __m512i nib = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), m4);
        const __m512i q = _mm512_dpbusd_epi32(_mm512_loadu_si512(p->corr), nib, _mm512_loadu_si512(p->qs));
        const __m256i dh = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)x[ib].d)),
                                                   _mm_set1_epi16((short)x[ib + 1].d), 1);
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(dh), _mm512_loadu_ps(p->dy));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(q), acc);
    }
    __m256 a0 = _mm512_castps512_ps256(acc);
    const __m256 a1 = _mm512_extractf32x8_ps(acc, 1);
    if (ib < nb) { /* the last, even block: into the even chain */
        const mr_gemv_q8p2 *p = &y[ib / 2];
        const __m128i t = _mm_loadu_si128((const __m128i *)x[ib].qs);
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
        const __m256i q = _mm256_dpbusd_epi32(_mm256_loadu_si256((const __m256i *)p->corr), nib,
                                              _mm256_loadu_si256((const __m256i *)p->qs));
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16((short)x[ib].d)), _mm256_loadu_ps(p->dy));
        a0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), a0);
    }
    *s = mr_gemv_hsum(_mm256_add_ps(a0, a1));
}

const mr_vec_dot_fn mr_vec_dot_p1_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_Q4_0] = mr_vd1p_q4_0_avx512,
};

mr_prep_fn mr_gemv_prep_avx512(int wtype) {
    return wtype == MR_TYPE_Q4_0 ? mr_gemv_prep_q8_0 : NULL;
}

size_t mr_gemv_prep_row_size(int wtype, int64_t n) {
    return wtype == MR_TYPE_Q4_0 && n % 32 == 0 ? (size_t)((n / 32 + 1) / 2) * sizeof(mr_gemv_q8p2) : 0;
}

int mr_gemv_rows_p1(int wtype, int n, const uint8_t *W, size_t w_row, const void *xq, int64_t r0, int64_t r1, float *Y) {
    const mr_vec_dot_fn dot = mr_vec_dot_p1_avx512[wtype];
    const size_t sz = mr_gemv_prep_row_size(wtype, n);
    _Alignas(64) uint8_t buf[32768];
    if (!dot || !sz || sz > sizeof buf) return 0;
    mr_gemv_prep_avx512(wtype)(xq, buf, n);
    for (int64_t r = r0; r < r1; r++) dot(n, &Y[r], W + (size_t)r * w_row, buf);
    return 1;
}
