/* IQ4_XS x Q8_K under AVX-512 (BW, VL, VNNI): the block-sum numerics of the AVX2 kernels
 * (fp4_avx2.c), so every x86 SIMD kernel of the type gives the same bits:
 *   per super-block i in order: isum_i = sum_j (l_j - 32) * sum_v level(code_v) * y_v (exact int32),
 *   acc = fmaf(fp16(d_i) * dy_i, (float)isum_i, acc).
 *
 * Plain rows (vec_dot, 4 columns, the GEMM block; paged experts and row tails): 64 values per zmm,
 * |level| by a byte shuffle and the level's sign on the activation byte (masked subtract),
 * vpmaddubsw + vpdpwssd with the scale pair of the two 32-value groups (int32 lanes exact), then
 * the 16 lanes of up to 4 sums reduced together (one transposing reduction for 4 super-blocks or
 * 4 columns) before their scalar-order fmas.
 *
 * Repacked rows (resident weights): the AVX2 layout of 8 rows (mr_iq4_xs_rp8, its pack
 * mr_iq4_xs_repack8), one row per 32-bit lane. Levels + 128 are unsigned bytes, so vpdpbusd with
 * the broadcast activation bytes sums 4 products per lane straight to int32 (no vpmaddubsw step):
 *   t_j = -128 * Y_j + sum_v (level_v + 128) * y_v = sum_v level_v * y_v,  Y_j = bsums[2j] + bsums[2j+1]
 * (|t_j| <= 32 x 127 x 127), then isum += (l_j - 32) * t_j (vpmulld). The levels of a 32-value group
 * (8 ymm for 8 rows) are decoded once for up to 8 columns. */
#include "quant/quant_simd.h"
#include "quant/quant_iq_simd.h"
#include "quant/quant_blocks.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"

#include <immintrin.h>
#include <string.h>

#define XS_UNROLL _Pragma("GCC unroll 8")

static inline int32_t xs_ld32(const void *p) { int32_t v; memcpy(&v, p, 4); return v; }

/* |kvalues_iq4nl| in each 128-bit lane (the sign: codes 0..7 are the negative levels) */
static inline __m512i xs_lut_abs(void) {
    return _mm512_broadcast_i32x4(_mm_setr_epi8(127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113));
}

/* one super-block decoded for the plain kernels: per 64-value chunk g (32-value groups 2g, 2g+1)
 * the magnitudes in value order, the mask of negative levels, the int16 scale pairs */
typedef struct { __m512i mag[4], sc[4]; __mmask64 neg[4]; float d; } xs_dec;

static inline void xs_decode(const mr_block_iq4_xs *x, __m512i lut, xs_dec *o) {
    const __m512i shift = _mm512_set_epi64(0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                           0x0004000400040004ll, 0x0004000400040004ll, 0, 0);
    const unsigned sh = x->scales_h;
    XS_UNROLL for (int g = 0; g < 4; g++) {
        /* codes of groups 2g (16 bytes) and 2g+1: low nibbles are values 0..15 of a group, high 16..31 */
        const __m512i z = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x->qs + 32 * g))),
                                                      0xff00, _mm_loadu_si128((const __m128i *)(x->qs + 32 * g + 16)));
        const __m512i cw = _mm512_and_si512(_mm512_srlv_epi16(z, shift), _mm512_set1_epi8(0x0f));
        o->neg[g] = _mm512_cmplt_epu8_mask(cw, _mm512_set1_epi8(8));
        o->mag[g] = _mm512_shuffle_epi8(lut, cw);
        const unsigned sl = x->scales_l[g];
        const int la = (int)((sl & 0xf) | ((sh >> (4 * g)) & 3) << 4) - 32;
        const int lb = (int)((sl >> 4) | ((sh >> (4 * g + 2)) & 3) << 4) - 32;
        o->sc[g] = _mm512_mask_set1_epi16(_mm512_set1_epi16((short)la), 0xffff0000u, (short)lb);
    }
    o->d = _cvtsh_ss(x->d);
}

