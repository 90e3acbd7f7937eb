/* AVX-512 (BW + VNNI) dot products of the i-quant weights with Q8_K activations (IQ4_NL, MXFP4:
 * q4_0_avx512.c; IQ4_XS: iq4_xs_avx512.c).
 *
 * Common scheme, 64 values (one zmm) at a time:
 *   - decode the weights to unsigned bytes (grid magnitudes, |level|), the sign of each weight
 *     goes into a 64-bit mask that negates the matching activation byte (masked subtract);
 *   - vpmaddubsw gives 32 int16 pair sums (no saturation: |w| <= 127 and |q8| <= 127 give at most
 *     32258), vpdpwssd multiplies them by the per-group integer scale and accumulates in int32;
 *     where the scale is a float (Q8_0 partners) vpdpbusd sums straight to int32 instead;
 *   - one float fma per super-block (or per pair of 32-blocks) applies the float scales.
 * Integer sums are exact, so results differ from the scalar reference only by float summation
 * order. Grid lookups (IQ2_*, IQ1_*) are scalar loads: on Zen 4 they beat vpgather; IQ3_S and
 * IQ3_XXS keep their grids in registers.
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
static inline uint16_t ld16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

#define KI static inline __attribute__((always_inline))
#define UNROLL4 _Pragma("GCC unroll 4")
/* activation column c of nc, by bytes apart */
#define ACT(T, vy, by, c) ((const T *)((const uint8_t *)(vy) + (size_t)(c) * (by)))
#define ENTRIES(T)                                                                                 \
    void mr_vec_dot_##T##_avx512(int n, float *s, const void *w, const void *y) { k_##T(n, s, w, y, 0, 1); } \
    void mr_vec_dot_x4_##T##_avx512(int n, float *s, const void *w, const void *y, size_t by) {     \
        k_##T(n, s, w, y, by, 4);                                                                  \
    }

/* Kernels that need AVX512_VBMI (vpermt2b) are compiled for it function by function and chosen at
 * run time: the ISA level "avx512" does not require it (Skylake-X / Cascade Lake lack it). */
int mr_avx512_no_vbmi;
static inline int use_vbmi(void) { return !mr_avx512_no_vbmi && __builtin_cpu_supports("avx512vbmi"); }
#define KV static inline __attribute__((always_inline, target("avx512vbmi")))
#define ENTRIES_VBMI(T)                                                                            \
    __attribute__((target("avx512vbmi"))) static void T##_vbmi1(int n, float *s, const void *w, const void *y) { \
        k_##T##_vbmi(n, s, w, y, 0, 1);                                                            \
    }                                                                                              \
    __attribute__((target("avx512vbmi"))) static void T##_vbmi4(int n, float *s, const void *w, const void *y, size_t by) { \
        k_##T##_vbmi(n, s, w, y, by, 4);                                                           \
    }                                                                                              \
    void mr_vec_dot_##T##_avx512(int n, float *s, const void *w, const void *y) {                 \
        if (use_vbmi()) T##_vbmi1(n, s, w, y);                                                     \
        else k_##T(n, s, w, y, 0, 1);                                                              \
    }                                                                                              \
    void mr_vec_dot_x4_##T##_avx512(int n, float *s, const void *w, const void *y, size_t by) {     \
        if (use_vbmi()) T##_vbmi4(n, s, w, y, by);                                                 \
        else k_##T(n, s, w, y, by, 4);                                                             \
    }

static inline float hsum8_ps(__m256 v) {
    const __m128 c4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c2 = _mm_add_ps(c4, _mm_movehl_ps(c4, c4));
    return _mm_cvtss_f32(_mm_add_ss(c2, _mm_movehdup_ps(c2)));
}

/* zmm whose int16 lanes 0..15 are a and 16..31 are b (scales of two 32-value groups) */
static inline __m512i scale2_epi16(int a, int b) {
    return _mm512_mask_set1_epi16(_mm512_set1_epi16((short)a), 0xffff0000u, (short)b);
}

/* Sign bytes of a whole IQ2_XXS / IQ3_XXS super-block at once. t: the 8 sign words of its 32-value
 * groups in the low dwords of 8 qwords (4 x 7 sign bits | scale << 28). Returns 32 sign bytes
 * (dword k = group k) with the parity bit added (ggml's ksigns_iq2xs: 7 stored bits, the 8th
 * makes the parity even). */
static inline __m256i even_signs_block(__m512i t) {
    __m512i v = _mm512_and_si512(t, _mm512_set1_epi64(0x7f));       /* 7-bit field l -> byte l */
    v = _mm512_ternarylogic_epi64(v, _mm512_slli_epi64(t, 1), _mm512_set1_epi64(0x7f00), 0xf8);
    v = _mm512_ternarylogic_epi64(v, _mm512_slli_epi64(t, 2), _mm512_set1_epi64(0x7f0000), 0xf8);
    v = _mm512_ternarylogic_epi64(v, _mm512_slli_epi64(t, 3), _mm512_set1_epi64(0x7f000000), 0xf8);
    __m512i p = _mm512_xor_si512(v, _mm512_srli_epi64(v, 4));     /* parity in bit 0 of each byte */
    p = _mm512_xor_si512(p, _mm512_srli_epi64(p, 2));
    p = _mm512_xor_si512(p, _mm512_srli_epi64(p, 1));
    v = _mm512_ternarylogic_epi64(v, _mm512_slli_epi64(p, 7), _mm512_set1_epi64(0x80808080), 0xf8);
    return _mm512_cvtepi64_epi32(v);
}

/* ------------------------------------------------------ super-block kernels: decode once, dot many
 * IQ2_XXS and IQ3_S decode a super-block into sb_dec (registers): per 64-value chunk g the value
 * magnitudes, the sign mask (negates activation bytes) and the dpwssd scale words. sb_dot then
 * gives one activation column's int32 lanes; every kernel of a type (vec_dot, 4 columns, GEMM
 * block, with or without VBMI) runs exactly these integer operations and the same float ones, so
 * they agree bit for bit. */
