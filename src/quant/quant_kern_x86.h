/* x86 dot-product kernels for the integer-quantized types (Q4_0 .. Q8_0, Q2_K .. Q6_K), written once
 * and instantiated twice: by quant_avx2.c (AVX2: vpmaddubsw + vpmaddwd) and by quant_avx512.c
 * (KX_VNNI=1: AVX512-VNNI vpdpbusd / vpdpwssd on 256-bit vectors, which on Zen 4 run at the same
 * rate per byte as 512-bit ones without the cross-lane shuffles).
 *
 * This header contains intrinsics: include it ONLY from *_avx2.c / *_avx512.c, which are compiled
 * with the ISA flags (see DEVELOPING.md). Define KX_VNNI (0 or 1) before including it.
 *
 * Every kernel is written for nc columns (nc = 1 or 4, a compile-time constant after inlining):
 * column c's float operations are the same whatever nc, so the 4-column kernel equals 4 calls of
 * vec_dot bit for bit. Integer partial sums are exact, so only float operations matter for that.
 *
 * Block layouts: quant_blocks.h (ggml's). */
#ifndef MR_QUANT_KERN_X86_H
#define MR_QUANT_KERN_X86_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant/iq_grids.h"
#include "quant/quant_blocks.h"
#include "quant/quant_blocks_iq.h"

#ifndef KX_VNNI
#error "define KX_VNNI before including quant_kern_x86.h"
#endif

#define KX_INLINE static inline __attribute__((always_inline))
#define KX_UNROLL _Pragma("GCC unroll 8")

typedef mr_block_q8_0 kb_q8_0;
typedef mr_block_q8_1 kb_q8_1;
typedef mr_block_q8_k kb_q8_k;
typedef mr_block_q4_0 kb_q4_0;
typedef mr_block_q4_1 kb_q4_1;
typedef mr_block_q5_0 kb_q5_0;
typedef mr_block_q5_1 kb_q5_1;
typedef mr_block_q2_k kb_q2_k;
typedef mr_block_q3_k kb_q3_k;
typedef mr_block_q4_k kb_q4_k;
typedef mr_block_q5_k kb_q5_k;
typedef mr_block_q6_k kb_q6_k;

/* ---- helpers ---- */

KX_INLINE float kx_h2f(uint16_t h) { return _cvtsh_ss(h); }
/* fp16 at p broadcast to 8 floats (a broadcast load and one conversion) */
KX_INLINE __m256 kx_h2f8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_set1_epi16((short)*p));
}

KX_INLINE float kx_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

KX_INLINE __m256i kx_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* acc + sum over each group of 4 bytes of u (unsigned) * s (signed), as 8 int32 */
KX_INLINE __m256i kx_dot(__m256i acc, __m256i u, __m256i s) {
#if KX_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* acc + pairwise int16 products p * sc summed into int32 */
KX_INLINE __m256i kx_madd(__m256i acc, __m256i p, __m256i sc) {
#if KX_VNNI
    return _mm256_dpwssd_epi32(acc, p, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (values 0..15) then high nibbles (values 16..31) */
KX_INLINE __m256i kx_nib32(const uint8_t *q) {
    const __m128i t = _mm_loadu_si128((const __m128i *)q);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, 0xff where the bit is set (bit i -> byte i) */
KX_INLINE __m256i kx_bits32(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf), mask);
    return _mm256_cmpeq_epi8(v, mask);
}

/* Bit `bit` of every byte of v moved to bit `to` (other bits cleared); bit, to in 0..7. */
KX_INLINE __m256i kx_bit_to(__m256i v, int bit, int to) {
    const __m256i m = _mm256_set1_epi8((char)(1 << to));
    if (bit == to) return _mm256_and_si256(v, m);
    if (bit < to) return _mm256_and_si256(_mm256_slli_epi16(v, to - bit), m);
    return _mm256_and_si256(_mm256_srli_epi16(v, bit - to), m);
}

/* Scales of 16-value sub-blocks for the 32-value chunk p (0..7): int16 [s[2p] x8 | s[2p+1] x8].
 * kx_pair_prep widens the 16 signed byte scales once per super-block into two vectors holding
 * scales 0..7 / 8..15 in both 128-bit lanes; kx_pair_scales is then one in-lane byte shuffle. */
typedef struct { __m256i lo, hi; } kx_pairs;
KX_INLINE kx_pairs kx_pair_prep(__m128i sc8) {
    const __m256i s16 = _mm256_cvtepi8_epi16(sc8);
    kx_pairs r = {_mm256_permute2x128_si256(s16, s16, 0x00), _mm256_permute2x128_si256(s16, s16, 0x11)};
    return r;
}
static const uint8_t kx_pair_shuf[4][32] = {
#define KX_P(a, b) a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, \
                   b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1
    {KX_P(0, 2)}, {KX_P(4, 6)}, {KX_P(8, 10)}, {KX_P(12, 14)}
#undef KX_P
};
KX_INLINE __m256i kx_pair_scales(kx_pairs sp, int p) {
    return _mm256_shuffle_epi8(p < 4 ? sp.lo : sp.hi, kx_load(kx_pair_shuf[p & 3]));
}

/* 12 bytes as three 32-bit lanes [u0, u1, u2, 0], without reading past them */
KX_INLINE __m128i kx_load12(const uint8_t *p) {
    uint32_t u2;
    memcpy(&u2, p + 8, 4);
    return _mm_insert_epi32(_mm_loadl_epi64((const __m128i *)p), (int)u2, 2);
}

/* 6-bit scales and mins of Q4_K / Q5_K (12 bytes, ggml's packing) decoded in registers:
 * bytes 0..7 = scales of the 8 sub-blocks, bytes 8..15 = their mins.
 *   scales 0..3 = u0 & 0x3f,  scales 4..7 = (u2 & 0x0f) | (u0 >> 6) << 4,
 *   mins 0..3   = u1 & 0x3f,  mins 4..7   = (u2 >> 4 & 0x0f) | (u1 >> 6) << 4   (per byte) */
KX_INLINE __m128i kx_scales_k4(const uint8_t *s12) {
    const __m128i u = kx_load12(s12);
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0)), _mm_set1_epi32(6)),
                                     _mm_setr_epi32(0, 0x03030303, 0, 0x03030303));
    return _mm_or_si128(lo, _mm_slli_epi32(hi, 4));
}

