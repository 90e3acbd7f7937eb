/* AVX2 dot products of the i-quant and FP4 weights with Q8_K / Q8_0 activations.
 *
 * 32 values (one ymm) at a time: weights decoded to unsigned bytes (grid magnitudes, |level|) with
 * their signs moved onto the activations (vpsignb), vpmaddubsw to int16 pair sums (at most
 * 127 * 127 * 2 = 32258: no saturation), vpmaddwd by the integer group scale to int32, one float
 * fma per super-block (or per 32-block where the scale is a float). Integer sums are exact, so
 * results differ from the scalar reference only by float summation order. */
#include "quant/quant_iq_simd.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"

#include <immintrin.h>
#include <string.h>

static inline uint64_t ld64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t ld32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 sign bits -> +-1 bytes (bit j set: byte j = -1) */
static inline __m256i signs32(uint32_t bits) {
    const __m256i rep = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), rep), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
}

/* IQ2_XXS / IQ3_XXS sign bytes: 7 stored bits per 8 values plus even parity (ksigns_iq2xs).
 * a, b: the 28 sign bits of two 32-value groups -> 64 sign bits */
static inline uint64_t even_signs64(uint32_t a, uint32_t b) {
    const uint64_t s = _pdep_u64((uint64_t)(a & 0x0fffffff) | (uint64_t)(b & 0x0fffffff) << 28,
                                 0x7f7f7f7f7f7f7f7full);
    uint64_t p = s ^ (s >> 4);     /* bit 7 of each byte is 0: no bits leak into bits 0..3 */
    p ^= p >> 2;
    p ^= p >> 1;
    return s | (p & 0x0101010101010101ull) << 7;
}

/* ------------------------------------------------------------------------------------ IQ2_XXS */
void mr_vec_dot_iq2_xxs_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_iq2_xxs *x = w;
    const mr_block_q8_k *a = y;
    const uint64_t *G = mr_iq2xxs_grid;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        const uint8_t *q2 = (const uint8_t *)x[i].qs;
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            const uint8_t *ix = q2 + 16 * g;   /* index bytes 0..3 (group 2g) and 8..11 (2g+1) */
            const uint32_t sa = ld32(ix + 4), sb = ld32(ix + 12);
            const uint64_t sg = even_signs64(sa, sb);
            const __m256i g1 = _mm256_set_epi64x((long long)G[ix[3]], (long long)G[ix[2]], (long long)G[ix[1]], (long long)G[ix[0]]);
            const __m256i g2 = _mm256_set_epi64x((long long)G[ix[11]], (long long)G[ix[10]], (long long)G[ix[9]], (long long)G[ix[8]]);
            const __m256i y1 = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 64 * g)), signs32((uint32_t)sg));
            const __m256i y2 = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 64 * g + 32)), signs32((uint32_t)(sg >> 32)));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(g1, y1), _mm256_set1_epi16((short)(2 * (sa >> 28) + 1)));
            const __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(g2, y2), _mm256_set1_epi16((short)(2 * (sb >> 28) + 1)));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p1, p2));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = 0.125f * hsum8(acc);
}

/* -------------------------------------------------------------------------------------- IQ3_S */
void mr_vec_dot_iq3_s_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_iq3_s *x = w;
    const mr_block_q8_k *a = y;
    const uint32_t *G = mr_iq3s_grid;
    const __m256i hshift = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1);
    const __m256i bit8 = _mm256_set1_epi32(256);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            /* 8 indices: qs byte | bit k of qh[ib] at bit 8; through memory to scalar loads */
            __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x[i].qs + 8 * ib)));
            idx = _mm256_or_si256(idx, _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(x[i].qh[ib]), hshift), bit8));
            uint32_t k[8];
            _mm256_storeu_si256((__m256i *)k, idx);
            const __m256i grid = _mm256_setr_epi32((int)G[k[0]], (int)G[k[1]], (int)G[k[2]], (int)G[k[3]],
                                                   (int)G[k[4]], (int)G[k[5]], (int)G[k[6]], (int)G[k[7]]);
            const __m256i yv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 32 * ib)),
                                                signs32(ld32(x[i].signs + 4 * ib)));
            const int ls = 2 * ((x[i].scales[ib / 2] >> (4 * (ib & 1))) & 0xf) + 1;
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(grid, yv), _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum8(acc);
}

/* -------------------------------------------------------------------------------------- IQ1_S
 * grid values g in {-1, 0, 1} enter as g + 1; the +1 and the +-1/8 shift are corrected with the
 * activation sums: sum l (g + delta) q = l dot(g + 1, q) + l S (delta - 1). */
void mr_vec_dot_iq1_s_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_iq1_s *x = w;
    const mr_block_q8_k *a = y;
    const uint64_t *G = mr_iq1s_grid;
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float acc_corr = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const int8_t *q8 = a[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        int corr = 0;   /* in units of 1/8 */
        for (int ib = 0; ib < 8; ib++) {
            const unsigned h = x[i].qh[ib];
            const uint64_t p = _pdep_u64(ld32(x[i].qs + 4 * ib), 0x00ff00ff00ff00ffull) |
                               _pdep_u64(h & 0xfff, 0x0700070007000700ull);
            const __m256i grid = _mm256_set_epi64x((long long)G[p >> 48], (long long)G[(p >> 32) & 0xffff],
                                                   (long long)G[(p >> 16) & 0xffff], (long long)G[p & 0xffff]);
            const int l = (int)(2 * ((h >> 12) & 7) + 1);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(q8 + 32 * ib));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_add_epi8(grid, one), q),
                                                            _mm256_set1_epi16((short)l)));
            corr += l * (a[i].bsums[2 * ib] + a[i].bsums[2 * ib + 1]) * ((h & 0x8000) ? -9 : -7);
        }
        const float d = h2f(x[i].d) * a[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        acc_corr += d * (float)corr;
    }
    *s = hsum8(acc) + 0.125f * acc_corr;
}