typedef struct { __m512i grid[4], sc[4]; __mmask64 neg[4]; float d; } sb_dec;

KI __m512i sb_dot(const sb_dec *o, const int8_t *q) {
    __m512i sumi = _mm512_setzero_si512();
    UNROLL4 for (int g = 0; g < 4; g++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * g);
        const __m512i qs = _mm512_mask_sub_epi8(v, o->neg[g], _mm512_setzero_si512(), v);
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(o->grid[g], qs), o->sc[g]);
    }
    return sumi;
}

/* vec_dot (nc = 1) and 4-column kernels over a decoder: TAB its constant registers, DEC(x, &t, &o) */
#define SB_DOT_KERNEL(ATTR, NAME, BLK, TAB, INIT, DEC, FINAL)                                      \
    ATTR void NAME(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {      \
        const BLK *x = w;                                                                          \
        TAB t;                                                                                     \
        INIT(&t);                                                                                  \
        __m512 acc[4];                                                                             \
        UNROLL4 for (int c = 0; c < nc; c++) acc[c] = _mm512_setzero_ps();                         \
        for (int i = 0; i < n / MR_QK_K; i++) {                                                    \
            sb_dec o;                                                                              \
            DEC(x + i, &t, &o);                                                                    \
            UNROLL4 for (int c = 0; c < nc; c++) {                                                 \
                const mr_block_q8_k *a = ACT(mr_block_q8_k, vy, by, c) + i;                        \
                acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(o.d * a->d), _mm512_cvtepi32_ps(sb_dot(&o, a->qs)), acc[c]); \
            }                                                                                      \
        }                                                                                          \
        UNROLL4 for (int c = 0; c < nc; c++) s[c] = FINAL * _mm512_reduce_add_ps(acc[c]);         \
    }

/* GEMM block (mr_gemm_fn): nr <= MR_GEMM_NR rows x nc <= MR_GEMM_NC columns, 4 rows at a time;
 * super-block i of each row is decoded once and used for all nc columns (whose blocks i, 9 KB for
 * 32 columns, stay in L1 across the 4 rows); the float accumulators live in a stack array. */
#define SB_GEMM_KERNEL(ATTR, NAME, BLK, TAB, INIT, DEC, FINAL)                                     \
    ATTR void NAME(int n, const void *w, size_t w_row, int nr, const void *vy, size_t by, int nc,  \
                   float *s, size_t s_col) {                                                       \
        TAB t;                                                                                     \
        INIT(&t);                                                                                  \
        __m512 acc[4 * MR_GEMM_NC];                                                                \
        for (int r0 = 0; r0 < nr; r0 += 4) {                                                       \
            const int nr4 = nr - r0 < 4 ? nr - r0 : 4;                                             \
            const uint8_t *w0 = (const uint8_t *)w + (size_t)r0 * w_row;                          \
            for (int k = 0; k < nr4 * nc; k++) acc[k] = _mm512_setzero_ps();                       \
            for (int i = 0; i < n / MR_QK_K; i++)                                                  \
                for (int r = 0; r < nr4; r++) {                                                    \
                    sb_dec o;                                                                      \
                    DEC((const BLK *)(w0 + (size_t)r * w_row) + i, &t, &o);                        \
                    for (int c = 0; c < nc; c++) {                                                 \
                        const mr_block_q8_k *a = ACT(mr_block_q8_k, vy, by, c) + i;                \
                        acc[r * nc + c] = _mm512_fmadd_ps(_mm512_set1_ps(o.d * a->d),              \
                                                          _mm512_cvtepi32_ps(sb_dot(&o, a->qs)), acc[r * nc + c]); \
                    }                                                                              \
                }                                                                                  \
            for (int r = 0; r < nr4; r++)                                                          \
                for (int c = 0; c < nc; c++)                                                       \
                    s[(size_t)c * s_col + r0 + r] = FINAL * _mm512_reduce_add_ps(acc[r * nc + c]); \
        }                                                                                          \
    }

