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
 * Prepared row (mr_gemv_prep_row_size): per 32-value block, int32 corr[8], int8 qs[32], float d. */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <immintrin.h>
#include <string.h>

typedef struct { int32_t corr[8]; int8_t qs[32]; float d; } mr_gemv_q8p;
_Static_assert(sizeof(mr_gemv_q8p) == 68, "prepared q8_0 block for the GEMV");

static void mr_gemv_prep_q8_0(const void *src, void *dst, int n) {
    const mr_block_q8_0 *x = src;
    mr_gemv_q8p *y = dst;
    const __m256i eight = _mm256_set1_epi8(8);
    for (int i = 0; i < n / 32; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i s8 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, q); /* 8 * lane sums */
        _mm256_storeu_si256((__m256i *)y[i].corr, _mm256_sub_epi32(_mm256_setzero_si256(), s8));
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
        y[i].d = _cvtsh_ss(x[i].d);
    }
}

/* as kx_hsum (quant_kern_x86.h): the same adds in the same order */
static inline float mr_gemv_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static inline __m256 mr_gemv_blk_q4_0(const mr_block_q4_0 *b, const mr_gemv_q8p *y, __m256 acc) {
    const __m128i t = _mm_loadu_si128((const __m128i *)b->qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
    const __m256i p = _mm256_dpbusd_epi32(_mm256_loadu_si256((const __m256i *)y->corr), nib,
                                          _mm256_loadu_si256((const __m256i *)y->qs));
    const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi16((short)b->d));
    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(y->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
}

static void mr_vd1p_q4_0_avx512(int n, float *s, const void *w, const void *vy) {
    const int nb = n / 32;
    const mr_block_q4_0 *x = w;
    const mr_gemv_q8p *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        a0 = mr_gemv_blk_q4_0(&x[ib], &y[ib], a0);
        a1 = mr_gemv_blk_q4_0(&x[ib + 1], &y[ib + 1], a1);
    }
    if (ib < nb) a0 = mr_gemv_blk_q4_0(&x[ib], &y[ib], a0);
    *s = mr_gemv_hsum(_mm256_add_ps(a0, a1));
}

const mr_vec_dot_fn mr_vec_dot_p1_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_Q4_0] = mr_vd1p_q4_0_avx512,
};

mr_prep_fn mr_gemv_prep_avx512(int wtype) {
    return wtype == MR_TYPE_Q4_0 ? mr_gemv_prep_q8_0 : NULL;
}

size_t mr_gemv_prep_row_size(int wtype, int64_t n) {
    return wtype == MR_TYPE_Q4_0 && n % 32 == 0 ? (size_t)(n / 32) * sizeof(mr_gemv_q8p) : 0;
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
