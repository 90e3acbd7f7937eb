/* AVX2 dot products of the i-quant weights with Q8_K activations (IQ4_NL, IQ4_XS, MXFP4: fp4_avx2.c).
 *
 * 32 values (one ymm) at a time: weights decoded to unsigned bytes (grid magnitudes, |level|) with
 * their signs moved onto the activations (vpsignb), vpmaddubsw to int16 pair sums (at most
 * 127 * 127 * 2 = 32258: no saturation), vpmaddwd by the integer group scale to int32, one float
 * fma per super-block (or per 32-block where the scale is a float). Integer sums are exact, so
 * results differ from the scalar reference only by float summation order.
 *
 * Each kernel is written once for nc = 1 or 4 activation columns (y, y + by, ...): the weight
 * decoding is shared, every column runs the same float operations in the same order, so the
 * 4-column kernel (matrix products, quant_simd.h) equals four vec_dot calls bit for bit. */
#include "quant/quant_iq_simd.h"
#include "quant/quant_simd.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"

#include <immintrin.h>
#include <string.h>

static inline uint64_t ld64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t ld32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

#define KI static inline __attribute__((always_inline))
#define UNROLL4 _Pragma("GCC unroll 4")
/* activation column c of nc, by bytes apart */
#define ACT(T, vy, by, c) ((const T *)((const uint8_t *)(vy) + (size_t)(c) * (by)))
#define ENTRIES(T)                                                                                 \
    void mr_vec_dot_##T##_avx2(int n, float *s, const void *w, const void *y) { k_##T(n, s, w, y, 0, 1); } \
    void mr_vec_dot_x4_##T##_avx2(int n, float *s, const void *w, const void *y, size_t by) {       \
        k_##T(n, s, w, y, by, 4);                                                                  \
    }

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
KI void k_iq2_xxs(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq2_xxs *x = w;
    const uint64_t *G = mr_iq2xxs_grid;
    __m256 acc[4];
    UNROLL4 for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        const uint8_t *q2 = (const uint8_t *)x[i].qs;
        __m256i sumi[4];
        UNROLL4 for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            const uint8_t *ix = q2 + 16 * g;   /* index bytes 0..3 (group 2g) and 8..11 (2g+1) */
            const uint32_t sa = ld32(ix + 4), sb = ld32(ix + 12);
            const uint64_t sg = even_signs64(sa, sb);
            const __m256i g1 = _mm256_set_epi64x((long long)G[ix[3]], (long long)G[ix[2]], (long long)G[ix[1]], (long long)G[ix[0]]);
            const __m256i g2 = _mm256_set_epi64x((long long)G[ix[11]], (long long)G[ix[10]], (long long)G[ix[9]], (long long)G[ix[8]]);
            const __m256i s1 = signs32((uint32_t)sg), s2 = signs32((uint32_t)(sg >> 32));
            const __m256i l1 = _mm256_set1_epi16((short)(2 * (sa >> 28) + 1)), l2 = _mm256_set1_epi16((short)(2 * (sb >> 28) + 1));
            UNROLL4 for (int c = 0; c < nc; c++) {
                const int8_t *q8 = ACT(mr_block_q8_k, vy, by, c)[i].qs + 64 * g;
                const __m256i y1 = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), s1);
                const __m256i y2 = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 32)), s2);
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(g1, y1), l1);
                const __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(g2, y2), l2);
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p1, p2));
            }
        }
        const float dx = h2f(x[i].d);
        UNROLL4 for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ACT(mr_block_q8_k, vy, by, c)[i].d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = 0.125f * hsum8(acc[c]);
}
ENTRIES(iq2_xxs)