/* entry points of a type with a plain and a VBMI decoder */
#define SB_ENTRIES(T, BLK, FINAL)                                                                  \
    SB_DOT_KERNEL(KI, k_##T, BLK, tab_##T, init_##T, dec_##T, FINAL)                               \
    SB_DOT_KERNEL(KV, k_##T##_vbmi, BLK, tab_##T##_vbmi, init_##T##_vbmi, dec_##T##_vbmi, FINAL)   \
    SB_GEMM_KERNEL(static, gemm_##T, BLK, tab_##T, init_##T, dec_##T, FINAL)                       \
    SB_GEMM_KERNEL(__attribute__((target("avx512vbmi"))) static, gemm_##T##_vbmi, BLK, tab_##T##_vbmi, init_##T##_vbmi, \
                   dec_##T##_vbmi, FINAL)                                                          \
    ENTRIES_VBMI(T)                                                                                \
    void mr_gemm_##T##_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, \
                              float *s, size_t s_col) {                                     \
        if (use_vbmi()) gemm_##T##_vbmi(n, w, w_row, nr, y, by, nc, s, s_col);                     \
        else gemm_##T(n, w, w_row, nr, y, by, nc, s, s_col);                                       \
    }

/* entry points of a type with one decoder */
#define SB_ENTRIES_PLAIN(T, BLK, FINAL)                                                            \
    SB_DOT_KERNEL(KI, k_##T, BLK, tab_##T, init_##T, dec_##T, FINAL)                               \
    SB_GEMM_KERNEL(, mr_gemm_##T##_avx512, BLK, tab_##T, init_##T, dec_##T, FINAL)           \
    ENTRIES(T)

/* ------------------------------------------------------------------------------------ IQ2_XXS */
/* int16 lanes 0..15 <- word 2 g of ls (group 2 g), 16..31 <- word 2 g + 1 */
typedef struct { __m512i pick0; } tab_iq2_xxs;
KI void init_iq2_xxs(tab_iq2_xxs *t) {
    t->pick0 = _mm512_set_epi64(0x0001000100010001ll, 0x0001000100010001ll, 0x0001000100010001ll,
                                0x0001000100010001ll, 0, 0, 0, 0);
}
KI void dec_iq2_xxs(const mr_block_iq2_xxs *x, const tab_iq2_xxs *t, sb_dec *o) {
    const uint64_t *G = mr_iq2xxs_grid;
    const uint8_t *q2 = (const uint8_t *)x->qs;
    const __m512i z = _mm512_loadu_si512(q2);
    uint64_t sg[4];
    _mm256_storeu_si256((__m256i *)sg, even_signs_block(_mm512_srli_epi64(z, 32)));
    /* scales 2 l + 1 of the 8 groups as int16 */
    const __m512i ls = _mm512_castsi128_si512(_mm512_cvtepi64_epi16(
        _mm512_add_epi64(_mm512_slli_epi64(_mm512_srli_epi64(z, 60), 1), _mm512_set1_epi64(1))));
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const uint8_t *ix = q2 + 16 * g;   /* index bytes 0..3 (group 2g) and 8..11 (2g+1) */
        o->grid[g] = _mm512_set_epi64(
            (long long)G[ix[11]], (long long)G[ix[10]], (long long)G[ix[9]], (long long)G[ix[8]],
            (long long)G[ix[3]], (long long)G[ix[2]], (long long)G[ix[1]], (long long)G[ix[0]]);
        o->sc[g] = _mm512_permutexvar_epi16(pick, ls);
        o->neg[g] = _cvtu64_mask64(sg[g]);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(2));
    }
    o->d = h2f(x->d);
}

/* With AVX512_VBMI, without grid loads (13.5 -> 11.4 ns per 256 on Zen 4). The grid as two bit
 * planes (iq2xxs_grid_planes: value = 8 + 17 b0 + 35 b1), 512 bytes in 8 zmm: the 32 index bytes
 * of a super-block, once per plane (+256), are looked up together (four vpermt2b, three blends)
 * and the result bytes are already the masks of the values: plane p of the 64 values of chunk g is
 * the uint64 at byte 32 p + 8 g. The signs: vpmultishiftqb cuts the 7-bit fields of two groups'
 * sign words into the bytes of one qword and a vpermt2b through ksigns_iq2xs adds the parity bit,
 * giving each chunk's 64-bit sign mask. Masks go through memory (kmov from memory is cheaper
 * than through general registers). */
typedef struct { __m512i T[8], ks0, ks1, gather, aux_sel, fields, pick0; } tab_iq2_xxs_vbmi;
KV void init_iq2_xxs_vbmi(tab_iq2_xxs_vbmi *t) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) t->T[k] = _mm512_loadu_si512(mr_iq2xxs_grid_planes + 64 * k);
    t->ks0 = _mm512_loadu_si512(mr_ksigns_iq2xs);
    t->ks1 = _mm512_loadu_si512(mr_ksigns_iq2xs + 64);
    uint8_t pb[64];
    for (int p = 0; p < 64; p++) pb[p] = (uint8_t)(8 * ((p & 31) >> 2) + (p & 3));   /* entry p % 32's index byte */
    t->gather = _mm512_loadu_si512(pb);
    /* qword g <- the sign words of groups 2 g and 2 g + 1 (dwords 4 g + 1, 4 g + 3) */
    t->aux_sel = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 15, 13, 11, 9, 7, 5, 3, 1);
    t->fields = _mm512_set1_epi64(0x352e2720150e0700ll);    /* bit offsets 0, 7, .., 21, 32, .., 53 */
    /* chunk g's scale words: 0..15 <- group 2 g (word 4 g of ls), 16..31 <- group 2 g + 1 (word 4 g + 2) */
    t->pick0 = _mm512_set_epi64(0x0002000200020002ll, 0x0002000200020002ll, 0x0002000200020002ll,
                                0x0002000200020002ll, 0, 0, 0, 0);
}
KV void dec_iq2_xxs_vbmi(const mr_block_iq2_xxs *x, const tab_iq2_xxs_vbmi *t, sb_dec *o) {
    const __m512i z = _mm512_loadu_si512(x->qs);
    const __m512i idx = _mm512_permutexvar_epi8(t->gather, z);
    const __mmask64 b7 = _mm512_movepi8_mask(idx);
    const __mmask64 upper = 0xffffffff00000000ull;   /* lanes 32..63: plane b1 */
    const __m512i r = _mm512_mask_blend_epi8(upper,
        _mm512_mask_blend_epi8(b7, _mm512_permutex2var_epi8(t->T[0], idx, t->T[1]), _mm512_permutex2var_epi8(t->T[2], idx, t->T[3])),
        _mm512_mask_blend_epi8(b7, _mm512_permutex2var_epi8(t->T[4], idx, t->T[5]), _mm512_permutex2var_epi8(t->T[6], idx, t->T[7])));
    const __m512i aux = _mm512_permutexvar_epi32(t->aux_sel, z);
    const __m512i sgn = _mm512_permutex2var_epi8(t->ks0, _mm512_multishift_epi64_epi8(t->fields, aux), t->ks1);
    __mmask64 pl[8] __attribute__((aligned(64))), sg[8] __attribute__((aligned(64)));
    _mm512_store_si512(pl, r);
    _mm512_store_si512(sg, sgn);
    __asm__ volatile("" ::: "memory");
    /* 2 l + 1 of group 2 g in word 4 g, of group 2 g + 1 in word 4 g + 2 */
    const __m512i ls = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(aux, 28), 1), _mm512_set1_epi32(1));
    const __m512i base = _mm512_set1_epi8(8);
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const __m512i g0 = _mm512_mask_add_epi8(base, _load_mask64(&pl[g]), base, _mm512_set1_epi8(17));
        o->grid[g] = _mm512_mask_add_epi8(g0, _load_mask64(&pl[4 + g]), g0, _mm512_set1_epi8(35));
        o->sc[g] = _mm512_permutexvar_epi16(pick, ls);
        o->neg[g] = _load_mask64(&sg[g]);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(4));
    }
    o->d = h2f(x->d);
}
SB_ENTRIES(iq2_xxs, mr_block_iq2_xxs, 0.125f)

