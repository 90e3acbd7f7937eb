/* x86 K-quant kernels with per-super-block integer numerics and 8-row repacked layouts, written
 * once over quant_kern_x86.h's helpers (include that first, with KX_VNNI set). Today compiled into
 * the AVX2 table (quant_avx2.c).
 *
 * Numerics, Q4_K x Q8_K (every kernel of the table for the type: vec_dot, 4-column, repacked):
 *   acc = 0; for each 256-value super-block in order:
 *       isum = sum_j sc_j * (q_j . y_j)          (exact int32; j = the 8 sub-blocks of 32)
 *       imin = sum_j m_j * (bsum_2j + bsum_2j+1) (exact int32)
 *       acc = fmaf(d * dy, (float)isum, acc); acc = fmaf(-(dmin * dy), (float)imin, acc)
 * The per-row float work is two fmas per super-block, so a repacked kernel with one row per
 * 32-bit lane does the same operations for 8 rows at once, and a batch equals one token.
 *
 * Repacked Q4_K (8 rows): per group and super-block, fp16 d[8] and dmin[8], the decoded 6-bit
 * scales sc[j][row] and mins m[j][row] as bytes, then for each 64-value chunk k eight 32-byte
 * vectors P_km (m = 0..7) whose 32-bit lane r holds bytes 32k+4m..32k+4m+3 of row r's nibbles (low
 * nibbles: sub-block 2k values 4m..4m+3; high: sub-block 2k+1). vpmaddubsw with the broadcast
 * activation bytes gives int16 pairs; the 8 of a sub-block are added as int16 (|sum| <= 8 x 2 x 15
 * x 128 = 30720, exact), and one vpmaddwd with the rows' scales as int16 pairs widens and scales.
 * The repacked kernels read the Q8_K activation rows as they are.
 *
 * Numerics, Q6_K x Q8_K: per super-block t = sum_s sc_s * (q_s . y_s) - 32 * sum_s sc_s * bsum_s
 * (exact int32, q in 0..63, s = the 16 sub-blocks of 16), acc = fmaf(d * dy, (float)t, acc).
 * Repacked Q6_K (8 rows, the size of the plain blocks): fp16 d[8], the scales sc[s][row], then the
 * low-nibble bytes ql and the 2-bit bytes qh in 4-byte row lanes (ql[j][t][m]: bytes 64j+32t+4m..+3,
 * qh[j][m]: bytes 32j+4m..+3); unpacking one (j, m) gives the 6-bit values of 4 x 4 consecutive
 * values of every row. Two vpmaddubsw (|sum| <= 2 x 2 x 63 x 128 = 32256) go into int16 before
 * each vpmaddwd with the rows' scales. */
#ifndef MR_QUANT_RP_X86_H
#define MR_QUANT_RP_X86_H

#define MR_Q4_K_RP8_BLOCK_BYTES 1184 /* per group of 8 rows and super-block */
#define MR_Q6_K_RP8_BLOCK_BYTES 1680

/* ---------------------------------------------------------------------------------- Q4_K */