/* int32 lanes whose total is the super-block's isum with activation row q */
static inline __m512i xs_isum_lanes(const xs_dec *o, const int8_t *q) {
    __m512i s = _mm512_setzero_si512();
    XS_UNROLL for (int g = 0; g < 4; g++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * g);
        const __m512i qs = _mm512_mask_sub_epi8(v, o->neg[g], _mm512_setzero_si512(), v);
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(o->mag[g], qs), o->sc[g]);
    }
    return s;
}

/* the totals of the 16 int32 lanes of a, b, c, d */
static inline __m128i xs_reduce4(__m512i a, __m512i b, __m512i c, __m512i d) {
    const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* one row, one column: four super-blocks' lanes reduced together, their fmas in order */
void mr_vd_iq4_xs_bs_avx512(int n, float *s, const void *w, const void *vy) {
    const mr_block_iq4_xs *x = w;
    const mr_block_q8_k *y = vy;
    const __m512i lut = xs_lut_abs();
    const int nb = n / MR_QK_K;
    float acc = 0.0f;
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i l[4];
        float dd[4];
        XS_UNROLL for (int k = 0; k < 4; k++) {
            xs_dec o;
            xs_decode(&x[i + k], lut, &o);
            l[k] = xs_isum_lanes(&o, y[i + k].qs);
            dd[k] = o.d * y[i + k].d;
        }
        int32_t is[4];
        _mm_storeu_si128((__m128i *)is, xs_reduce4(l[0], l[1], l[2], l[3]));
        XS_UNROLL for (int k = 0; k < 4; k++) acc = __builtin_fmaf(dd[k], (float)is[k], acc);
    }
    for (; i < nb; i++) {
        xs_dec o;
        xs_decode(&x[i], lut, &o);
        acc = __builtin_fmaf(o.d * y[i].d, (float)_mm512_reduce_add_epi32(xs_isum_lanes(&o, y[i].qs)), acc);
    }
    *s = acc;
}

/* one row, 4 columns by bytes apart: each super-block decoded once */
static inline __m128 xs_sb4(const xs_dec *o, const mr_block_q8_k *const *a, int i, __m128 acc) {
    const __m128i is = xs_reduce4(xs_isum_lanes(o, a[0][i].qs), xs_isum_lanes(o, a[1][i].qs), xs_isum_lanes(o, a[2][i].qs),
                                  xs_isum_lanes(o, a[3][i].qs));
    const __m128 dy = _mm_setr_ps(a[0][i].d, a[1][i].d, a[2][i].d, a[3][i].d);
    return _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(o->d), dy), _mm_cvtepi32_ps(is), acc);
}

void mr_vd4_iq4_xs_bs_avx512(int n, float *s, const void *w, const void *vy, size_t by) {
    const mr_block_iq4_xs *x = w;
    const mr_block_q8_k *a[4];
    for (int c = 0; c < 4; c++) a[c] = (const mr_block_q8_k *)((const uint8_t *)vy + (size_t)c * by);
    const __m512i lut = xs_lut_abs();
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < n / MR_QK_K; i++) {
        xs_dec o;
        xs_decode(&x[i], lut, &o);
        acc = xs_sb4(&o, a, i, acc);
    }
    _mm_storeu_ps(s, acc);
}

/* ---- repacked: 8 rows (one per 32-bit lane) x nc <= 8 columns, vpdpbusd ---- */

/* 8 rows x nc columns over nb super-blocks of w (activation blocks y[c][0..nb)); carry: start from
 * the sums already in out (a chunk of a longer row), else from 0 */