/* -------------------------------------------------------------------------------------- IQ3_S
 * The grid (512 entries of 4 values in 1..15) is kept in registers as 16-bit entries with one value
 * per nibble (iq3s_grid_nib, 16 zmm): 32 lookups are 8 two-table word permutes (6 index bits each)
 * and a 3-level blend on index bits 6..8, about 3x cheaper than scalar loads. */
KI __m512i lut512_epi16(const __m512i T[16], __m512i idx) {
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
    const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    const __mmask32 b8 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(256));
    __m512i p[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) p[k] = _mm512_permutex2var_epi16(T[2 * k], idx, T[2 * k + 1]);
    UNROLL4 for (int k = 0; k < 4; k++) p[k] = _mm512_mask_blend_epi16(b6, p[2 * k], p[2 * k + 1]);
    p[0] = _mm512_mask_blend_epi16(b7, p[0], p[1]);
    p[1] = _mm512_mask_blend_epi16(b7, p[2], p[3]);
    return _mm512_mask_blend_epi16(b8, p[0], p[1]);
}

/* 16 nibble-packed entries (32 bytes) -> 64 value bytes in order: each byte's low nibble, then its
 * high nibble */
KI __m512i nib_expand(__m256i e) {
    const __m512i w = _mm512_cvtepu8_epi16(e);
    return _mm512_ternarylogic_epi32(w, _mm512_slli_epi16(w, 4), _mm512_set1_epi16(0x0f0f), 0xa8); /* (a|b)&c */
}

typedef struct { __m512i T[16]; } tab_iq3_s;
KI void init_iq3_s(tab_iq3_s *t) {
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) t->T[k] = _mm512_loadu_si512(mr_iq3s_grid_nib + 32 * k);
}
KI void dec_iq3_s(const mr_block_iq3_s *x, const tab_iq3_s *t, sb_dec *o) {
    /* 64 indices: qs byte | bit k of qh (as a 64-bit mask) at bit 8 */
    const __m512i bit8 = _mm512_set1_epi16(0x100);
    const __m512i qs = _mm512_loadu_si512(x->qs);
    const uint64_t qh = ld64(x->qh);
    __m512i ia = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(qs));
    __m512i ib = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(qs, 1));
    ia = _mm512_mask_add_epi16(ia, (__mmask32)qh, ia, bit8);
    ib = _mm512_mask_add_epi16(ib, (__mmask32)(qh >> 32), ib, bit8);
    const __m512i ra = lut512_epi16(t->T, ia), rb = lut512_epi16(t->T, ib);
    UNROLL4 for (int g = 0; g < 4; g++) {
        const __m512i r = g < 2 ? ra : rb;
        o->grid[g] = nib_expand(g & 1 ? _mm512_extracti64x4_epi64(r, 1) : _mm512_castsi512_si256(r));
        o->neg[g] = _cvtu64_mask64(ld64(x->signs + 8 * g));
        const unsigned scb = x->scales[g];
        o->sc[g] = scale2_epi16((int)(2 * (scb & 0xf) + 1), (int)(2 * (scb >> 4) + 1));
    }
    o->d = h2f(x->d);
}

/* With AVX512_VBMI (Ice Lake, Zen 4 and later): the grid as two 512-byte tables (low and high byte
 * of each nibble-packed entry, iq3s_grid_nib8) in 16 zmm; 64 lookups per table are four 128-byte
 * vpermt2b and three blends (index bit 7 from the qs byte, bit 8 from qh), half the work of the
 * word tables above, on byte indices used as loaded (15.8 -> 10.7 ns per 256 on Zen 4). The index
 * bytes are permuted first so that the in-lane unpacks (byte pairs -> 16-bit entries -> 4 value
 * bytes) leave the values in order: lookup position p = 16 j + 4 m + t holds entry 16 m + 4 j + t,
 * and 128-bit lane j of output vector m then holds entries 16 m + 4 j .. + 3. */
static inline uint64_t transpose_nib4x4(uint64_t x) {   /* the same permutation of qh's 64 bits */
    uint64_t t = ((x >> 24) ^ x) & 0x00000000ff00ff00ull;   /* swap the off-diagonal 2x2 blocks */
    x ^= t ^ (t << 24);
    t = ((x >> 12) ^ x) & 0x0000f0f00000f0f0ull;            /* transpose within the 2x2 blocks */
    return x ^ t ^ (t << 12);
}

KV __m512i lut512_vbmi(const __m512i T[8], __m512i idx, __mmask64 b7, __mmask64 b8) {
    const __m512i r0 = _mm512_permutex2var_epi8(T[0], idx, T[1]);
    const __m512i r1 = _mm512_permutex2var_epi8(T[2], idx, T[3]);
    const __m512i r2 = _mm512_permutex2var_epi8(T[4], idx, T[5]);
    const __m512i r3 = _mm512_permutex2var_epi8(T[6], idx, T[7]);
    return _mm512_mask_blend_epi8(b8, _mm512_mask_blend_epi8(b7, r0, r1), _mm512_mask_blend_epi8(b7, r2, r3));
}