/* isum and imin of one super-block for nc columns: ints[c] = isum, ints[4 + c] = imin */
KX_INLINE void kr_q4k_ints(const kb_q4_k *b, const kb_q8_k *const *y, int i, int *ints, const int nc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m128i sm = kx_scales_k4(b->scales);
    const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m128i m8 = _mm_srli_si128(sm, 8);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    __m256i isum[4];
    KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = _mm256_setzero_si256();
    KX_UNROLL for (int k = 0; k < 4; k++) {
        const __m256i q = kx_load(b->qs + 32 * k);
        const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i slo = _mm256_shuffle_epi8(sc2, kx_load(kx_bcast_shuf[2 * k]));
        const __m256i shi = _mm256_shuffle_epi8(sc2, kx_load(kx_bcast_shuf[2 * k + 1]));
        KX_UNROLL for (int c = 0; c < nc; c++) {
            const int8_t *yq = y[c][i].qs + 64 * k;
            isum[c] = kx_madd(isum[c], _mm256_maddubs_epi16(lo, kx_load(yq)), slo);
            isum[c] = kx_madd(isum[c], _mm256_maddubs_epi16(hi, kx_load(yq + 32)), shi);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256i ms = _mm256_madd_epi16(kx_load(y[c][i].bsums), mins16);
        /* both sums reduced together: [isum lanes + ..., imin lanes + ...] (exact integer adds) */
        const __m256i h = _mm256_hadd_epi32(isum[c], ms);
        const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128i u = _mm_hadd_epi32(t, t);
        ints[c] = _mm_cvtsi128_si32(u);
        ints[4 + c] = _mm_extract_epi32(u, 1);
    }
}

KX_INLINE void kr_q4_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const kb_q8_k *y[4];
    KX_UNROLL for (int c = 0; c < nc; c++) y[c] = KX_Y(kb_q8_k, c);
    if (nc == 1) {
        float acc = 0.0f;
        for (int i = 0; i < n / 256; i++) {
            const kb_q4_k *b = (const kb_q4_k *)w + i;
            int ints[8];
            kr_q4k_ints(b, y, i, ints, 1);
            acc = __builtin_fmaf(kx_h2f(b->d) * y[0][i].d, (float)ints[0], acc);
            acc = __builtin_fmaf(-(kx_h2f(b->dmin) * y[0][i].d), (float)ints[4], acc);
        }
        s[0] = acc;
        return;
    }
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < n / 256; i++) {
        const kb_q4_k *b = (const kb_q4_k *)w + i;
        _Alignas(16) int ints[8];
        kr_q4k_ints(b, y, i, ints, 4);
        const __m128 dy = _mm_setr_ps(y[0][i].d, y[1][i].d, y[2][i].d, y[3][i].d);
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(kx_h2f(b->d)), dy), _mm_cvtepi32_ps(_mm_load_si128((const __m128i *)ints)), acc);
        acc = _mm_fnmadd_ps(_mm_mul_ps(_mm_set1_ps(kx_h2f(b->dmin)), dy), _mm_cvtepi32_ps(_mm_load_si128((const __m128i *)ints + 1)),
                            acc);
    }
    _mm_storeu_ps(s, acc);
}

typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[8][8], m[8][8];    /* [sub-block][row] */
    uint8_t q[4][8][32];          /* [chunk][m][row lanes] */
} kr_q4k8;
_Static_assert(sizeof(kr_q4k8) == MR_Q4_K_RP8_BLOCK_BYTES, "repacked q4_K super-block (8 rows x 256 values)");

static void kr_q4_k_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    const int64_t nb = cols / 256;
    const kb_q4_k *w = src;
    kr_q4k8 *out = dst;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t i = 0; i < nb; i++) {
            kr_q4k8 *o = &out[g * nb + i];
            for (int r = 0; r < 8; r++) {
                const kb_q4_k *b = &w[(8 * g + r) * nb + i];
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

/* 8 bytes (one per row) as int16 pairs (v, v) in the 8 int32 lanes */
KX_INLINE __m256i kr_pair8(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}
/* bytes a[row] and b[row] as the int16 pair (a, b) per lane */
KX_INLINE __m256i kr_pair8ab(const uint8_t *a, const uint8_t *b) {
    return _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)a)),
                           _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)b)), 16));
}

KX_INLINE void kr_q4k8_rows(const kr_q4k8 *w, int nb, const kb_q8_k *const *y, float *const *out, const int nc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const kr_q4k8 *b = &w[i];
        __m256i isum[4], imin[4];
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = imin[c] = _mm256_setzero_si256();
        KX_UNROLL for (int k = 0; k < 4; k++) {
            __m256i slo[4], shi[4];
            KX_UNROLL for (int c = 0; c < nc; c++) slo[c] = shi[c] = _mm256_setzero_si256();
            KX_UNROLL for (int m = 0; m < 8; m++) {
                const __m256i p = kx_load(b->q[k][m]);
                const __m256i lo = _mm256_and_si256(p, m4), hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), m4);
                KX_UNROLL for (int c = 0; c < nc; c++) {
                    int32_t y0, y1;
                    memcpy(&y0, y[c][i].qs + 64 * k + 4 * m, 4);
                    memcpy(&y1, y[c][i].qs + 64 * k + 32 + 4 * m, 4);
                    slo[c] = _mm256_add_epi16(slo[c], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(y0)));
                    shi[c] = _mm256_add_epi16(shi[c], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(y1)));
                }
            }
            const __m256i sl = kr_pair8(b->sc[2 * k]), sh = kr_pair8(b->sc[2 * k + 1]);
            const __m256i mp = kr_pair8ab(b->m[2 * k], b->m[2 * k + 1]);
            KX_UNROLL for (int c = 0; c < nc; c++) {
                isum[c] = kx_madd(kx_madd(isum[c], slo[c], sl), shi[c], sh);
                const int16_t *bs = y[c][i].bsums + 4 * k;
                const int32_t ys = (int32_t)(uint16_t)(int16_t)(bs[0] + bs[1]) | (int32_t)((uint32_t)(uint16_t)(int16_t)(bs[2] + bs[3]) << 16);
                imin[c] = kx_madd(imin[c], mp, _mm256_set1_epi32(ys));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->dmin));
        KX_UNROLL for (int c = 0; c < nc; c++) {
            const __m256 dy = _mm256_set1_ps(y[c][i].d);
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dy), _mm256_cvtepi32_ps(imin[c]), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) _mm256_storeu_ps(out[c], acc[c]);
}