/* ------------------------------------------------------------------------------------ IQ3_XXS */
KI void k_iq3_xxs(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq3_xxs *x = w;
    const uint32_t *G = mr_iq3xxs_grid;
    __m256 acc[4];
    UNROLL4 for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        const uint8_t *qs = x[i].qs, *sw = x[i].qs + MR_QK_K / 4;
        __m256i sumi[4];
        UNROLL4 for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            const uint32_t sa = ld32(sw + 8 * g), sb = ld32(sw + 8 * g + 4);
            const uint64_t sg = even_signs64(sa, sb);
            const uint8_t *k = qs + 16 * g;
            const __m256i g1 = _mm256_setr_epi32((int)G[k[0]], (int)G[k[1]], (int)G[k[2]], (int)G[k[3]],
                                                 (int)G[k[4]], (int)G[k[5]], (int)G[k[6]], (int)G[k[7]]);
            const __m256i g2 = _mm256_setr_epi32((int)G[k[8]], (int)G[k[9]], (int)G[k[10]], (int)G[k[11]],
                                                 (int)G[k[12]], (int)G[k[13]], (int)G[k[14]], (int)G[k[15]]);
            const __m256i s1 = signs32((uint32_t)sg), s2 = signs32((uint32_t)(sg >> 32));
            const __m256i l1 = _mm256_set1_epi16((short)(2 * (sa >> 28) + 1)), l2 = _mm256_set1_epi16((short)(2 * (sb >> 28) + 1));
            UNROLL4 for (int c = 0; c < nc; c++) {
                const int8_t *q8 = ACT(mr_block_q8_k, vy, by, c)[i].qs + 64 * g;
                const __m256i y1 = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), s1);
                const __m256i y2 = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 32)), s2);
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(g1, y1), l1);
                const __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(g2, y2), l2);
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p1, p2));
            }
        }
        const float dx = h2f(x[i].d);
        UNROLL4 for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ACT(mr_block_q8_k, vy, by, c)[i].d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = 0.25f * hsum8(acc[c]);
}
ENTRIES(iq3_xxs)

/* ------------------------------------------------------------------------------ IQ2_XS / IQ2_S
 * 8 grid values per index, 4-bit scales per 16 values: vpmaddwd with [l1 x 8 | l2 x 8]. */
KI void k_iq2_xs(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq2_xs *x = w;
    const uint64_t *G = mr_iq2xs_grid;
    const uint8_t *KS = mr_ksigns_iq2xs;
    __m256 acc[4];
    UNROLL4 for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        __m256i sumi[4];
        UNROLL4 for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t *q = x[i].qs + 4 * ib;
            const __m256i grid = _mm256_set_epi64x((long long)G[q[3] & 511], (long long)G[q[2] & 511],
                                                   (long long)G[q[1] & 511], (long long)G[q[0] & 511]);
            const __m256i sv = signs32((uint32_t)KS[q[0] >> 9] | (uint32_t)KS[q[1] >> 9] << 8 |
                                       (uint32_t)KS[q[2] >> 9] << 16 | (uint32_t)KS[q[3] >> 9] << 24);
            const unsigned sc = x[i].scales[ib];
            const __m256i ls = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (sc >> 4) + 1)), _mm_set1_epi16((short)(2 * (sc & 0xf) + 1)));
            UNROLL4 for (int c = 0; c < nc; c++) {
                const __m256i yv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(ACT(mr_block_q8_k, vy, by, c)[i].qs + 32 * ib)), sv);
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(grid, yv), ls));
            }
        }
        const float dx = h2f(x[i].d);
        UNROLL4 for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ACT(mr_block_q8_k, vy, by, c)[i].d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = 0.125f * hsum8(acc[c]);
}
ENTRIES(iq2_xs)