typedef struct { __m512i TL[8], TH[8], perm, pick[4]; } tab_iq3_s_vbmi;
KV void init_iq3_s_vbmi(tab_iq3_s_vbmi *t) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        t->TL[k] = _mm512_loadu_si512(mr_iq3s_grid_nib8 + 64 * k);
        t->TH[k] = _mm512_loadu_si512(mr_iq3s_grid_nib8 + 512 + 64 * k);
    }
    uint8_t pb[64];
    for (int p = 0; p < 64; p++) pb[p] = (uint8_t)(16 * ((p >> 2) & 3) + 4 * (p >> 4) + (p & 3));
    t->perm = _mm512_loadu_si512(pb);
    /* chunk g's scale words (dpwssd): words 0..15 <- group scale 2g, 16..31 <- 2g+1, from the 8
     * scale bytes in each 128-bit lane */
    UNROLL4 for (int g = 0; g < 4; g++)
        t->pick[g] = _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16((short)(0xff00 | (2 * g))),
                                             _mm512_set1_epi16((short)(0xff00 | (2 * g + 1))));
}
KV void dec_iq3_s_vbmi(const mr_block_iq3_s *x, const tab_iq3_s_vbmi *t, sb_dec *o) {
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    const __m512i idx = _mm512_permutexvar_epi8(t->perm, _mm512_loadu_si512(x->qs));
    const __mmask64 b7 = _mm512_movepi8_mask(idx), b8 = _cvtu64_mask64(transpose_nib4x4(ld64(x->qh)));
    const __m512i L = lut512_vbmi(t->TL, idx, b7, b8), H = lut512_vbmi(t->TH, idx, b7, b8);
    const __m512i a = _mm512_unpacklo_epi8(L, H), b = _mm512_unpackhi_epi8(L, H);
    const __m512i alo = _mm512_and_si512(a, m0f), ahi = _mm512_and_si512(_mm512_srli_epi16(a, 4), m0f);
    const __m512i blo = _mm512_and_si512(b, m0f), bhi = _mm512_and_si512(_mm512_srli_epi16(b, 4), m0f);
    o->grid[0] = _mm512_unpacklo_epi8(alo, ahi);
    o->grid[1] = _mm512_unpackhi_epi8(alo, ahi);
    o->grid[2] = _mm512_unpacklo_epi8(blo, bhi);
    o->grid[3] = _mm512_unpackhi_epi8(blo, bhi);
    /* the 8 group scales 2 l + 1 as bytes 0..7 of every lane */
    const __m128i sb = _mm_cvtsi32_si128((int)ld32(x->scales));
    __m128i sv = _mm_unpacklo_epi8(_mm_and_si128(sb, _mm_set1_epi8(0x0f)),
                                   _mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0f)));
    sv = _mm_or_si128(_mm_add_epi8(sv, sv), _mm_set1_epi8(1));
    const __m512i sz = _mm512_broadcast_i32x4(sv);
    UNROLL4 for (int g = 0; g < 4; g++) {
        o->neg[g] = _cvtu64_mask64(ld64(x->signs + 8 * g));
        o->sc[g] = _mm512_shuffle_epi8(sz, t->pick[g]);
    }
    o->d = h2f(x->d);
}
SB_ENTRIES(iq3_s, mr_block_iq3_s, 1.0f)

/* ------------------------------------------------------------------------------------ IQ3_XXS
 * 256-entry grid of 4 values in registers as nibble codes (iq3xxs_grid_nib, 8 zmm), levels by a
 * byte shuffle; signs and scales as IQ2_XXS (the 8 sign words follow the 64 index bytes). */
KI __m512i lut256_epi16(const __m512i T[8], __m512i idx) {
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
    const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    __m512i p[4];
    UNROLL4 for (int k = 0; k < 4; k++) p[k] = _mm512_permutex2var_epi16(T[2 * k], idx, T[2 * k + 1]);
    p[0] = _mm512_mask_blend_epi16(b6, p[0], p[1]);
    p[1] = _mm512_mask_blend_epi16(b6, p[2], p[3]);
    return _mm512_mask_blend_epi16(b7, p[0], p[1]);
}

typedef struct { __m512i T[8], lev, pick0; } tab_iq3_xxs;
KI void init_iq3_xxs(tab_iq3_xxs *t) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) t->T[k] = _mm512_loadu_si512(mr_iq3xxs_grid_nib + 32 * k);
    t->lev = _mm512_broadcast_i32x4(_mm_setr_epi8(4, 12, 20, 28, 36, 44, 52, 62, 0, 0, 0, 0, 0, 0, 0, 0));
    t->pick0 = _mm512_set_epi64(0x0001000100010001ll, 0x0001000100010001ll, 0x0001000100010001ll,
                                0x0001000100010001ll, 0, 0, 0, 0);
}
KI void dec_iq3_xxs(const mr_block_iq3_xxs *x, const tab_iq3_xxs *t, sb_dec *o) {
    const __m512i qs = _mm512_loadu_si512(x->qs);
    const __m512i ra = lut256_epi16(t->T, _mm512_cvtepu8_epi16(_mm512_castsi512_si256(qs)));
    const __m512i rb = lut256_epi16(t->T, _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(qs, 1)));
    const __m512i w = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(x->qs + MR_QK_K / 4)));
    uint64_t sg[4];
    _mm256_storeu_si256((__m256i *)sg, even_signs_block(w));
    const __m512i ls = _mm512_castsi128_si512(_mm512_cvtepi64_epi16(
        _mm512_add_epi64(_mm512_slli_epi64(_mm512_srli_epi64(w, 28), 1), _mm512_set1_epi64(1))));
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const __m512i r = g < 2 ? ra : rb;
        o->grid[g] = _mm512_shuffle_epi8(t->lev, nib_expand(g & 1 ? _mm512_extracti64x4_epi64(r, 1) : _mm512_castsi512_si256(r)));
        o->sc[g] = _mm512_permutexvar_epi16(pick, ls);
        o->neg[g] = _cvtu64_mask64(sg[g]);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(2));
    }
    o->d = h2f(x->d);
}
SB_ENTRIES_PLAIN(iq3_xxs, mr_block_iq3_xxs, 0.25f)