/* 16 6-bit scales of Q3_K (ggml's packing) decoded in registers, minus 32, as signed bytes:
 *   bytes 0..7 = (u0|u1 & 0x0f) | (u2 >> 0|2 & 3) << 4,  bytes 8..15 = (u0|u1 >> 4 & 0x0f) | (u2 >> 4|6 & 3) << 4 */
KX_INLINE __m128i kx_scales_q3k(const uint8_t *s12) {
    const __m128i u = kx_load12(s12);
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u, _MM_SHUFFLE(1, 0, 1, 0)), _mm_setr_epi32(0, 0, 4, 4)),
                                     _mm_set1_epi32(0x0f0f0f0f));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u, _MM_SHUFFLE(2, 2, 2, 2)), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi32(0x03030303));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)), _mm_set1_epi8(32));
}

/* int16 vector of 16 copies of byte j of v (0..15), for a sub-block scale */
static const uint8_t kx_bcast_shuf[8][32] = {
#define KX_B2(j) {2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, \
                  2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80, 2 * j, 0x80}
    KX_B2(0), KX_B2(1), KX_B2(2), KX_B2(3), KX_B2(4), KX_B2(5), KX_B2(6), KX_B2(7)
#undef KX_B2
};

/* integer accumulator of column c for step k: with VNNI, odd steps go to a second chain */
#define KX_ISUM(k) (*(KX_VNNI && ((k) & 1) ? &isum2[c] : &isum[c]))

#define KX_Y(T, c) ((const T *)((const uint8_t *)vy + (size_t)(c) * by))

/* ---- 32-value blocks with a signed weight vector (Q8_0, Q4_0, Q5_0) x Q8_0 ----
 * Per block and column: 8 int32 partial sums, converted and scaled by dw*dy into one of two float
 * accumulators (even / odd blocks). */
KX_INLINE void kx_blk_signed(__m256i q, __m256 dw, const kb_q8_0 *const *y, int ib, __m256 *acc, int nc) {
    const __m256i aq = _mm256_abs_epi8(q);
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256i sy = _mm256_sign_epi8(kx_load(y[c][ib].qs), q);
        const __m256i p = kx_dot(_mm256_setzero_si256(), aq, sy);
        const __m256 d = _mm256_mul_ps(dw, kx_h2f8(&y[c][ib].d));
        acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[c]);
    }
}

KX_INLINE __m256i kx_w_q8_0(const void *w, int ib) { return kx_load(((const kb_q8_0 *)w)[ib].qs); }
KX_INLINE __m256 kx_d_q8_0(const void *w, int ib) { return kx_h2f8(&((const kb_q8_0 *)w)[ib].d); }
KX_INLINE __m256i kx_w_q4_0(const void *w, int ib) {
    return _mm256_sub_epi8(kx_nib32(((const kb_q4_0 *)w)[ib].qs), _mm256_set1_epi8(8));
}
KX_INLINE __m256 kx_d_q4_0(const void *w, int ib) { return kx_h2f8(&((const kb_q4_0 *)w)[ib].d); }
KX_INLINE __m256i kx_w_q5_0(const void *w, int ib) {
    const kb_q5_0 *b = (const kb_q5_0 *)w + ib;
    /* value = (nibble | high bit << 4) - 16: where the high bit is clear, nibble | 0xf0 is nibble-16 */
    return _mm256_or_si256(kx_nib32(b->qs), _mm256_andnot_si256(kx_bits32(b->qh), _mm256_set1_epi8((char)0xf0)));
}
KX_INLINE __m256 kx_d_q5_0(const void *w, int ib) { return kx_h2f8(&((const kb_q5_0 *)w)[ib].d); }