KI void k_iq2_s(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq2_s *x = w;
    const uint64_t *G = mr_iq2s_grid;
    __m256 acc[4];
    UNROLL4 for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        const uint8_t *signs = x[i].qs + MR_QK_K / 8;
        __m256i sumi[4];
        UNROLL4 for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const unsigned h = x[i].qh[ib];
            const __m256i grid = _mm256_set_epi64x((long long)G[q[3] | ((h << 2) & 0x300)], (long long)G[q[2] | ((h << 4) & 0x300)],
                                                   (long long)G[q[1] | ((h << 6) & 0x300)], (long long)G[q[0] | ((h << 8) & 0x300)]);
            const __m256i sv = signs32(ld32(signs + 4 * ib));
            const unsigned sc = x[i].scales[ib];
            const __m256i ls = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (sc >> 4) + 1)), _mm_set1_epi16((short)(2 * (sc & 0xf) + 1)));
            UNROLL4 for (int c = 0; c < nc; c++) {
                const __m256i yv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(ACT(mr_block_q8_k, vy, by, c)[i].qs + 32 * ib)), sv);
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(grid, yv), ls));
            }
        }
        const float dx = h2f(x[i].d);
        UNROLL4 for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ACT(mr_block_q8_k, vy, by, c)[i].d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = 0.125f * hsum8(acc[c]);
}
ENTRIES(iq2_s)

/* -------------------------------------------------------------------------------------- IQ3_S
 * Numerics (every AVX2 kernel of the type: vec_dot, 4 columns, repacked): acc = 0; per super-block
 * in order isum = sum_ib (2 l_ib + 1) * (w_ib . y_ib) (exact int32, |isum| < 2^24), then
 * acc = fmaf(d * dy, (float)isum, acc). The float work per super-block is one fma, so a repacked
 * kernel with one row per 32-bit lane does the same operations for 8 rows at once. */

/* the 32 grid magnitudes of sub-block ib (9-bit indices: qs byte | bit of qh[ib] at bit 8) */
KI __m256i iq3s_grid32(const mr_block_iq3_s *x, int ib) {
    const uint32_t *G = mr_iq3s_grid;
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * ib)));
    idx = _mm256_or_si256(idx, _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(x->qh[ib]), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
                                                 _mm256_set1_epi32(256)));
    uint32_t k[8];   /* through memory to scalar loads: cheaper than vpgatherdd on Zen */
    _mm256_storeu_si256((__m256i *)k, idx);
    return _mm256_setr_epi32((int)G[k[0]], (int)G[k[1]], (int)G[k[2]], (int)G[k[3]],
                             (int)G[k[4]], (int)G[k[5]], (int)G[k[6]], (int)G[k[7]]);
}

static inline int hsum_i32(__m256i v) {
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(a);
}

/* Per super-block, the unrepacked kernels first turn qs/qh into 64 16-bit grid indices (four
 * vector steps and stores), the 8 scales 2 l + 1 into words of one vector and the 32 sign bytes
 * into two lane-broadcast vectors; per 32 values the scale and the signs are then one byte shuffle
 * each, and the 8 grid entries are scalar loads paired into 64-bit words (four 64-bit inserts
 * instead of eight 32-bit ones). */
static const uint8_t iq3s_sign_rep[4][32] = {
#define R4(b) b, b, b, b, b, b, b, b
    {R4(0), R4(1), R4(2), R4(3)}, {R4(4), R4(5), R4(6), R4(7)}, {R4(8), R4(9), R4(10), R4(11)}, {R4(12), R4(13), R4(14), R4(15)},
#undef R4
};
static const uint8_t iq3s_sc_rep[8][32] = {
#define W16(b) b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1
    {W16(0), W16(0)}, {W16(2), W16(2)}, {W16(4), W16(4)}, {W16(6), W16(6)},
    {W16(8), W16(8)}, {W16(10), W16(10)}, {W16(12), W16(12)}, {W16(14), W16(14)},
#undef W16
};

typedef struct {
    uint16_t idx[64];
    __m256i sgn[2], ls;
} iq3s_pre;