/* -------------------------------------------------------------------------------------- IQ1_M
 * 8 w = 8 g + delta8 (delta8 = +-1 per 8 values) enters as u = 8 (g + 1) + (delta8 > 0 ? 2 : 0):
 * 8 sum w q = dot(u, q) - 9 S per 16-value scale group (S from bsums). */
void mr_vec_dot_iq1_m_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_iq1_m *x = w;
    const mr_block_q8_k *a = y;
    const uint64_t *G = mr_iq1s_grid;
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float acc_corr = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const int8_t *q8 = a[i].qs;
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        __m256i sumi = _mm256_setzero_si256();
        int corr = 0;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned h = (unsigned)x[i].qh[2 * ib] | (unsigned)x[i].qh[2 * ib + 1] << 8;
            const uint64_t p = _pdep_u64(ld32(x[i].qs + 4 * ib), 0x00ff00ff00ff00ffull) |
                               (_pdep_u64(h, 0x0f000f000f000f00ull) & 0x0700070007000700ull);
            const __m256i grid = _mm256_set_epi64x((long long)G[p >> 48], (long long)G[(p >> 32) & 0xffff],
                                                   (long long)G[(p >> 16) & 0xffff], (long long)G[p & 0xffff]);
            /* +2 on the bytes of 8-groups whose shift is positive (bit 3 of the nibble clear) */
            const uint32_t pos = (uint32_t)_pdep_u32(_pext_u32(~h, 0x8888u), 0x01010101u);   /* 0/1 per group */
            const __m256i two = _mm256_and_si256(_mm256_sub_epi64(_mm256_setzero_si256(),
                                                                  _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int)pos))),
                                                 _mm256_set1_epi8(2));
            const __m256i u = _mm256_add_epi8(_mm256_slli_epi16(_mm256_add_epi8(grid, one), 3), two);
            const unsigned w6 = (unsigned)(sc[ib / 2] >> (6 * (ib % 2)));
            const int l1 = (int)(2 * (w6 & 7) + 1), l2 = (int)(2 * ((w6 >> 3) & 7) + 1);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(q8 + 32 * ib));
            const __m256i ls = _mm256_set_m128i(_mm_set1_epi16((short)l2), _mm_set1_epi16((short)l1));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ls));
            corr += l1 * a[i].bsums[2 * ib] + l2 * a[i].bsums[2 * ib + 1];
        }
        const float d = h2f(d16) * a[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        acc_corr += d * (float)corr;
    }
    *s = 0.125f * (hsum8(acc) - 9.0f * acc_corr);
}

/* ----------------------------------------------------------------------- IQ4_NL / IQ4_XS / MXFP4
 * 16 code bytes of a 32-value group -> 32 signed levels (low nibbles = values 0..15, high = 16..31)
 * through an in-lane byte shuffle of the level table. */
static inline __m256i levels32(const uint8_t *qs, __m256i lut) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs);
    const __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(lut, c);
}

/* sum of signed w * signed q in int16 pairs (vpsignb moves the sign of w onto q) */
static inline __m256i mul_pairs(__m256i wv, __m256i q) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(q, wv));
}

static inline __m256i lut_iq4nl(void) {
    const __m128i t = _mm_loadu_si128((const __m128i *)mr_kvalues_iq4nl);
    return _mm256_set_m128i(t, t);
}

void mr_vec_dot_iq4_nl_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_iq4_nl *x = w;
    const mr_block_q8_0 *a = y;
    const __m256i lut = lut_iq4nl(), ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK4_NL; i++) {
        const __m256i p = mul_pairs(levels32(x[i].qs, lut), _mm256_loadu_si256((const __m256i *)a[i].qs));
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(a[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc);
    }
    *s = hsum8(acc);
}

void mr_vec_dot_iq4_xs_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_iq4_xs *x = w;
    const mr_block_q8_k *a = y;
    const __m256i lut = lut_iq4nl();
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        const unsigned sh = x[i].scales_h;
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (int)(((x[i].scales_l[ib / 2] >> (4 * (ib & 1))) & 0xf) | ((sh >> (2 * ib)) & 3) << 4) - 32;
            const __m256i p = mul_pairs(levels32(x[i].qs + 16 * ib, lut), _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * a[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum8(acc);
}

/* E8M0 exponent e -> 2^(e - 128), half the block scale (the level table is doubled) */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

void mr_vec_dot_mxfp4_avx2(int n, float *s, const void *w, const void *y) {
    const mr_block_mxfp4 *x = w;
    const mr_block_q8_0 *a = y;
    const __m128i t = _mm_loadu_si128((const __m128i *)mr_kvalues_mxfp4);
    const __m256i lut = _mm256_set_m128i(t, t), ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_MXFP4; i++) {
        const __m256i p = mul_pairs(levels32(x[i].qs, lut), _mm256_loadu_si256((const __m256i *)a[i].qs));
        const __m256 d = _mm256_set1_ps(e8m0_half(x[i].e) * h2f(a[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc);
    }
    *s = hsum8(acc);
}