#define KX_SIGNED32(T)                                                                             \
    KX_INLINE void kx_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const int nb = n / 32;                                                                     \
        const kb_q8_0 *y[4];                                                                       \
        __m256 a0[4], a1[4];                                                                       \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = KX_Y(kb_q8_0, c);                                                               \
            a0[c] = a1[c] = _mm256_setzero_ps();                                                   \
        }                                                                                          \
        int ib = 0;                                                                                \
        for (; ib + 1 < nb; ib += 2) {                                                             \
            kx_blk_signed(kx_w_##T(w, ib), kx_d_##T(w, ib), y, ib, a0, nc);                        \
            kx_blk_signed(kx_w_##T(w, ib + 1), kx_d_##T(w, ib + 1), y, ib + 1, a1, nc);            \
        }                                                                                          \
        if (ib < nb) kx_blk_signed(kx_w_##T(w, ib), kx_d_##T(w, ib), y, ib, a0, nc);               \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(_mm256_add_ps(a0[c], a1[c]));      \
    }
KX_SIGNED32(q8_0)
KX_SIGNED32(q4_0)
KX_SIGNED32(q5_0)

/* ---- 32-value blocks with unsigned weights and a min (Q4_1, Q5_1) x Q8_1 ----
 * sum = dw*dy*sum(q*y) + m*s, where s = dy*sum(y) is stored in the Q8_1 block. */
KX_INLINE void kx_blk_min(__m256i q, __m256 dw, float mw, const kb_q8_1 *const *y, int ib, __m256 *acc, float *sm,
                          int nc) {
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256i p = kx_dot(_mm256_setzero_si256(), q, kx_load(y[c][ib].qs));
        const __m256 d = _mm256_mul_ps(dw, kx_h2f8(&y[c][ib].d));
        acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[c]);
        sm[c] += mw * kx_h2f(y[c][ib].s);
    }
}
KX_INLINE __m256i kx_w_q4_1(const void *w, int ib) { return kx_nib32(((const kb_q4_1 *)w)[ib].qs); }
KX_INLINE __m256 kx_d_q4_1(const void *w, int ib) { return kx_h2f8(&((const kb_q4_1 *)w)[ib].d); }
KX_INLINE float kx_m_q4_1(const void *w, int ib) { return kx_h2f(((const kb_q4_1 *)w)[ib].m); }
KX_INLINE __m256i kx_w_q5_1(const void *w, int ib) {
    const kb_q5_1 *b = (const kb_q5_1 *)w + ib;
    return _mm256_or_si256(kx_nib32(b->qs), _mm256_and_si256(kx_bits32(b->qh), _mm256_set1_epi8(0x10)));
}
KX_INLINE __m256 kx_d_q5_1(const void *w, int ib) { return kx_h2f8(&((const kb_q5_1 *)w)[ib].d); }
KX_INLINE float kx_m_q5_1(const void *w, int ib) { return kx_h2f(((const kb_q5_1 *)w)[ib].m); }