/* ------------------------------------------------------------------------------ IQ2_XS / IQ2_S
 * Scalar grid loads (8 values each) through indices stored by a vector pass; 4-bit scales per
 * 16 values: int16 lane m of 64-value chunk g takes scale group 4g + m/8. */
KI __m256i scales16_4bit(const uint8_t *sc) {   /* 8 bytes, 2 scales each -> 16 words 2 l + 1 */
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc));
    const __m256i w = _mm256_set_m128i(_mm_srli_epi16(b, 4), _mm_and_si128(b, _mm_set1_epi16(0xf)));
    /* words 0..7 low nibbles, 8..15 high: interleave to group order (lo0, hi0, lo1, hi1, ...) */
    const __m256i order = _mm256_setr_epi16(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const __m256i l = _mm256_permutexvar_epi16(order, w);
    return _mm256_add_epi16(_mm256_slli_epi16(l, 1), _mm256_set1_epi16(1));
}

typedef struct { __m512i pick0; } tab_g16;   /* chunk g, word m <- scale group 4 g + m / 8 */
KI void init_g16(tab_g16 *t) {
    const long long c1 = 0x0001000100010001ll;
    t->pick0 = _mm512_set_epi64(3 * c1, 3 * c1, 2 * c1, 2 * c1, c1, c1, 0, 0);
}
#define tab_iq2_xs tab_g16
#define init_iq2_xs init_g16
#define tab_iq2_s tab_g16
#define init_iq2_s init_g16

KI void dec_iq2_xs(const mr_block_iq2_xs *x, const tab_g16 *t, sb_dec *o) {
    const uint64_t *G = mr_iq2xs_grid;
    /* 32 words: 9-bit grid index | 7 sign bits << 9 */
    const __m512i qw = _mm512_loadu_si512(x->qs);
    uint16_t k[32];
    _mm512_storeu_si512(k, _mm512_and_si512(qw, _mm512_set1_epi16(511)));
    uint64_t sg[4];
    {
        /* 7-bit sign fields to bytes, then the parity bit (as even_signs_block) */
        const __m256i v = _mm512_cvtepi16_epi8(_mm512_srli_epi16(qw, 9));
        __m256i p = _mm256_xor_si256(v, _mm256_srli_epi64(v, 4));
        p = _mm256_xor_si256(p, _mm256_srli_epi64(p, 2));
        p = _mm256_xor_si256(p, _mm256_srli_epi64(p, 1));
        _mm256_storeu_si256((__m256i *)sg, _mm256_ternarylogic_epi64(v, _mm256_slli_epi64(p, 7), _mm256_set1_epi8((char)0x80), 0xf8));
    }
    const __m512i lz = _mm512_castsi256_si512(scales16_4bit(x->scales));
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const uint16_t *kk = k + 8 * g;
        o->grid[g] = _mm512_set_epi64(
            (long long)G[kk[7]], (long long)G[kk[6]], (long long)G[kk[5]], (long long)G[kk[4]],
            (long long)G[kk[3]], (long long)G[kk[2]], (long long)G[kk[1]], (long long)G[kk[0]]);
        o->sc[g] = _mm512_permutexvar_epi16(pick, lz);
        o->neg[g] = _cvtu64_mask64(sg[g]);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(4));
    }
    o->d = h2f(x->d);
}
SB_ENTRIES_PLAIN(iq2_xs, mr_block_iq2_xs, 0.125f)

KI void dec_iq2_s(const mr_block_iq2_s *x, const tab_g16 *t, sb_dec *o) {
    const uint64_t *G = mr_iq2s_grid;
    const long long c1 = 0x0001000100010001ll;
    /* index word k: qs[k] | 2 bits of qh[k/4] (bits 2 (k%4)) at bits 8..9 */
    const __m512i rep4 = _mm512_set_epi64(7 * c1, 6 * c1, 5 * c1, 4 * c1, 3 * c1, 2 * c1, c1, 0);
    __m512i hi = _mm512_permutexvar_epi16(rep4, _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)x->qh))));
    hi = _mm512_and_si512(_mm512_sllv_epi16(hi, _mm512_set1_epi64(0x0002000400060008ll)), _mm512_set1_epi16(0x300));
    uint16_t k[32];
    _mm512_storeu_si512(k, _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)x->qs)), hi));
    const uint8_t *signs = x->qs + MR_QK_K / 8;
    const __m512i lz = _mm512_castsi256_si512(scales16_4bit(x->scales));
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const uint16_t *kk = k + 8 * g;
        o->grid[g] = _mm512_set_epi64(
            (long long)G[kk[7]], (long long)G[kk[6]], (long long)G[kk[5]], (long long)G[kk[4]],
            (long long)G[kk[3]], (long long)G[kk[2]], (long long)G[kk[1]], (long long)G[kk[0]]);
        o->neg[g] = _cvtu64_mask64(ld64(signs + 8 * g));
        o->sc[g] = _mm512_permutexvar_epi16(pick, lz);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(4));
    }
    o->d = h2f(x->d);
}
SB_ENTRIES_PLAIN(iq2_s, mr_block_iq2_s, 0.125f)

/* ------------------------------------------------------------------------------- IQ1_S / IQ1_M
 * Decoded like the types above (sb1_dec: unsigned grid bytes and scale words per chunk) plus a
 * correction per column from the activation sums (bsums): corr1_T(o, a) gives its 8 int32 lanes.
 * Grid lookups are scalar loads (2048 entries: a vpgatherdq per chunk measured slower on Zen 4). */
typedef struct { __m512i grid[4], sc[4]; __m256i f; float d; } sb1_dec;

KI __m512i sb1_dot(const sb1_dec *o, const int8_t *q) {
    __m512i sumi = _mm512_setzero_si512();
    UNROLL4 for (int g = 0; g < 4; g++)
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(o->grid[g], _mm512_loadu_si512(q + 64 * g)), o->sc[g]);
    return sumi;
}