KI void iq3s_prepare(const mr_block_iq3_s *x, iq3s_pre *p) {
    /* index j of 16-index group k (sub-blocks 2k, 2k+1) takes bit j of the 16-bit qh word k */
    const __m256i bits = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, (short)32768);
    const __m256i b8 = _mm256_set1_epi16(0x100);
    for (int k = 0; k < 4; k++) {
        const __m256i q = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->qs + 16 * k)));
        uint16_t h16;
        memcpy(&h16, x->qh + 2 * k, 2);
        const __m256i h = _mm256_and_si256(_mm256_set1_epi16((short)h16), bits);
        _mm256_storeu_si256((__m256i *)(p->idx + 16 * k), _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi16(h, bits), b8)));
    }
    p->sgn[0] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x->signs));
    p->sgn[1] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x->signs + 16)));
    /* scales: byte ib of 4 nibbles -> words 2 l + 1 in both lanes */
    const __m128i sb = _mm_cvtsi32_si128((int)ld32(x->scales));
    const __m128i l = _mm_unpacklo_epi8(_mm_and_si128(sb, _mm_set1_epi8(0x0f)), _mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0f)));
    const __m128i w = _mm_cvtepu8_epi16(l);
    p->ls = _mm256_broadcastsi128_si256(_mm_or_si128(_mm_add_epi16(w, w), _mm_set1_epi16(1)));
}

/* grid magnitudes of sub-block ib from the prepared indices */
KI __m256i iq3s_grid_pre(const iq3s_pre *p, int ib) {
    const uint32_t *G = mr_iq3s_grid;
    const uint16_t *k = p->idx + 8 * ib;
    uint64_t a = G[k[0]] | (uint64_t)G[k[1]] << 32, b = G[k[2]] | (uint64_t)G[k[3]] << 32;
    uint64_t c = G[k[4]] | (uint64_t)G[k[5]] << 32, d = G[k[6]] | (uint64_t)G[k[7]] << 32;
    /* keep the pairing in general registers (GCC's SLP vectorizer turns it into 32-bit inserts
     * and vector shifts, slower than the 64-bit inserts) */
    __asm__("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
    return _mm256_setr_epi64x((long long)a, (long long)b, (long long)c, (long long)d);
}

/* +-1 bytes of sub-block ib (sign bit set: -1) */
KI __m256i iq3s_sign_pre(const iq3s_pre *p, int ib) {
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(p->sgn[ib >> 2], _mm256_loadu_si256((const __m256i *)iq3s_sign_rep[ib & 3])), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
}

KI void k_iq3_s(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq3_s *x = w;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < n / MR_QK_K; i++) {
        iq3s_pre p;
        iq3s_prepare(x + i, &p);
        __m256i sumi[4];
        UNROLL4 for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const __m256i grid = iq3s_grid_pre(&p, ib);
            const __m256i sv = iq3s_sign_pre(&p, ib);
            const __m256i ls = _mm256_shuffle_epi8(p.ls, _mm256_loadu_si256((const __m256i *)iq3s_sc_rep[ib]));
            UNROLL4 for (int c = 0; c < nc; c++) {
                const __m256i yv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(ACT(mr_block_q8_k, vy, by, c)[i].qs + 32 * ib)), sv);
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(grid, yv), ls));
            }
        }
        const float dx = h2f(x[i].d);
        UNROLL4 for (int c = 0; c < nc; c++)
            acc[c] = __builtin_fmaf(dx * ACT(mr_block_q8_k, vy, by, c)[i].d, (float)hsum_i32(sumi[c]), acc[c]);
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = acc[c];
}
ENTRIES(iq3_s)

/* Repacked IQ3_S (8 rows, quant_simd.h): the grid lookups done once at load. Each weight w (odd,
 * -15..15) is stored as the nibble u = (w + 15) / 2, so w . y = 2 u . y - 15 sum(y) with sum(y)
 * from the Q8_K bsums; vpmaddubsw(u, y) needs no sign trick. Per group and super-block: fp16 d[8],
 * the scales 2 l + 1 as bytes sc[ib][row], then per sub-block ib four 32-byte vectors P_m whose
 * 32-bit lane r holds row r's nibbles of values 4m..4m+3 (low) and 16+4m..16+4m+3 (high). The
 * eight vpmaddubsw of a sub-block add up in int16 (|sum| <= 8 x 2 x 15 x 128 = 30720), one
 * vpmaddwd by 2 (2 l + 1) widens and scales. 1104 bytes for 8 x 110 plain (x 1.25). */