static void kr_q4_k_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 256);
    const kb_q8_k *const *a = (const kb_q8_k *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) kr_q4k8_rows(w, nb, a + c, y + c, 4);
    for (; c < nc; c++) kr_q4k8_rows(w, nb, a + c, y + c, 1);
}

/* ---------------------------------------------------------------------------------- Q6_K */

KX_INLINE void kr_q6_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const kb_q8_k *y[4];
    KX_UNROLL for (int c = 0; c < nc; c++) y[c] = KX_Y(kb_q8_k, c);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    float acc1 = 0.0f;
    __m128 acc4 = _mm_setzero_ps();
    for (int i = 0; i < n / 256; i++) {
        const kb_q6_k *b = (const kb_q6_k *)w + i;
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)b->scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const kx_pairs sp = kx_pair_prep(sc8);
        __m256i isum[4];
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = _mm256_setzero_si256();
        KX_UNROLL for (int j = 0; j < 2; j++) {
            const __m256i l0 = kx_load(b->ql + 64 * j), l1 = kx_load(b->ql + 64 * j + 32);
            const __m256i h = kx_load(b->qh + 32 * j);
            __m256i a[4];
            a[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            a[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            a[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
            a[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
            KX_UNROLL for (int m = 0; m < 4; m++) {
                const __m256i scv = kx_pair_scales(sp, 4 * j + m);
                KX_UNROLL for (int c = 0; c < nc; c++)
                    isum[c] = kx_madd(isum[c], _mm256_maddubs_epi16(a[m], kx_load(y[c][i].qs + 128 * j + 32 * m)), scv);
            }
        }
        int t[4];
        KX_UNROLL for (int c = 0; c < nc; c++) {
            const __m256i bias = _mm256_madd_epi16(kx_load(y[c][i].bsums), sc16);
            const __m256i v = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(bias, 5));
            __m128i r = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
            r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
            t[c] = _mm_cvtsi128_si32(r);
        }
        const float d = kx_h2f(b->d);
        if (nc == 1) acc1 = __builtin_fmaf(d * y[0][i].d, (float)t[0], acc1);
        else {
            const __m128 dy = _mm_setr_ps(y[0][i].d, y[1][i].d, y[2][i].d, y[3][i].d);
            acc4 = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(d), dy), _mm_cvtepi32_ps(_mm_setr_epi32(t[0], t[1], t[2], t[3])), acc4);
        }
    }
    if (nc == 1) s[0] = acc1;
    else _mm_storeu_ps(s, acc4);
}

typedef struct {
    uint16_t d[8];
    int8_t sc[16][8];             /* [sub-block][row] */
    uint8_t ql[2][2][8][32];      /* [half j][t][m][row lanes] */
    uint8_t qh[2][8][32];         /* [half j][m][row lanes] */
} kr_q6k8;
_Static_assert(sizeof(kr_q6k8) == MR_Q6_K_RP8_BLOCK_BYTES, "repacked q6_K super-block (8 rows x 256 values)");