/* vec_dot / 4 columns; FINAL(main, corr) combines the two float sums */
#define SB1_DOT_KERNEL(NAME, BLK, TAB, INIT, DEC, CORR, FINAL)                                     \
    KI void NAME(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {        \
        const BLK *x = w;                                                                          \
        TAB t;                                                                                     \
        INIT(&t);                                                                                  \
        __m512 acc[4];                                                                             \
        __m256 acc_corr[4];                                                                        \
        UNROLL4 for (int c = 0; c < nc; c++) { acc[c] = _mm512_setzero_ps(); acc_corr[c] = _mm256_setzero_ps(); } \
        for (int i = 0; i < n / MR_QK_K; i++) {                                                    \
            sb1_dec o;                                                                             \
            DEC(x + i, &t, &o);                                                                    \
            UNROLL4 for (int c = 0; c < nc; c++) {                                                 \
                const mr_block_q8_k *a = ACT(mr_block_q8_k, vy, by, c) + i;                        \
                const float d = o.d * a->d;                                                        \
                acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sb1_dot(&o, a->qs)), acc[c]); \
                acc_corr[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(CORR(&o, a)), acc_corr[c]); \
            }                                                                                      \
        }                                                                                          \
        UNROLL4 for (int c = 0; c < nc; c++) s[c] = FINAL(_mm512_reduce_add_ps(acc[c]), hsum8_ps(acc_corr[c])); \
    }

#define SB1_GEMM_KERNEL(NAME, BLK, TAB, INIT, DEC, CORR, FINAL)                                    \
    void NAME(int n, const void *w, size_t w_row, int nr, const void *vy, size_t by, int nc, \
                     float *s, size_t s_col) {                                                     \
        TAB t;                                                                                     \
        INIT(&t);                                                                                  \
        __m512 acc[4 * MR_GEMM_NC];                                                                \
        __m256 acc_corr[4 * MR_GEMM_NC];                                                           \
        for (int r0 = 0; r0 < nr; r0 += 4) {                                                       \
            const int nr4 = nr - r0 < 4 ? nr - r0 : 4;                                             \
            const uint8_t *w0 = (const uint8_t *)w + (size_t)r0 * w_row;                          \
            for (int k = 0; k < nr4 * nc; k++) { acc[k] = _mm512_setzero_ps(); acc_corr[k] = _mm256_setzero_ps(); } \
            for (int i = 0; i < n / MR_QK_K; i++)                                                  \
                for (int r = 0; r < nr4; r++) {                                                    \
                    sb1_dec o;                                                                     \
                    DEC((const BLK *)(w0 + (size_t)r * w_row) + i, &t, &o);                        \
                    for (int c = 0; c < nc; c++) {                                                 \
                        const mr_block_q8_k *a = ACT(mr_block_q8_k, vy, by, c) + i;                \
                        const float d = o.d * a->d;                                                \
                        const int k = r * nc + c;                                                  \
                        acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sb1_dot(&o, a->qs)), acc[k]); \
                        acc_corr[k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(CORR(&o, a)), acc_corr[k]); \
                    }                                                                              \
                }                                                                                  \
            for (int r = 0; r < nr4; r++)                                                          \
                for (int c = 0; c < nc; c++)                                                       \
                    s[(size_t)c * s_col + r0 + r] = FINAL(_mm512_reduce_add_ps(acc[r * nc + c]), hsum8_ps(acc_corr[r * nc + c])); \
        }                                                                                          \
    }

#define SB1_ENTRIES(T, BLK)                                                                        \
    SB1_DOT_KERNEL(k_##T, BLK, tab_##T, init_##T, dec_##T, corr_##T, final_##T)                    \
    SB1_GEMM_KERNEL(mr_gemm_##T##_avx512, BLK, tab_##T, init_##T, dec_##T, corr_##T, final_##T)    \
    ENTRIES(T)

/* IQ1_S: grid values g in {-1, 0, 1} are fed as g + 1 (unsigned); the shift and the +1 are folded
 * into one correction per 32 values:
 *   sum l * (g + delta) q = l * dot(g + 1, q) + l * S * (delta - 1), delta = +-1/8, S = sum q;
 * f = l (8 delta - 8) per group, corr = S * f, and the result is main + corr / 8. */
typedef struct { __m512i rep4, shl, shr, pick0; } tab_iq1_s;
KI void init_iq1_s(tab_iq1_s *t) {
    const long long c1 = 0x0001000100010001ll;
    t->rep4 = _mm512_set_epi64(7 * c1, 6 * c1, 5 * c1, 4 * c1, 3 * c1, 2 * c1, c1, 0); /* word k <- qh[k/4] */
    t->shl = _mm512_set1_epi64(0x0000000200050008ll);
    t->shr = _mm512_set1_epi64(0x0001000000000000ll);
    t->pick0 = _mm512_set_epi64(c1, c1, c1, c1, 0, 0, 0, 0);
}
KI void dec_iq1_s(const mr_block_iq1_s *x, const tab_iq1_s *t, sb1_dec *o) {
    const uint64_t *G = mr_iq1s_grid;
    /* 32 11-bit indices (group k: qs[k] | bits 3(k%4).. of qh[k/4] at bit 8), through memory
     * to the scalar grid loads */
    const __m128i qh = _mm_loadu_si128((const __m128i *)x->qh);
    __m512i hi = _mm512_permutexvar_epi16(t->rep4, _mm512_castsi128_si512(qh));
    hi = _mm512_and_si512(_mm512_srlv_epi16(_mm512_sllv_epi16(hi, t->shl), t->shr), _mm512_set1_epi16(0x700));
    uint16_t k[32];
    _mm512_storeu_si512(k, _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)x->qs)), hi));
    /* scales 2 l + 1 of the 8 groups (int16) */
    const __m128i l8 = _mm_add_epi16(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1));
    const __m512i lz = _mm512_castsi128_si512(l8);
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const uint16_t *kk = k + 8 * g;
        o->grid[g] = _mm512_add_epi8(_mm512_set_epi64(
            (long long)G[kk[7]], (long long)G[kk[6]], (long long)G[kk[5]], (long long)G[kk[4]],
            (long long)G[kk[3]], (long long)G[kk[2]], (long long)G[kk[1]], (long long)G[kk[0]]), _mm512_set1_epi8(1));
        o->sc[g] = _mm512_permutexvar_epi16(pick, lz);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(2));
    }
    o->f = _mm256_cvtepi16_epi32(_mm_mullo_epi16(l8, _mm_blendv_epi8(_mm_set1_epi16(-7), _mm_set1_epi16(-9), _mm_srai_epi16(qh, 15))));
    o->d = h2f(x->d);
}
KI __m256i corr_iq1_s(const sb1_dec *o, const mr_block_q8_k *a) {
    const __m256i S = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), _mm256_set1_epi16(1));
    return _mm256_mullo_epi32(S, o->f);
}
#define final_iq1_s(m, c) ((m) + 0.125f * (c))
SB1_ENTRIES(iq1_s, mr_block_iq1_s)

