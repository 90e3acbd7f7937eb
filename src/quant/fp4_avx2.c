/* IQ4_NL and MXFP4 x Q8_0, IQ4_XS x Q8_K under AVX2: block-sum numerics and 8-row repacked weights
 * (the scheme of q4_0_avx2.c for 4-bit codes into a level table).
 *
 * Numerics (every AVX2 kernel of both types): acc = 0; per 32-value block b in order,
 *   isum_b = sum_i level(code_i) * y_i (exact int32), acc = fmaf(dx_b * fp16(dy_b), (float)isum_b, acc)
 * with dx the block scale (IQ4_NL: fp16 d; MXFP4: the E8M0 exponent as 2^(e-128), the level table
 * being doubled).
 *
 * Repacked layout (per group of 8 rows and block): the 8 scales (IQ4_NL: fp16 d[8]; MXFP4: e[8]),
 * then four 32-byte vectors P_m whose 32-bit lane r holds bytes 4m..4m+3 of row r's codes (low
 * nibbles: values 4m..4m+3; high: 16+4m..16+4m+3) -- the size of the plain blocks. A byte shuffle of
 * the level table turns 8 rows' codes into levels at once.
 * IQ4_NL levels reach +-127: vpmaddubsw(|level|, sign(y, level)) widened by vpmaddwd each time.
 * MXFP4 levels are within +-12: level + 12 is unsigned (<= 24), four vpmaddubsw add up in int16
 * (<= 4 x 2 x 24 x 128), and 12 x sum(y) comes from the prepared activations' correction
 * (-8 x sum(y), q4_0_avx2.c's layout).
 *
 * IQ4_XS (IQ4_NL codes and levels in 256-value super-blocks, a 6-bit scale l_j - 32 per 32 values j):
 * numerics per super-block i in order (every AVX2 kernel of the type):
 *   isum_i = sum_j (l_j - 32) * sum_v level(code_v) * y_v  (exact int32: |isum| <= 8 x 32 x 32 x 127 x 127)
 *   acc = fmaf(fp16(d_i) * dy_i, (float)isum_i, acc)
 * Repacked (8 rows, per group and super-block): fp16 d[8], the scales l_j - 32 as int8 sc[j][row],
 * then per 32-value group j the four IQ4_NL code vectors (lane r: bytes 16j+4m..16j+4m+3 of row r's
 * codes); 1104 bytes for 1088 plain. The sub-block scale rides in the vpmaddwd that widens each
 * vpmaddubsw (IQ4_NL's is 1). Activations: Q8_K rows as they are. */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"

#include <immintrin.h>
#include <string.h>

#define F4A_UNROLL _Pragma("GCC unroll 8")

typedef struct { uint16_t d[8]; uint8_t q[4][32]; } f4a_nl;
_Static_assert(sizeof(f4a_nl) == 8 * sizeof(mr_block_iq4_nl), "repacked iq4_nl block (8 rows x 32 values)");
typedef struct { uint8_t e[8]; uint8_t q[4][32]; } f4a_mx;
_Static_assert(sizeof(f4a_mx) == 8 * sizeof(mr_block_mxfp4), "repacked mxfp4 block (8 rows x 32 values)");
typedef struct { int8_t y[32]; float d; int32_t corr; } f4a_act;
_Static_assert(sizeof(f4a_act) == MR_Q4_0_RP_ACT_BYTES, "prepared q8_0 block for the repacked kernels");

/* E8M0 exponent e -> 2^(e - 128), half the block scale (the level table is doubled) */
static inline float f4a_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
/* the same for 8 exponents */
static inline __m256 f4a_e8m0_half8(const uint8_t *e) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, small, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v)));
}

static inline __m256i f4a_lut(const int8_t *t, int8_t add) {
    const __m128i v = _mm_add_epi8(_mm_loadu_si128((const __m128i *)t), _mm_set1_epi8(add));
    return _mm256_set_m128i(v, v);
}

static inline int f4a_hsum_i32(__m256i v) {
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(a);
}

/* 32 code bytes -> the levels of their low (lo) and high (hi) nibbles, through the 16-byte table
 * in both lanes of lut */
static inline void f4a_levels(__m256i p, __m256i lut, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    *lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(p, m4));
    *hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(p, 4), m4));
}

/* ---- one row: vec_dot and 4 columns (mx: MXFP4, else IQ4_NL) ---- */