static void kr_q6_k_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    const int64_t nb = cols / 256;
    const kb_q6_k *w = src;
    kr_q6k8 *out = dst;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t i = 0; i < nb; i++) {
            kr_q6k8 *o = &out[g * nb + i];
            for (int r = 0; r < 8; r++) {
                const kb_q6_k *b = &w[(8 * g + r) * nb + i];
                o->d[r] = b->d;
                for (int k = 0; k < 16; k++) o->sc[k][r] = b->scales[k];
                for (int j = 0; j < 2; j++)
                    for (int m = 0; m < 8; m++) {
                        for (int t = 0; t < 2; t++) memcpy(&o->ql[j][t][m][4 * r], b->ql + 64 * j + 32 * t + 4 * m, 4);
                        memcpy(&o->qh[j][m][4 * r], b->qh + 32 * j + 4 * m, 4);
                    }
            }
        }
}

/* signed bytes a[row] and b[row] as the int16 pair (a, b) per lane */
KX_INLINE __m256i kr_pair8ab_s(const int8_t *a, const int8_t *b) {
    const __m256i va = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)a));
    const __m256i vb = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)b));
    return _mm256_or_si256(_mm256_and_si256(va, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(vb, 16));
}

/* the 6-bit values of kind v (0..3: values 32v..32v+31 of the half) for 4-byte group m of half j */
KX_INLINE __m256i kr_q6_vals(const kr_q6k8 *b, int j, int v, int m) {
    const __m256i l = kx_load(b->ql[j][v & 1][m]), h = kx_load(b->qh[j][m]);
    const __m256i lo = v < 2 ? _mm256_and_si256(l, _mm256_set1_epi8(0x0f)) : _mm256_and_si256(_mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0f));
    const __m256i hb = v == 0 ? _mm256_slli_epi16(h, 4) : v == 1 ? _mm256_slli_epi16(h, 2) : v == 2 ? h : _mm256_srli_epi16(h, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
}

KX_INLINE void kr_q6k8_rows(const kr_q6k8 *w, int nb, const kb_q8_k *const *y, float *const *out, const int nc) {
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const kr_q6k8 *b = &w[i];
        __m256i isum[4];
        KX_UNROLL for (int c = 0; c < nc; c++) isum[c] = _mm256_setzero_si256();
        KX_UNROLL for (int j = 0; j < 2; j++)
            KX_UNROLL for (int v = 0; v < 4; v++)
                KX_UNROLL for (int q = 0; q < 4; q++) { /* m = 2q, 2q+1: half of sub-block 8j + 2v + q / 2 */
                    const int sb = 8 * j + 2 * v + q / 2;
                    const __m256i va = kr_q6_vals(b, j, v, 2 * q), vb = kr_q6_vals(b, j, v, 2 * q + 1);
                    const __m256i scv = kr_pair8ab_s(b->sc[sb], b->sc[sb]);
                    KX_UNROLL for (int c = 0; c < nc; c++) {
                        const int8_t *yq = y[c][i].qs + 128 * j + 32 * v + 8 * q;
                        int32_t y0, y1;
                        memcpy(&y0, yq, 4);
                        memcpy(&y1, yq + 4, 4);
                        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(va, _mm256_set1_epi32(y0)),
                                                           _mm256_maddubs_epi16(vb, _mm256_set1_epi32(y1)));
                        isum[c] = kx_madd(isum[c], p, scv);
                    }
                }
        /* bias: sum_s sc_s * bsum_s per row, by pairs of sub-blocks */
        KX_UNROLL for (int c = 0; c < nc; c++) {
            __m256i bias = _mm256_setzero_si256();
            KX_UNROLL for (int k = 0; k < 8; k++) {
                int32_t bp;
                memcpy(&bp, y[c][i].bsums + 2 * k, 4);
                bias = kx_madd(bias, kr_pair8ab_s(b->sc[2 * k], b->sc[2 * k + 1]), _mm256_set1_epi32(bp));
            }
            const __m256i t = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(bias, 5));
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d)), _mm256_set1_ps(y[c][i].d)),
                                     _mm256_cvtepi32_ps(t), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) _mm256_storeu_ps(out[c], acc[c]);
}

static void kr_q6_k_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 256);
    const kb_q8_k *const *a = (const kb_q8_k *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) kr_q6k8_rows(w, nb, a + c, y + c, 4);
    for (; c < nc; c++) kr_q6k8_rows(w, nb, a + c, y + c, 1);
}

#endif