static inline void xs_rp_rows(const mr_iq4_xs_rp8 *w, int nb, const mr_block_q8_k *const *y, float *const *out, const int nc,
                              const int carry) {
    /* kvalues_iq4nl + 128 as unsigned bytes, in both 128-bit lanes */
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_loadu_si128((const __m128i *)mr_kvalues_iq4nl), _mm_set1_epi8(-128)));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[8];
    XS_UNROLL for (int c = 0; c < 8; c++) acc[c] = c < nc && carry ? _mm256_loadu_ps(out[c]) : _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const mr_iq4_xs_rp8 *b = &w[i];
        __m256i is[8];
        XS_UNROLL for (int c = 0; c < 8; c++) is[c] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            __m256i lv[8]; /* [m]: values 4m..4m+3 of each row lane, [4 + m]: 16 + 4m.. */
            XS_UNROLL for (int m = 0; m < 4; m++) {
                const __m256i p = _mm256_loadu_si256((const __m256i *)b->q[j][m]);
                lv[m] = _mm256_shuffle_epi8(lut, _mm256_and_si256(p, m4));
                lv[4 + m] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(p, 4), m4));
            }
            const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)b->sc[j]));
            XS_UNROLL for (int c = 0; c < nc; c++) {
                const mr_block_q8_k *a = &y[c][i];
                const int8_t *q = a->qs + 32 * j;
                __m256i t = _mm256_set1_epi32(-128 * ((int32_t)a->bsums[2 * j] + a->bsums[2 * j + 1]));
                XS_UNROLL for (int m = 0; m < 4; m++) {
                    t = _mm256_dpbusd_epi32(t, lv[m], _mm256_set1_epi32(xs_ld32(q + 4 * m)));
                    t = _mm256_dpbusd_epi32(t, lv[4 + m], _mm256_set1_epi32(xs_ld32(q + 16 + 4 * m)));
                }
                is[c] = _mm256_add_epi32(is[c], _mm256_mullo_epi32(t, sc));
            }
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        XS_UNROLL for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(y[c][i].d)), _mm256_cvtepi32_ps(is[c]), acc[c]);
    }
    XS_UNROLL for (int c = 0; c < nc; c++) _mm256_storeu_ps(out[c], acc[c]);
}

static void xs_rp_cols(const mr_iq4_xs_rp8 *w, int nb, const mr_block_q8_k *const *a, float *const *y, int nc, int carry) {
    switch (nc) { /* constant column counts: the accumulators stay in registers */
    case 8: xs_rp_rows(w, nb, a, y, 8, carry); break;
    case 7: xs_rp_rows(w, nb, a, y, 7, carry); break;
    case 6: xs_rp_rows(w, nb, a, y, 6, carry); break;
    case 5: xs_rp_rows(w, nb, a, y, 5, carry); break;
    case 4: xs_rp_rows(w, nb, a, y, 4, carry); break;
    case 3: xs_rp_rows(w, nb, a, y, 3, carry); break;
    case 2: xs_rp_rows(w, nb, a, y, 2, carry); break;
    default: for (int c = 0; c < nc; c++) xs_rp_rows(w, nb, a + c, y + c, 1, carry); break;
    }
}

void mr_iq4_xs_rp8_group_avx512(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    xs_rp_cols(w, (int)(cols / MR_QK_K), (const mr_block_q8_k *const *)act, y, nc, 0);
}

/* ---- GEMM block ---- */

/* super-blocks [i0, i0 + nb) of 8 plain rows (w_row bytes apart) into the repacked layout: per
 * 32-value group j an 8 x 4 dword transpose of the rows' 16 code bytes */