typedef struct {
    uint16_t d[8];
    uint8_t sc[8][8];        /* [ib][row] */
    uint8_t q[8][4][32];     /* [ib][m][row lanes] */
} iq3s_rp8;
_Static_assert(sizeof(iq3s_rp8) == MR_IQ3_S_RP8_BLOCK_BYTES, "repacked iq3_s super-block (8 rows x 256 values)");

/* super-block i of the 8 rows at w0 (w_row bytes apart) -> o */
KI void iq3s_pack_sb(const uint8_t *w0, size_t w_row, int64_t i, iq3s_rp8 *o) {
    const __m256i k15 = _mm256_set1_epi8(15), m7f = _mm256_set1_epi8(0x7f);
    for (int r = 0; r < 8; r++) {
        const mr_block_iq3_s *b = (const mr_block_iq3_s *)(w0 + (size_t)r * w_row) + i;
        iq3s_pre p;
        iq3s_prepare(b, &p);
        o->d[r] = b->d;
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            o->sc[ib][r] = (uint8_t)(2 * ((b->scales[ib / 2] >> (4 * (ib & 1))) & 0xf) + 1);
            const __m256i v = _mm256_sign_epi8(iq3s_grid_pre(&p, ib), iq3s_sign_pre(&p, ib));
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(_mm256_add_epi8(v, k15), 1), m7f);
            const __m128i nib = _mm_or_si128(_mm256_castsi256_si128(u), _mm_slli_epi16(_mm256_extracti128_si256(u, 1), 4));
            /* dword m of the nibbles -> row r's lane of vector m */
            _mm_storeu_si32(&o->q[ib][0][4 * r], nib);
            _mm_storeu_si32(&o->q[ib][1][4 * r], _mm_srli_si128(nib, 4));
            _mm_storeu_si32(&o->q[ib][2][4 * r], _mm_srli_si128(nib, 8));
            _mm_storeu_si32(&o->q[ib][3][4 * r], _mm_srli_si128(nib, 12));
        }
    }
}

void mr_iq3_s_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    const int64_t nb = cols / MR_QK_K;
    const size_t w_row = (size_t)nb * sizeof(mr_block_iq3_s);
    iq3s_rp8 *out = dst;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t i = 0; i < nb; i++) iq3s_pack_sb((const uint8_t *)src + (size_t)(8 * g) * w_row, w_row, i, &out[g * nb + i]);
}

/* 8 bytes (one per row) -> int16 pairs (2 v, 2 v) per lane */
KI __m256i iq3s_pair2(const uint8_t *p) {
    const __m256i v = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)), 1);
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* carry: the accumulators start from out (a previous run over the row's earlier super-blocks) */
KI void iq3s_rows(const iq3s_rp8 *w, int nb, const mr_block_q8_k *const *y, float *const *out, const int nc, int carry) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    UNROLL4 for (int c = 0; c < nc; c++) acc[c] = carry ? _mm256_loadu_ps(out[c]) : _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const iq3s_rp8 *b = &w[i];
        __m256i isum[4], corr[4];
        UNROLL4 for (int c = 0; c < nc; c++) isum[c] = corr[c] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            __m256i t16[4];
            UNROLL4 for (int c = 0; c < nc; c++) t16[c] = _mm256_setzero_si256();
            UNROLL4 for (int m = 0; m < 4; m++) {
                const __m256i p = _mm256_loadu_si256((const __m256i *)b->q[ib][m]);
                const __m256i lo = _mm256_and_si256(p, m4), hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), m4);
                UNROLL4 for (int c = 0; c < nc; c++) {
                    const int8_t *q = y[c][i].qs + 32 * ib + 4 * m;
                    t16[c] = _mm256_add_epi16(t16[c], _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32((int)ld32(q))),
                                                                       _mm256_maddubs_epi16(hi, _mm256_set1_epi32((int)ld32(q + 16)))));
                }
            }
            const __m256i sc2 = iq3s_pair2(b->sc[ib]);
            UNROLL4 for (int c = 0; c < nc; c++) {
                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(t16[c], sc2));
                /* 15 (2 l + 1) sum(y_ib), added as int32 lanes (2 l + 1) x sum(y_ib) */
                const int16_t *bs = y[c][i].bsums + 2 * ib;
                corr[c] = _mm256_add_epi32(corr[c], _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)b->sc[ib])),
                                                                       _mm256_set1_epi32(bs[0] + bs[1])));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        UNROLL4 for (int c = 0; c < nc; c++) {
            const __m256i is = _mm256_sub_epi32(isum[c], _mm256_sub_epi32(_mm256_slli_epi32(corr[c], 4), corr[c]));
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[c][i].d)), _mm256_cvtepi32_ps(is), acc[c]);
        }
    }
    UNROLL4 for (int c = 0; c < nc; c++) _mm256_storeu_ps(out[c], acc[c]);
}