#define KX_MIN32(T)                                                                                \
    KX_INLINE void kx_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const int nb = n / 32;                                                                     \
        const kb_q8_1 *y[4];                                                                       \
        __m256 a0[4], a1[4];                                                                       \
        float sm[4];                                                                               \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = KX_Y(kb_q8_1, c);                                                               \
            a0[c] = a1[c] = _mm256_setzero_ps();                                                   \
            sm[c] = 0.0f;                                                                          \
        }                                                                                          \
        int ib = 0;                                                                                \
        for (; ib + 1 < nb; ib += 2) {                                                             \
            kx_blk_min(kx_w_##T(w, ib), kx_d_##T(w, ib), kx_m_##T(w, ib), y, ib, a0, sm, nc);      \
            kx_blk_min(kx_w_##T(w, ib + 1), kx_d_##T(w, ib + 1), kx_m_##T(w, ib + 1), y, ib + 1, a1, sm, nc); \
        }                                                                                          \
        if (ib < nb) kx_blk_min(kx_w_##T(w, ib), kx_d_##T(w, ib), kx_m_##T(w, ib), y, ib, a0, sm, nc); \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(_mm256_add_ps(a0[c], a1[c])) + sm[c]; \
    }
KX_MIN32(q4_1)
KX_MIN32(q5_1)

/* ---- K-quants x Q8_K (256-value super-blocks) ----
 * Per super-block and column: an exact int32 vector of scale-weighted sums, then one or two fma
 * into a float accumulator. */

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale sc and min m:
 * sum = d*dy*sum_j sc_j*(q_j . y_j) - dmin*dy*sum_j m_j*(bsum_2j + bsum_2j+1) */
KX_INLINE void kx_q45k(int n, float *s, const void *w, const void *vy, size_t by, const int nc, const int five) {
    const int nb = n / 256;
    const kb_q8_k *y[4];
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_k, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int i = 0; i < nb; i++) {
        const uint8_t *qs, *sc12;
        float d, dmin;
        __m256i hb = _mm256_setzero_si256();
        if (five) {
            const kb_q5_k *b = (const kb_q5_k *)w + i;
            qs = b->qs; sc12 = b->scales; d = kx_h2f(b->d); dmin = kx_h2f(b->dmin);
            hb = kx_load(b->qh);
        } else {
            const kb_q4_k *b = (const kb_q4_k *)w + i;
            qs = b->qs; sc12 = b->scales; d = kx_h2f(b->d); dmin = kx_h2f(b->dmin);
        }
        const __m128i sm = kx_scales_k4(sc12);
        /* scales as bytes 0,2,..14 of both 128-bit lanes (for the byte shuffles below) */
        const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        /* mins duplicated per pair of 16-value bsums: [m0 m0 m1 m1 ... m7 m7] as int16 */
        const __m128i m8 = _mm_srli_si128(sm, 8);
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        __m256i isum[4], isum2[4]; /* two chains: vpdpwssd accumulates serially (latency-bound) */
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = isum2[c] = _mm256_setzero_si256();
        KX_UNROLL for (int k = 0; k < 4; k++) {
            const __m256i q = kx_load(qs + 32 * k);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, kx_bit_to(hb, 2 * k, 4));
                hi = _mm256_or_si256(hi, kx_bit_to(hb, 2 * k + 1, 4));
            }
            const __m256i slo = _mm256_shuffle_epi8(sc2, kx_load(kx_bcast_shuf[2 * k]));
            const __m256i shi = _mm256_shuffle_epi8(sc2, kx_load(kx_bcast_shuf[2 * k + 1]));
            KX_UNROLL for (int c = 0; c < nc; c++) {
                const int8_t *yq = y[c][i].qs + 64 * k;
                isum[c] = kx_madd(isum[c], _mm256_maddubs_epi16(lo, kx_load(yq)), slo);
                KX_ISUM(k * 2 + 1) = kx_madd(KX_ISUM(k * 2 + 1), _mm256_maddubs_epi16(hi, kx_load(yq + 32)), shi);
            }
        }
        KX_UNROLL for (int c = 0; c < nc; c++) {
            if (KX_VNNI) isum[c] = _mm256_add_epi32(isum[c], isum2[c]);
            const float dy = y[c][i].d;
            const __m256i ms = _mm256_madd_epi16(kx_load(y[c][i].bsums), mins16);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dy), _mm256_cvtepi32_ps(ms), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(acc[c]);
}
KX_INLINE void kx_q4_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    kx_q45k(n, s, w, vy, by, nc, 0);
}
KX_INLINE void kx_q5_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    kx_q45k(n, s, w, vy, by, nc, 1);
}

/* Q6_K: 16 sub-blocks of 16 with signed 8-bit scales, q in 0..63 stands for q-32:
 * sum = d*dy*(sum_s sc_s*(q_s . y_s) - 32*sum_s sc_s*bsum_s) */