static void xs_pack8(const uint8_t *w, size_t w_row, int i0, int nb, mr_iq4_xs_rp8 *o) {
    /* dword (m, r) of the group's output <- dword m of row r: rows 0..3 in lo, 4..7 in hi */
    const __m512i i0v = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i i1v = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    for (int i = 0; i < nb; i++, o++) {
        const mr_block_iq4_xs *b[8];
        for (int r = 0; r < 8; r++) {
            b[r] = (const mr_block_iq4_xs *)(w + (size_t)r * w_row) + i0 + i;
            o->d[r] = b[r]->d;
            const unsigned sh = b[r]->scales_h;
            for (int j = 0; j < 8; j++)
                o->sc[j][r] = (int8_t)((int)(((b[r]->scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | ((sh >> (2 * j)) & 3) << 4) - 32);
        }
        for (int j = 0; j < 8; j++) {
#define XS_ROW(r) _mm_loadu_si128((const __m128i *)(b[r]->qs + 16 * j))
            __m512i lo = _mm512_inserti32x4(_mm512_castsi128_si512(XS_ROW(0)), XS_ROW(1), 1);
            __m512i hi = _mm512_inserti32x4(_mm512_castsi128_si512(XS_ROW(4)), XS_ROW(5), 1);
            lo = _mm512_inserti32x4(_mm512_inserti32x4(lo, XS_ROW(2), 2), XS_ROW(3), 3);
            hi = _mm512_inserti32x4(_mm512_inserti32x4(hi, XS_ROW(6), 2), XS_ROW(7), 3);
#undef XS_ROW
            _mm512_storeu_si512(o->q[j][0], _mm512_permutex2var_epi32(lo, i0v, hi));
            _mm512_storeu_si512(o->q[j][2], _mm512_permutex2var_epi32(lo, i1v, hi));
        }
    }
}

#define XS_CHUNK 8 /* super-blocks packed at a time (8.6 KiB of stack) */
/* columns from which packing pays (768 x 2048, one thread, in cache: 4 columns 117 GFLOP/s packed vs
 * 164 row by row, 8 columns 171 vs 170-208, 32 columns 248 vs 172) */
#define XS_OTF_NC 12

/* mr_gemm_fn: from XS_OTF_NC columns on, groups of 8 rows are repacked on the fly a chunk at a time and
 * run through the repacked kernel (its sums carried across chunks in s); the other rows and
 * fewer columns row by row, each super-block decoded once for all the columns (4 at a time as
 * the 4-column kernel, the rest as vec_dot). */
void mr_gemm_iq4_xs_bs_avx512(int n, const void *w, size_t w_row, int nr, const void *vy, size_t by, int nc, float *s,
                              size_t s_col) {
    const mr_block_q8_k *a[MR_GEMM_NC];
    for (int c = 0; c < nc; c++) a[c] = (const mr_block_q8_k *)((const uint8_t *)vy + (size_t)c * by);
    const int nb = n / MR_QK_K;
    int r = 0;
    if (nc >= XS_OTF_NC) {
        mr_iq4_xs_rp8 pk[XS_CHUNK];
        for (; r + 8 <= nr; r += 8)
            for (int i0 = 0; i0 < nb; i0 += XS_CHUNK) {
                const int nbc = nb - i0 < XS_CHUNK ? nb - i0 : XS_CHUNK;
                xs_pack8((const uint8_t *)w + (size_t)r * w_row, w_row, i0, nbc, pk);
                for (int c0 = 0; c0 < nc; c0 += 8) {
                    const int ncc = nc - c0 < 8 ? nc - c0 : 8;
                    const mr_block_q8_k *ac[8];
                    float *yc[8];
                    for (int c = 0; c < ncc; c++) {
                        ac[c] = a[c0 + c] + i0;
                        yc[c] = s + (size_t)(c0 + c) * s_col + r;
                    }
                    xs_rp_cols(pk, nbc, ac, yc, ncc, i0 > 0);
                }
            }
    }
    const __m512i lut = xs_lut_abs();
    const int nc4 = nc & ~3;
    for (; r < nr; r++) {
        const mr_block_iq4_xs *x = (const mr_block_iq4_xs *)((const uint8_t *)w + (size_t)r * w_row);
        __m128 acc4[MR_GEMM_NC / 4];
        float acc1[3] = {0, 0, 0};
        for (int c = 0; c < nc4; c += 4) acc4[c / 4] = _mm_setzero_ps();
        for (int i = 0; i < nb; i++) {
            xs_dec o;
            xs_decode(&x[i], lut, &o);
            for (int c = 0; c < nc4; c += 4) acc4[c / 4] = xs_sb4(&o, a + c, i, acc4[c / 4]);
            for (int c = nc4; c < nc; c++)
                acc1[c - nc4] = __builtin_fmaf(o.d * a[c][i].d, (float)_mm512_reduce_add_epi32(xs_isum_lanes(&o, a[c][i].qs)),
                                               acc1[c - nc4]);
        }
        float t[4];
        for (int c = 0; c < nc4; c += 4) {
            _mm_storeu_ps(t, acc4[c / 4]);
            for (int k = 0; k < 4; k++) s[(size_t)(c + k) * s_col + r] = t[k];
        }
        for (int c = nc4; c < nc; c++) s[(size_t)c * s_col + r] = acc1[c - nc4];
    }
}
