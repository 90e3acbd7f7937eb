/* Q4_K x Q8_K under AVX-512 VNNI: a repacked layout in groups of 16 rows (one row per 32-bit lane
 * of a 512-bit vector) whose kernel has the numerics of the AVX-512 vec_dot (quant_kern_x86.h's
 * kx_q45k), so resident (repacked) and paged (plain) rows, a batch and one token give the same bits:
 *   per row 8 float lanes L; per super-block, with L's integer sum
 *     isum_L = sum_j sc_j * (products 4L..4L+3 of sub-block j)     (exact int32)
 *     acc_L = fmaf(d * dy, (float)isum_L, acc_L)
 *     acc_L = fmaf(-(dmin * dy), (float)(m_L * S_L), acc_L)       (S_L the activation sum of sub-block L)
 *   and at the end ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)).
 *
 * Layout, per group and super-block: fp16 d[16] and dmin[16], the decoded 6-bit scales sc[j][row]
 * and mins m[j][row] as bytes, then for each 64-value chunk k eight 64-byte vectors P_km (m = 0..7)
 * whose 32-bit lane r holds bytes 32k+4m..32k+4m+3 of row r's nibbles (low nibbles: sub-block 2k
 * values 4m..4m+3; high: sub-block 2k+1). Per P_km one AND and one shift+AND unpack 16 rows x 8
 * values, vpmaddubsw with the broadcast activation bytes gives int16 pairs (|pair| <= 2 x 15 x 128),
 * vpdpwssd by the rows' scales as int16 pairs adds them into lane m of the 16 rows. 148 bytes per
 * row and super-block (the plain block is 144); the kernel reads the Q8_K rows as they are. */
#define KX_VNNI 1
#include "quant/quant_kern_x86.h"
#include "quant/quant_simd.h"

typedef struct {
    uint16_t d[16], dmin[16];
    uint8_t sc[8][16], m[8][16];  /* [sub-block][row] */
    uint8_t q[4][8][64];          /* [chunk][m][row lanes] */
} kq_q4k16;
_Static_assert(sizeof(kq_q4k16) == MR_Q4_K_RP16_BLOCK_BYTES, "repacked q4_K super-block (16 rows x 256 values)");

void mr_q4_k_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    const int64_t nb = cols / 256;
    const kb_q4_k *w = src;
    kq_q4k16 *out = dst;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t i = 0; i < nb; i++) {
            kq_q4k16 *o = &out[g * nb + i];
            for (int r = 0; r < 16; r++) {
                const kb_q4_k *b = &w[(16 * g + r) * nb + i];
                uint8_t sm[16];
                _mm_storeu_si128((__m128i *)sm, kx_scales_k4(b->scales));
                o->d[r] = b->d;
                o->dmin[r] = b->dmin;
                for (int j = 0; j < 8; j++) { o->sc[j][r] = sm[j]; o->m[j][r] = sm[8 + j]; }
                for (int k = 0; k < 4; k++)
                    for (int m = 0; m < 8; m++) memcpy(&o->q[k][m][4 * r], b->qs + 32 * k + 4 * m, 4);
            }
        }
}

/* bytes a[row] and b[row] (16 rows) as the int16 pair (a, b) per 32-bit lane */
KX_INLINE __m512i kq_pair16ab(const uint8_t *a, const uint8_t *b) {
    return _mm512_or_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)a)),
                           _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b)), 16));
}
KX_INLINE __m512i kq_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* nc columns through one group of 16 rows: acc[c][m] lane r = row r's lane m for column c; the
 * unpacked nibbles are shared by the columns, the low and high nibbles' sums are two integer chains
 * (exact, so their order does not matter) */
KX_INLINE void kq_rows(const kq_q4k16 *w, int nb, const kb_q8_k *const *y, float *const *out, const int nc) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[4][8];
    KX_UNROLL for (int c = 0; c < nc; c++) KX_UNROLL for (int m = 0; m < 8; m++) acc[c][m] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const kq_q4k16 *b = &w[i];
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));
        __m512i sl[4], sh[4];
        KX_UNROLL for (int k = 0; k < 4; k++) {
            sl[k] = kq_pair16ab(b->sc[2 * k], b->sc[2 * k]);
            sh[k] = kq_pair16ab(b->sc[2 * k + 1], b->sc[2 * k + 1]);
        }
        for (int m = 0; m < 8; m++) {
            __m512i la[4], lb[4];
            KX_UNROLL for (int c = 0; c < nc; c++) la[c] = lb[c] = _mm512_setzero_si512();
            KX_UNROLL for (int k = 0; k < 4; k++) {
                const __m512i p = _mm512_loadu_si512((const void *)b->q[k][m]);
                const __m512i lo = _mm512_and_si512(p, m4), hi = _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);
                KX_UNROLL for (int c = 0; c < nc; c++) {
                    const int8_t *yq = y[c][i].qs + 64 * k + 4 * m;
                    la[c] = _mm512_dpwssd_epi32(la[c], _mm512_maddubs_epi16(lo, kq_bcast4(yq)), sl[k]);
                    lb[c] = _mm512_dpwssd_epi32(lb[c], _mm512_maddubs_epi16(hi, kq_bcast4(yq + 32)), sh[k]);
                }
            }
            /* m_m * (bsum 2m + bsum 2m+1): the int16 pair of bsums times the row's min twice */
            const __m512i mp = kq_pair16ab(b->m[m], b->m[m]);
            KX_UNROLL for (int c = 0; c < nc; c++) {
                const __m512 dy = _mm512_set1_ps(y[c][i].d);
                int32_t bs2;
                memcpy(&bs2, y[c][i].bsums + 2 * m, 4);
                const __m512i ms = _mm512_madd_epi16(mp, _mm512_set1_epi32(bs2));
                acc[c][m] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(_mm512_add_epi32(la[c], lb[c])), acc[c][m]);
                acc[c][m] = _mm512_fnmadd_ps(_mm512_mul_ps(dmw, dy), _mm512_cvtepi32_ps(ms), acc[c][m]);
            }
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m512 r0 = _mm512_add_ps(acc[c][0], acc[c][4]), r1 = _mm512_add_ps(acc[c][1], acc[c][5]);
        const __m512 r2 = _mm512_add_ps(acc[c][2], acc[c][6]), r3 = _mm512_add_ps(acc[c][3], acc[c][7]);
        _mm512_storeu_ps(out[c], _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3)));
    }
}

void mr_q4_k_rp16_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 256);
    const kb_q8_k *const *a = (const kb_q8_k *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) kq_rows(w, nb, a + c, y + c, 4);
    for (; c + 2 <= nc; c += 2) kq_rows(w, nb, a + c, y + c, 2);
    for (; c < nc; c++) kq_rows(w, nb, a + c, y + c, 1);
}