KX_INLINE void kx_q6_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const int nb = n / 256;
    const kb_q8_k *y[4];
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_k, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int i = 0; i < nb; i++) {
        const kb_q6_k *b = (const kb_q6_k *)w + i;
        const float d = kx_h2f(b->d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)b->scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const kx_pairs sp = kx_pair_prep(sc8);
        __m256i isum[4], isum2[4]; /* two chains: vpdpwssd accumulates serially (latency-bound) */
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = isum2[c] = _mm256_setzero_si256();
        KX_UNROLL for (int j = 0; j < 2; j++) {
            const __m256i l0 = kx_load(b->ql + 64 * j), l1 = kx_load(b->ql + 64 * j + 32);
            const __m256i h = kx_load(b->qh + 32 * j);
            __m256i a[4];
            a[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            a[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            a[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
            a[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
            KX_UNROLL for (int m = 0; m < 4; m++) {
                const __m256i scv = kx_pair_scales(sp, 4 * j + m);
                KX_UNROLL for (int c = 0; c < nc; c++)
                    KX_ISUM(m) = kx_madd(KX_ISUM(m), _mm256_maddubs_epi16(a[m], kx_load(y[c][i].qs + 128 * j + 32 * m)), scv);
            }
        }
        KX_UNROLL for (int c = 0; c < nc; c++) {
            if (KX_VNNI) isum[c] = _mm256_add_epi32(isum[c], isum2[c]);
            const __m256i bias = _mm256_madd_epi16(kx_load(y[c][i].bsums), sc16);
            const __m256i t = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(bias, 5));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[c][i].d), _mm256_cvtepi32_ps(t), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(acc[c]);
}

/* Q2_K: 16 sub-blocks of 16, 4-bit scale (low nibble) and 4-bit min (high nibble), q in 0..3:
 * sum = d*dy*sum_s sc_s*(q_s . y_s) - dmin*dy*sum_s m_s*bsum_s */
KX_INLINE void kx_q2_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const int nb = n / 256;
    const kb_q8_k *y[4];
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_k, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int i = 0; i < nb; i++) {
        const kb_q2_k *b = (const kb_q2_k *)w + i;
        const float d = kx_h2f(b->d), dmin = kx_h2f(b->dmin);
        const __m128i raw = _mm_loadu_si128((const __m128i *)b->scales);
        const kx_pairs sp = kx_pair_prep(_mm_and_si128(raw, _mm_set1_epi8(0x0f)));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f)));
        __m256i isum[4], isum2[4]; /* two chains: vpdpwssd accumulates serially (latency-bound) */
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = isum2[c] = _mm256_setzero_si256();
        KX_UNROLL for (int k = 0; k < 2; k++) {
            const __m256i q = kx_load(b->qs + 32 * k);
            KX_UNROLL for (int j = 0; j < 4; j++) {
                const __m256i a = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i scv = kx_pair_scales(sp, 4 * k + j);
                KX_UNROLL for (int c = 0; c < nc; c++)
                    KX_ISUM(j) = kx_madd(KX_ISUM(j), _mm256_maddubs_epi16(a, kx_load(y[c][i].qs + 128 * k + 32 * j)), scv);
            }
        }
        KX_UNROLL for (int c = 0; c < nc; c++) {
            if (KX_VNNI) isum[c] = _mm256_add_epi32(isum[c], isum2[c]);
            const float dy = y[c][i].d;
            const __m256i ms = _mm256_madd_epi16(kx_load(y[c][i].bsums), mins16);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dy), _mm256_cvtepi32_ps(ms), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(acc[c]);
}

/* Q3_K: 16 sub-blocks of 16 with 6-bit scales (minus 32); value = low 2 bits - 4 unless the hmask
 * bit is set. With u = low | hbit << 2 in 0..7 the value is u - 4:
 * sum = d*dy*(sum_s sc_s*(u_s . y_s) - 4*sum_s sc_s*bsum_s) */
KX_INLINE void kx_q3_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const int nb = n / 256;
    const kb_q8_k *y[4];
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_k, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int i = 0; i < nb; i++) {
        const kb_q3_k *b = (const kb_q3_k *)w + i;
        const float d = kx_h2f(b->d);
        const __m128i sc8 = kx_scales_q3k(b->scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const kx_pairs sp = kx_pair_prep(sc8);
        const __m256i hm = kx_load(b->hmask);
        __m256i isum[4], isum2[4]; /* two chains: vpdpwssd accumulates serially (latency-bound) */
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = isum2[c] = _mm256_setzero_si256();
        KX_UNROLL for (int k = 0; k < 2; k++) {
            const __m256i q = kx_load(b->qs + 32 * k);
            KX_UNROLL for (int j = 0; j < 4; j++) {
                const __m256i a = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3),
                                                  kx_bit_to(hm, 4 * k + j, 2));
                const __m256i scv = kx_pair_scales(sp, 4 * k + j);
                KX_UNROLL for (int c = 0; c < nc; c++)
                    KX_ISUM(j) = kx_madd(KX_ISUM(j), _mm256_maddubs_epi16(a, kx_load(y[c][i].qs + 128 * k + 32 * j)), scv);
            }
        }
        KX_UNROLL for (int c = 0; c < nc; c++) {
            if (KX_VNNI) isum[c] = _mm256_add_epi32(isum[c], isum2[c]);
            const __m256i bias = _mm256_madd_epi16(kx_load(y[c][i].bsums), sc16);
            const __m256i t = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(bias, 2));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[c][i].d), _mm256_cvtepi32_ps(t), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(acc[c]);
}

/* NVFP4 x Q8_0: 64 E2M1 values (kvalues_mxfp4, doubled) in 4 sub-blocks of 16 with UE4M3 scales
 * (halved, as the reference); sub-block s = qs[8s..8s+7], low nibbles its values 0..7, high 8..15.
 * Its 64 values pair with two Q8_0 blocks. Per sub-block (4 int32 lanes): d_s*dy*(w . y). */