static inline void f4a_dot(int n, float *s, const void *w, const void *vy, size_t by, const int nc, const int mx) {
    const __m256i lut = f4a_lut(mx ? mr_kvalues_mxfp4 : mr_kvalues_iq4nl, 0), ones = _mm256_set1_epi16(1);
    float acc1 = 0.0f;
    __m128 acc4 = _mm_setzero_ps();
    for (int b = 0; b < n / 32; b++) {
        const uint8_t *qs = mx ? ((const mr_block_mxfp4 *)w)[b].qs : ((const mr_block_iq4_nl *)w)[b].qs;
        const float dx = mx ? f4a_e8m0_half(((const mr_block_mxfp4 *)w)[b].e) : _cvtsh_ss(((const mr_block_iq4_nl *)w)[b].d);
        const __m128i t = _mm_loadu_si128((const __m128i *)qs);
        const __m256i lv = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f)));
        const __m256i av = _mm256_abs_epi8(lv);
        __m256i l[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        float dy[4] = {0, 0, 0, 0};
        F4A_UNROLL for (int c = 0; c < nc; c++) {
            const mr_block_q8_0 *a = (const mr_block_q8_0 *)((const uint8_t *)vy + (size_t)c * by) + b;
            l[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->qs), lv)), ones);
            dy[c] = _cvtsh_ss(a->d);
        }
        if (nc == 1) acc1 = __builtin_fmaf(dx * dy[0], (float)f4a_hsum_i32(l[0]), acc1);
        else {
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(l[0], l[1]), _mm256_hadd_epi32(l[2], l[3]));
            const __m128i is = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            acc4 = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(dx), _mm_loadu_ps(dy)), _mm_cvtepi32_ps(is), acc4);
        }
    }
    if (nc == 1) s[0] = acc1;
    else _mm_storeu_ps(s, acc4);
}

void mr_vd_iq4_nl_bs_avx2(int n, float *s, const void *w, const void *y) { f4a_dot(n, s, w, y, 0, 1, 0); }
void mr_vd4_iq4_nl_bs_avx2(int n, float *s, const void *w, const void *y, size_t by) { f4a_dot(n, s, w, y, by, 4, 0); }
void mr_vd_mxfp4_bs_avx2(int n, float *s, const void *w, const void *y) { f4a_dot(n, s, w, y, 0, 1, 1); }
void mr_vd4_mxfp4_bs_avx2(int n, float *s, const void *w, const void *y, size_t by) { f4a_dot(n, s, w, y, by, 4, 1); }

/* 8 rows' signed levels lo (values 4m..4m+3 of each row lane) and hi (16+4m..16+4m+3) times the
 * broadcast activation bytes yc[c][0..3] and yc[c][16..19], scaled by the int16 pairs sc (one per
 * row lane), added to s[c]. Levels reach +-127: vpmaddubsw(|level|, sign(y, level)) pairs are
 * <= 2 x 127 x 128, so each is widened by its own vpmaddwd. */
static inline void f4a_nl_lanes(__m256i lo, __m256i hi, const int8_t *const *yc, __m256i sc, __m256i *s, const int nc) {
    const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
    F4A_UNROLL for (int c = 0; c < nc; c++) {
        int32_t y0, y1;
        memcpy(&y0, yc[c], 4);
        memcpy(&y1, yc[c] + 16, 4);
        s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(_mm256_maddubs_epi16(alo, _mm256_sign_epi8(_mm256_set1_epi32(y0), lo)), sc));
        s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(_mm256_maddubs_epi16(ahi, _mm256_sign_epi8(_mm256_set1_epi32(y1), hi)), sc));
    }
}

/* ---- repacked: 8 rows at a time ---- */

/* 8 rows x nc columns of one group at w: blocks stride bytes apart, each the rows' scales then the
 * code vectors at qoff */