void mr_iq3_s_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / MR_QK_K);
    const mr_block_q8_k *const *a = (const mr_block_q8_k *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) iq3s_rows(w, nb, a + c, y + c, 4, 0);
    for (; c < nc; c++) iq3s_rows(w, nb, a + c, y + c, 1, 0);
}

/* GEMM block (mr_gemm_fn) on unrepacked rows (paged experts): each group of 8 rows is repacked
 * IQ3S_CHUNK super-blocks at a time into a stack buffer and multiplied by the repacked kernel for
 * every column, its float accumulators carried between chunks through s (stored and reloaded: the
 * same float operations in the same order), so each grid lookup serves all nc columns. Rows after
 * the last whole group go through the 4-column and one-column kernels. Bit for bit dot. */
#define IQ3S_CHUNK 8   /* super-blocks: 8 x 1104 bytes */
void mr_gemm_iq3_s_avx2(int n, const void *w, size_t w_row, int nr, const void *vy, size_t by, int nc, float *s, size_t s_col) {
    const int nb = n / MR_QK_K;
    const uint8_t *W = w;
    int r0 = 0;
    for (; r0 + 8 <= nr; r0 += 8) {
        iq3s_rp8 buf[IQ3S_CHUNK];
        for (int i0 = 0; i0 < nb; i0 += IQ3S_CHUNK) {
            const int k = nb - i0 < IQ3S_CHUNK ? nb - i0 : IQ3S_CHUNK;
            for (int i = 0; i < k; i++) iq3s_pack_sb(W + (size_t)r0 * w_row, w_row, i0 + i, &buf[i]);
            for (int c = 0; c < nc; c += 4) {
                const int m = nc - c < 4 ? nc - c : 4;
                const mr_block_q8_k *a[4];
                float *o[4];
                for (int j = 0; j < m; j++) {
                    a[j] = ACT(mr_block_q8_k, vy, by, c + j) + i0;
                    o[j] = s + (size_t)(c + j) * s_col + r0;
                }
                if (m == 4) iq3s_rows(buf, k, a, o, 4, i0 > 0);
                else
                    for (int j = 0; j < m; j++) iq3s_rows(buf, k, a + j, o + j, 1, i0 > 0);
            }
        }
    }
    for (; r0 < nr; r0++) {
        const uint8_t *row = W + (size_t)r0 * w_row;
        int c = 0;
        for (; c + 4 <= nc; c += 4) {
            float t[4];
            k_iq3_s(n, t, row, ACT(uint8_t, vy, by, c), by, 4);
            for (int j = 0; j < 4; j++) s[(size_t)(c + j) * s_col + r0] = t[j];
        }
        for (; c < nc; c++) k_iq3_s(n, &s[(size_t)c * s_col + r0], row, ACT(uint8_t, vy, by, c), 0, 1);
    }
}

/* -------------------------------------------------------------------------------------- IQ1_S
 * grid values g in {-1, 0, 1} enter as g + 1; the +1 and the +-1/8 shift are corrected with the
 * activation sums: sum l (g + delta) q = l dot(g + 1, q) + l S (delta - 1). */