/* eight UE4M3 scale bytes (4 of block i, 4 of block i+1; the second pointer may equal the first)
 * -> halved floats: e>0: 2^(e-8) * (1 + m/8) (float bits (x & 0x7f) << 20 plus exponent 119),
 * e=0: m * 2^-10; the byte 0x7f (NaN) -> 0 */
KX_INLINE __m256 kx_ue4m3_half8(const uint8_t *d0, const uint8_t *d1) {
    uint32_t u0, u1;
    memcpy(&u0, d0, 4);
    memcpy(&u1, d1, 4);
    const __m256i x = _mm256_cvtepu8_epi32(_mm_insert_epi32(_mm_cvtsi32_si128((int)u0), (int)u1, 1));
    const __m256i v = _mm256_and_si256(x, _mm256_set1_epi32(0x7f));
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(v, 20), _mm256_set1_epi32(119 << 23)));
    const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(7))), _mm256_set1_ps(1.0f / 1024.0f));
    const __m256i e0 = _mm256_cmpeq_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x78)), _mm256_setzero_si256());
    const __m256 r = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(e0));
    return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, _mm256_set1_epi32(0x7f))), r);
}

/* weights of one NVFP4 block in value order: w0 = values 0..31, w1 = values 32..63 */
KX_INLINE void kx_nvfp4_w(const mr_block_nvfp4 *b, __m256i kv, __m256i *w0, __m256i *w1) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i q = kx_load(b->qs);
    const __m256i lo = _mm256_shuffle_epi8(kv, _mm256_and_si256(q, m4));
    const __m256i hi = _mm256_shuffle_epi8(kv, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    /* A = [v0..15 | v32..47], B = [v16..31 | v48..63] */
    const __m256i A = _mm256_unpacklo_epi64(lo, hi), B = _mm256_unpackhi_epi64(lo, hi);
    *w0 = _mm256_permute2x128_si256(A, B, 0x20);
    *w1 = _mm256_permute2x128_si256(A, B, 0x31);
}

/* per-lane scales of block h (0/1) of a pair: [d0 x4 | d1 x4] and [d2 x4 | d3 x4] */
KX_INLINE __m256 kx_nvfp4_dlane(__m256 d8, int h, int half) {
    const int a = 4 * h + 2 * half;
    return _mm256_permutevar8x32_ps(d8, _mm256_setr_epi32(a, a, a, a, a + 1, a + 1, a + 1, a + 1));
}

KX_INLINE void kx_nvfp4_blk(const mr_block_nvfp4 *b, __m256 d8, int h, __m256i kv, const kb_q8_0 *const *y, int i,
                             __m256 *acc, int nc) {
    __m256i w0, w1;
    kx_nvfp4_w(b, kv, &w0, &w1);
    const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
    const __m256 d01 = kx_nvfp4_dlane(d8, h, 0), d23 = kx_nvfp4_dlane(d8, h, 1);
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const kb_q8_0 *y0 = &y[c][2 * i], *y1 = &y[c][2 * i + 1];
        const __m256i p0 = kx_dot(_mm256_setzero_si256(), a0, _mm256_sign_epi8(kx_load(y0->qs), w0));
        const __m256i p1 = kx_dot(_mm256_setzero_si256(), a1, _mm256_sign_epi8(kx_load(y1->qs), w1));
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d01, kx_h2f8(&y0->d)), _mm256_cvtepi32_ps(p0), acc[c]);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d23, kx_h2f8(&y1->d)), _mm256_cvtepi32_ps(p1), acc[c]);
    }
}

KX_INLINE void kx_nvfp4(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const int nb = n / 64;
    const mr_block_nvfp4 *x = w;
    const kb_q8_0 *y[4];
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_0, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mr_kvalues_mxfp4));
    int i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256 d8 = kx_ue4m3_half8(x[i].d, x[i + 1].d);
        kx_nvfp4_blk(&x[i], d8, 0, kv, y, i, acc, nc);
        kx_nvfp4_blk(&x[i + 1], d8, 1, kv, y, i + 1, acc, nc);
    }
    if (i < nb) kx_nvfp4_blk(&x[i], kx_ue4m3_half8(x[i].d, x[i].d), 0, kv, y, i, acc, nc);
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(acc[c]);
}

#if KX_VNNI
/* ---- GEMM with prepared activations (VNNI): Q8_0 rows converted once per matmul to blocks of a
 * float scale and the quants + 128 as unsigned bytes. Per block and column one vpdpbusd, started
 * from -128 * sum(w) (the same for every column), gives sum(y * w) exactly; the float operations
 * (d = dw * dy, cvt, fma into the even/odd accumulators) are vec_dot's, so results are bit-equal. */
typedef struct { float d; uint8_t qs[32]; } kb_q8p;
_Static_assert(sizeof(kb_q8p) == 36, "prepared q8_0 block");