/* IQ1_M: eight times a weight is the integer 8 g + delta8 (delta8 = +-1 per 8 values); fed
 * unsigned as u = 8 (g + 1) + 1 + delta8 = 8 (g + 1) + (delta8 > 0 ? 2 : 0), so
 *   8 sum w q = dot(u, q) - 9 S, S = sum q per 16 values (bsums), the scale group;
 * f holds the 16 scales 2 l + 1 (words) and corr = madd(f, bsums). */
typedef struct { __m512i rep2, shl, pick0; __m256i rep4, shr; } tab_iq1_m;
KI void init_iq1_m(tab_iq1_m *t) {
    const long long c1 = 0x0001000100010001ll;
    /* index words: word k <- qh byte k/2, its nibble k%2 (low 3 bits) moved to bits 8..10 */
    const long long h2 = 0x0001000100000000ll;
    t->rep2 = _mm512_set_epi64(14 * c1 + h2, 12 * c1 + h2, 10 * c1 + h2, 8 * c1 + h2,
                               6 * c1 + h2, 4 * c1 + h2, 2 * c1 + h2, h2);
    t->shl = _mm512_set1_epi32(0x00040008);                   /* 8 for even k, 4 for odd */
    /* scale words: word j <- scales word j/4, shifted right by 3 (j%4) */
    t->rep4 = _mm256_set_epi64x(3 * c1, 2 * c1, c1, 0);
    t->shr = _mm256_set1_epi64x(0x0009000600030000ll);
    /* int16 lane m of chunk g takes scale 4g + m/8 */
    t->pick0 = _mm512_set_epi64(3 * c1, 3 * c1, 2 * c1, 2 * c1, c1, c1, 0, 0);
}
KI void dec_iq1_m(const mr_block_iq1_m *x, const tab_iq1_m *t, sb1_dec *o) {
    const uint64_t *G = mr_iq1s_grid;
    uint16_t sc[4];
    memcpy(sc, x->scales, 8);
    const uint16_t d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    __m512i hi = _mm512_permutexvar_epi16(t->rep2, _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)x->qh))));
    hi = _mm512_and_si512(_mm512_sllv_epi16(hi, t->shl), _mm512_set1_epi16(0x700));
    uint16_t k[32];
    _mm512_storeu_si512(k, _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)x->qs)), hi));
    /* 2 l + 1 for the 16 scale groups of 16 values */
    __m256i ls = _mm256_permutexvar_epi16(t->rep4, _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)x->scales)));
    ls = _mm256_add_epi16(_mm256_slli_epi16(_mm256_and_si256(_mm256_srlv_epi16(ls, t->shr), _mm256_set1_epi16(7)), 1), _mm256_set1_epi16(1));
    const __m512i lz = _mm512_castsi256_si512(ls);
    __m512i pick = t->pick0;
    UNROLL4 for (int g = 0; g < 4; g++) {
        const uint16_t *kk = k + 8 * g;
        const __m512i grid = _mm512_set_epi64(
            (long long)G[kk[7]], (long long)G[kk[6]], (long long)G[kk[5]], (long long)G[kk[4]],
            (long long)G[kk[3]], (long long)G[kk[2]], (long long)G[kk[1]], (long long)G[kk[0]]);
        /* bit 3 of nibble k clear: positive shift for the 8 values of group k */
        const uint64_t pos = _pdep_u64(_pext_u32(~ld32(x->qh + 4 * g), 0x88888888u), 0x0101010101010101ull) * 0xff;
        __m512i u = _mm512_slli_epi16(_mm512_add_epi8(grid, _mm512_set1_epi8(1)), 3);   /* bytes stay < 32 */
        o->grid[g] = _mm512_mask_add_epi8(u, pos, u, _mm512_set1_epi8(2));
        o->sc[g] = _mm512_permutexvar_epi16(pick, lz);
        pick = _mm512_add_epi16(pick, _mm512_set1_epi16(4));
    }
    o->f = ls;
    o->d = h2f(d16);
}
KI __m256i corr_iq1_m(const sb1_dec *o, const mr_block_q8_k *a) {
    /* the -9 S term: sum over the 16 scale groups of (2 l + 1) * bsum */
    return _mm256_madd_epi16(o->f, _mm256_loadu_si256((const __m256i *)a->bsums));
}
#define final_iq1_m(m, c) (0.125f * ((m) - 9.0f * (c)))
SB1_ENTRIES(iq1_m, mr_block_iq1_m)

/* IQ4_NL, MXFP4: q4_0_avx512.c; IQ4_XS: iq4_xs_avx512.c (the block-sum numerics of the AVX2 kernels). */