KI void k_iq1_s(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq1_s *x = w;
    const uint64_t *G = mr_iq1s_grid;
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc[4];
    float acc_corr[4];
    UNROLL4 for (int c = 0; c < nc; c++) { acc[c] = _mm256_setzero_ps(); acc_corr[c] = 0.f; }
    for (int i = 0; i < n / MR_QK_K; i++) {
        __m256i sumi[4];
        int corr[4];   /* in units of 1/8 */
        UNROLL4 for (int c = 0; c < nc; c++) { sumi[c] = _mm256_setzero_si256(); corr[c] = 0; }
        for (int ib = 0; ib < 8; ib++) {
            const unsigned h = x[i].qh[ib];
            const uint64_t p = _pdep_u64(ld32(x[i].qs + 4 * ib), 0x00ff00ff00ff00ffull) |
                               _pdep_u64(h & 0xfff, 0x0700070007000700ull);
            const __m256i grid = _mm256_add_epi8(_mm256_set_epi64x((long long)G[p >> 48], (long long)G[(p >> 32) & 0xffff],
                                                                   (long long)G[(p >> 16) & 0xffff], (long long)G[p & 0xffff]), one);
            const int l = (int)(2 * ((h >> 12) & 7) + 1);
            const __m256i lv = _mm256_set1_epi16((short)l);
            const int f = l * ((h & 0x8000) ? -9 : -7);
            UNROLL4 for (int c = 0; c < nc; c++) {
                const mr_block_q8_k *a = ACT(mr_block_q8_k, vy, by, c) + i;
                const __m256i q = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * ib));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(grid, q), lv));
                corr[c] += f * (a->bsums[2 * ib] + a->bsums[2 * ib + 1]);
            }
        }
        const float dx = h2f(x[i].d);
        UNROLL4 for (int c = 0; c < nc; c++) {
            const float d = dx * ACT(mr_block_q8_k, vy, by, c)[i].d;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
            acc_corr[c] += d * (float)corr[c];
        }
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = hsum8(acc[c]) + 0.125f * acc_corr[c];
}
ENTRIES(iq1_s)

/* -------------------------------------------------------------------------------------- IQ1_M
 * 8 w = 8 g + delta8 (delta8 = +-1 per 8 values) enters as u = 8 (g + 1) + (delta8 > 0 ? 2 : 0):
 * 8 sum w q = dot(u, q) - 9 S per 16-value scale group (S from bsums). */
KI void k_iq1_m(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq1_m *x = w;
    const uint64_t *G = mr_iq1s_grid;
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc[4];
    float acc_corr[4];
    UNROLL4 for (int c = 0; c < nc; c++) { acc[c] = _mm256_setzero_ps(); acc_corr[c] = 0.f; }
    for (int i = 0; i < n / MR_QK_K; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        __m256i sumi[4];
        int corr[4];
        UNROLL4 for (int c = 0; c < nc; c++) { sumi[c] = _mm256_setzero_si256(); corr[c] = 0; }
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
            const __m256i ls = _mm256_set_m128i(_mm_set1_epi16((short)l2), _mm_set1_epi16((short)l1));
            UNROLL4 for (int c = 0; c < nc; c++) {
                const mr_block_q8_k *a = ACT(mr_block_q8_k, vy, by, c) + i;
                const __m256i q = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * ib));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ls));
                corr[c] += l1 * a->bsums[2 * ib] + l2 * a->bsums[2 * ib + 1];
            }
        }
        const float dx = h2f(d16);
        UNROLL4 for (int c = 0; c < nc; c++) {
            const float d = dx * ACT(mr_block_q8_k, vy, by, c)[i].d;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
            acc_corr[c] += d * (float)corr[c];
        }
    }
    UNROLL4 for (int c = 0; c < nc; c++) s[c] = 0.125f * (hsum8(acc[c]) - 9.0f * acc_corr[c]);
}
ENTRIES(iq1_m)