static void mr_prep_q8_0_vnni(const void *src, void *dst, int n) {
    const kb_q8_0 *x = src;
    kb_q8p *y = dst;
    for (int i = 0; i < n / 32; i++) {
        y[i].d = kx_h2f(x[i].d);
        _mm256_storeu_si256((__m256i *)y[i].qs, _mm256_xor_si256(kx_load(x[i].qs), _mm256_set1_epi8((char)0x80)));
    }
}

/* -128 * (sum of each 4 signed weight bytes) */
KX_INLINE __m256i kx_negc(__m256i q) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), q));
}

KX_INLINE void kx_blk_prep(__m256i q, __m256 dw, const kb_q8p *const *y, int ib, __m256 *acc, int nc) {
    const __m256i negc = kx_negc(q);
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256i p = _mm256_dpbusd_epi32(negc, kx_load(y[c][ib].qs), q);
        const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(y[c][ib].d));
        acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[c]);
    }
}

#define KX_SIGNED32P(T)                                                                            \
    KX_INLINE void kxp_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const int nb = n / 32;                                                                     \
        const kb_q8p *y[4];                                                                        \
        __m256 a0[4], a1[4];                                                                       \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = KX_Y(kb_q8p, c);                                                                \
            a0[c] = a1[c] = _mm256_setzero_ps();                                                   \
        }                                                                                          \
        int ib = 0;                                                                                \
        for (; ib + 1 < nb; ib += 2) {                                                             \
            kx_blk_prep(kx_w_##T(w, ib), kx_d_##T(w, ib), y, ib, a0, nc);                          \
            kx_blk_prep(kx_w_##T(w, ib + 1), kx_d_##T(w, ib + 1), y, ib + 1, a1, nc);              \
        }                                                                                          \
        if (ib < nb) kx_blk_prep(kx_w_##T(w, ib), kx_d_##T(w, ib), y, ib, a0, nc);                 \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(_mm256_add_ps(a0[c], a1[c]));      \
    }
KX_SIGNED32P(q8_0)
KX_SIGNED32P(q4_0)
KX_SIGNED32P(q5_0)

KX_INLINE void kxp_nvfp4_blk(const mr_block_nvfp4 *b, __m256 d8, int h, __m256i kv, const kb_q8p *const *y, int i,
                              __m256 *acc, int nc) {
    __m256i w0, w1;
    kx_nvfp4_w(b, kv, &w0, &w1);
    const __m256i n0 = kx_negc(w0), n1 = kx_negc(w1);
    const __m256 d01 = kx_nvfp4_dlane(d8, h, 0), d23 = kx_nvfp4_dlane(d8, h, 1);
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const kb_q8p *y0 = &y[c][2 * i], *y1 = &y[c][2 * i + 1];
        const __m256i p0 = _mm256_dpbusd_epi32(n0, kx_load(y0->qs), w0);
        const __m256i p1 = _mm256_dpbusd_epi32(n1, kx_load(y1->qs), w1);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d01, _mm256_set1_ps(y0->d)), _mm256_cvtepi32_ps(p0), acc[c]);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d23, _mm256_set1_ps(y1->d)), _mm256_cvtepi32_ps(p1), acc[c]);
    }
}

KX_INLINE void kxp_nvfp4(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const int nb = n / 64;
    const mr_block_nvfp4 *x = w;
    const kb_q8p *y[4];
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8p, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mr_kvalues_mxfp4));
    int i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256 d8 = kx_ue4m3_half8(x[i].d, x[i + 1].d);
        kxp_nvfp4_blk(&x[i], d8, 0, kv, y, i, acc, nc);
        kxp_nvfp4_blk(&x[i + 1], d8, 1, kv, y, i + 1, acc, nc);
    }
    if (i < nb) kxp_nvfp4_blk(&x[i], kx_ue4m3_half8(x[i].d, x[i].d), 0, kv, y, i, acc, nc);
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(acc[c]);
}

/* Q8_1 prepared for Q4_1 / Q5_1 (unsigned weights: the quants stay signed): float d and s */
typedef struct { float d, s; int8_t qs[32]; } kb_q8p1;
_Static_assert(sizeof(kb_q8p1) == 40, "prepared q8_1 block");

static void mr_prep_q8_1_vnni(const void *src, void *dst, int n) {
    const kb_q8_1 *x = src;
    kb_q8p1 *y = dst;
    for (int i = 0; i < n / 32; i++) {
        y[i].d = kx_h2f(x[i].d);
        y[i].s = kx_h2f(x[i].s);
        memcpy(y[i].qs, x[i].qs, 32);
    }
}