static inline void f4a_rows(const void *wv, size_t stride, size_t qoff, int nb, const f4a_act *const *a, float *const *y,
                            const int nc, const int mx) {
    const uint8_t *w = wv;
    const __m256i lut = f4a_lut(mx ? mr_kvalues_mxfp4 : mr_kvalues_iq4nl, mx ? 12 : 0);
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc[4];
    F4A_UNROLL for (int c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * stride;
        mr_rp_prefetch(blk, stride);
        __m256i s[4], t16[4];
        F4A_UNROLL for (int c = 0; c < 4; c++) s[c] = t16[c] = _mm256_setzero_si256();
        F4A_UNROLL for (int m = 0; m < 4; m++) {
            __m256i lo, hi;
            f4a_levels(_mm256_loadu_si256((const __m256i *)(blk + qoff + 32 * m)), lut, &lo, &hi);
            if (mx) {
                F4A_UNROLL for (int c = 0; c < nc; c++) {
                    int32_t y0, y1;
                    memcpy(&y0, a[c][b].y + 4 * m, 4);
                    memcpy(&y1, a[c][b].y + 16 + 4 * m, 4);
                    t16[c] = _mm256_add_epi16(t16[c], _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(y0)),
                                                                       _mm256_maddubs_epi16(hi, _mm256_set1_epi32(y1))));
                    if (m & 1) { /* two groups: at most 4 products of 2 x 24 x 128 in int16 */
                        s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(t16[c], one));
                        t16[c] = _mm256_setzero_si256();
                    }
                }
            } else {
                const int8_t *yc[4];
                F4A_UNROLL for (int c = 0; c < nc; c++) yc[c] = a[c][b].y + 4 * m;
                f4a_nl_lanes(lo, hi, yc, one, s, nc);
            }
        }
        const __m256 dx = mx ? f4a_e8m0_half8(blk) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        F4A_UNROLL for (int c = 0; c < nc; c++) {
            /* MXFP4: minus 12 x sum(y) = + 3/2 x the correction (-8 x sum(y)) */
            const __m256i is = mx ? _mm256_add_epi32(s[c], _mm256_set1_epi32(a[c][b].corr / 2 * 3)) : s[c];
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(a[c][b].d)), _mm256_cvtepi32_ps(is), acc[c]);
        }
    }
    F4A_UNROLL for (int c = 0; c < nc; c++) _mm256_storeu_ps(y[c], acc[c]);
}

static void f4a_group(const void *w, size_t blk_bytes, size_t qoff, int64_t cols, const void *const *act, float *const *y,
                      int nc, const int mx) {
    const int nb = (int)(cols / 32);
    const f4a_act *const *a = (const f4a_act *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) f4a_rows(w, blk_bytes, qoff, nb, a + c, y + c, 4, mx);
    for (; c < nc; c++) f4a_rows(w, blk_bytes, qoff, nb, a + c, y + c, 1, mx);
}

void mr_iq4_nl_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    f4a_group(w, sizeof(f4a_nl), offsetof(f4a_nl, q), cols, act, y, nc, 0);
}
void mr_mxfp4_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    f4a_group(w, sizeof(f4a_mx), offsetof(f4a_mx, q), cols, act, y, nc, 1);
}

/* ---- IQ4_XS ---- */

typedef mr_iq4_xs_rp8 f4a_xs8;
_Static_assert(sizeof(f4a_xs8) == MR_IQ4_XS_RP8_BLOCK_BYTES, "repacked iq4_xs super-block (8 rows x 256 values)");

/* the 8 scales l_j - 32 of a super-block, lane j (int32) */
static inline __m256i f4a_xs_scales(const mr_block_iq4_xs *b) {
    uint32_t sl;
    memcpy(&sl, b->scales_l, 4);
    const __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i l = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)), _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
    return _mm256_sub_epi32(l, _mm256_set1_epi32(32));
}
/* int32 lanes v (|v| < 2^15) -> int16 pairs (v, v) for vpmaddwd */
static inline __m256i f4a_pair16(__m256i v) {
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16));
}

/* one row, nc = 1 or 4 columns of Q8_K rows by bytes apart. The 32 code bytes of groups 2k and 2k+1
 * give their low nibbles (values 0..15 of each) in one vector and high nibbles in another, so the
 * activations are read as two 16-byte halves per vector and the scale pair differs per 128-bit lane. */