KX_INLINE void kx_blk_min_prep(__m256i q, __m256 dw, float mw, const kb_q8p1 *const *y, int ib, __m256 *acc, float *sm,
                               int nc) {
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, kx_load(y[c][ib].qs));
        const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(y[c][ib].d));
        acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[c]);
        sm[c] += mw * y[c][ib].s;
    }
}

#define KX_MIN32P(T)                                                                               \
    KX_INLINE void kxp_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const int nb = n / 32;                                                                     \
        const kb_q8p1 *y[4];                                                                       \
        __m256 a0[4], a1[4];                                                                       \
        float sm[4];                                                                               \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = KX_Y(kb_q8p1, c);                                                               \
            a0[c] = a1[c] = _mm256_setzero_ps();                                                   \
            sm[c] = 0.0f;                                                                          \
        }                                                                                          \
        int ib = 0;                                                                                \
        for (; ib + 1 < nb; ib += 2) {                                                             \
            kx_blk_min_prep(kx_w_##T(w, ib), kx_d_##T(w, ib), kx_m_##T(w, ib), y, ib, a0, sm, nc); \
            kx_blk_min_prep(kx_w_##T(w, ib + 1), kx_d_##T(w, ib + 1), kx_m_##T(w, ib + 1), y, ib + 1, a1, sm, nc); \
        }                                                                                          \
        if (ib < nb) kx_blk_min_prep(kx_w_##T(w, ib), kx_d_##T(w, ib), kx_m_##T(w, ib), y, ib, a0, sm, nc); \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(_mm256_add_ps(a0[c], a1[c])) + sm[c]; \
    }
KX_MIN32P(q4_1)
KX_MIN32P(q5_1)

#define KX_ENTRY_P(T, S)                                                                           \
    static void mr_vd4p_##T##S(int n, float *s, const void *w, const void *y, size_t by) {         \
        kxp_##T(n, s, w, y, by, 4);                                                                \
    }
#endif /* KX_VNNI */

/* ---- float weights: 16 values per step into two accumulators per column; the tail (n % 16)
 * is zero-padded to a full step so every column runs the same float operations ---- */

KX_INLINE __m256 kf_ld_f32(const void *p, int i) { return _mm256_loadu_ps((const float *)p + i); }
KX_INLINE __m256 kf_ld_f16(const void *p, int i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
KX_INLINE __m256 kf_ld_bf16(const void *p, int i) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* kx_T(...) for float weight type T with ES-byte elements */
#define KF_KERNEL(T, ES)                                                                           \
    KX_INLINE void kx_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const uint8_t *y[4];                                                                       \
        __m256 a0[4], a1[4];                                                                       \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = (const uint8_t *)vy + (size_t)c * by;                                           \
            a0[c] = a1[c] = _mm256_setzero_ps();                                                   \
        }                                                                                          \
        int i = 0;                                                                                 \
        for (; i + 16 <= n; i += 16) {                                                             \
            const __m256 w0 = kf_ld_##T(w, i), w1 = kf_ld_##T(w, i + 8);                           \
            KX_UNROLL for (int c = 0; c < nc; c++) {                                               \
                a0[c] = _mm256_fmadd_ps(w0, kf_ld_##T(y[c], i), a0[c]);                            \
                a1[c] = _mm256_fmadd_ps(w1, kf_ld_##T(y[c], i + 8), a1[c]);                        \
            }                                                                                      \
        }                                                                                          \
        if (i < n) {                                                                               \
            _Alignas(32) uint8_t tw[16 * ES] = {0}, ty[16 * ES];                                   \
            memcpy(tw, (const uint8_t *)w + (size_t)i * ES, (size_t)(n - i) * ES);                 \
            const __m256 w0 = kf_ld_##T(tw, 0), w1 = kf_ld_##T(tw, 8);                             \
            KX_UNROLL for (int c = 0; c < nc; c++) {                                               \
                memset(ty, 0, sizeof ty);                                                          \
                memcpy(ty, y[c] + (size_t)i * ES, (size_t)(n - i) * ES);                           \
                a0[c] = _mm256_fmadd_ps(w0, kf_ld_##T(ty, 0), a0[c]);                              \
                a1[c] = _mm256_fmadd_ps(w1, kf_ld_##T(ty, 8), a1[c]);                              \
            }                                                                                      \
        }                                                                                          \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(_mm256_add_ps(a0[c], a1[c]));      \
    }
/* vec_dot (1 column) and 4-column entry points for type T, suffix S (_avx2 / _avx512) */
#define KX_ENTRY(T, S)                                                                             \
    static void mr_vd_##T##S(int n, float *s, const void *w, const void *y) { kx_##T(n, s, w, y, 0, 1); } \
    static void mr_vd4_##T##S(int n, float *s, const void *w, const void *y, size_t by) {          \
        kx_##T(n, s, w, y, by, 4);                                                                 \
    }

#endif