static inline void f4a_xs_dot(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const mr_block_iq4_xs *x = w;
    const __m256i lut = f4a_lut(mr_kvalues_iq4nl, 0);
    float acc1 = 0.0f;
    __m128 acc4 = _mm_setzero_ps();
    for (int i = 0; i < n / 256; i++) {
        const __m256i scv = f4a_pair16(f4a_xs_scales(&x[i]));
        const mr_block_q8_k *a[4];
        __m256i is[4];
        F4A_UNROLL for (int c = 0; c < nc; c++) {
            a[c] = (const mr_block_q8_k *)((const uint8_t *)vy + (size_t)c * by) + i;
            is[c] = _mm256_setzero_si256();
        }
        F4A_UNROLL for (int k = 0; k < 4; k++) {
            __m256i lo, hi;
            f4a_levels(_mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * k)), lut, &lo, &hi);
            const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
            const __m256i sc = _mm256_permutevar8x32_epi32(scv, _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1));
            F4A_UNROLL for (int c = 0; c < nc; c++) {
                const int8_t *yq = a[c]->qs + 64 * k;
                const __m256i ylo = _mm256_loadu2_m128i((const __m128i *)(yq + 32), (const __m128i *)yq);
                const __m256i yhi = _mm256_loadu2_m128i((const __m128i *)(yq + 48), (const __m128i *)(yq + 16));
                is[c] = _mm256_add_epi32(is[c], _mm256_madd_epi16(_mm256_maddubs_epi16(alo, _mm256_sign_epi8(ylo, lo)), sc));
                is[c] = _mm256_add_epi32(is[c], _mm256_madd_epi16(_mm256_maddubs_epi16(ahi, _mm256_sign_epi8(yhi, hi)), sc));
            }
        }
        const float dx = _cvtsh_ss(x[i].d);
        if (nc == 1) acc1 = __builtin_fmaf(dx * a[0]->d, (float)f4a_hsum_i32(is[0]), acc1);
        else {
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
            const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            const __m128 dy = _mm_setr_ps(a[0]->d, a[1]->d, a[2]->d, a[3]->d);
            acc4 = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(dx), dy), _mm_cvtepi32_ps(t), acc4);
        }
    }
    if (nc == 1) s[0] = acc1;
    else _mm_storeu_ps(s, acc4);
}

void mr_vd_iq4_xs_bs_avx2(int n, float *s, const void *w, const void *y) { f4a_xs_dot(n, s, w, y, 0, 1); }
void mr_vd4_iq4_xs_bs_avx2(int n, float *s, const void *w, const void *y, size_t by) { f4a_xs_dot(n, s, w, y, by, 4); }

void mr_iq4_xs_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    const int64_t nb = cols / 256;
    const mr_block_iq4_xs *w = src;
    f4a_xs8 *out = dst;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t i = 0; i < nb; i++) {
            f4a_xs8 *o = &out[g * nb + i];
            for (int r = 0; r < 8; r++) {
                const mr_block_iq4_xs *b = &w[(8 * g + r) * nb + i];
                int32_t l[8];
                _mm256_storeu_si256((__m256i *)l, f4a_xs_scales(b));
                o->d[r] = b->d;
                for (int j = 0; j < 8; j++) {
                    o->sc[j][r] = (int8_t)l[j];
                    for (int m = 0; m < 4; m++) memcpy(&o->q[j][m][4 * r], b->qs + 16 * j + 4 * m, 4);
                }
            }
        }
}

static inline void f4a_xs_rows(const f4a_xs8 *w, int nb, const mr_block_q8_k *const *y, float *const *out, const int nc) {
    const __m256i lut = f4a_lut(mr_kvalues_iq4nl, 0);
    __m256 acc[4];
    F4A_UNROLL for (int c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const f4a_xs8 *b = &w[i];
        mr_rp_prefetch(b, sizeof *b);
        __m256i s[4];
        F4A_UNROLL for (int c = 0; c < 4; c++) s[c] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const __m256i sc = f4a_pair16(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)b->sc[j])));
            F4A_UNROLL for (int m = 0; m < 4; m++) {
                __m256i lo, hi;
                f4a_levels(_mm256_loadu_si256((const __m256i *)b->q[j][m]), lut, &lo, &hi);
                const int8_t *yc[4];
                F4A_UNROLL for (int c = 0; c < nc; c++) yc[c] = y[c][i].qs + 32 * j + 4 * m;
                f4a_nl_lanes(lo, hi, yc, sc, s, nc);
            }
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        F4A_UNROLL for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(y[c][i].d)), _mm256_cvtepi32_ps(s[c]), acc[c]);
    }
    F4A_UNROLL for (int c = 0; c < nc; c++) _mm256_storeu_ps(out[c], acc[c]);
}

void mr_iq4_xs_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 256);
    const mr_block_q8_k *const *a = (const mr_block_q8_k *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) f4a_xs_rows(w, nb, a + c, y + c, 4);
    for (; c < nc; c++) f4a_xs_rows(w, nb, a + c, y + c, 1);
}
