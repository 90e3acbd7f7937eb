/* x86 K-quant kernels with per-super-block integer numerics and 8-row repacked layouts, written
 * once over quant_kern_x86.h's helpers (include that first, with KX_VNNI set). Today compiled into
 * the AVX2 table (quant_avx2.c).
 *
 * Numerics, Q4_K x Q8_K (every kernel of the table for the type: vec_dot, 4-column, repacked): the
 * float order of ggml-cpu's x86 Q4_K dot, which made the golden logits (the scalar reference in
 * quant_ref.c does the same). Per 256-value super-block:
 *     lane k (0..7) = sum_j sc_j * (products 4k..4k+3 of sub-block j)     (exact int32)
 *     acc[k] = fmaf(dy * d, (float)lane k, acc[k])
 *     mins t (0..3) = m_2t * S_2t + m_2t+1 * S_2t+1  (S_j the activation sum of sub-block j, exact)
 *     accm[t] = fmaf(-dy * dmin, (float)mins t, accm[t])
 * and at the end ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)) + ((accm0+accm2)+(accm1+accm3)).
 * (One exact int32 per super-block and two fmas is cheaper but lands on the other side of a near tie
 * in tests/golden/families' deepseek2-tiny-q4_k_m-s1: KL 0.0135 at one row.) A repacked kernel with
 * one row per 32-bit lane keeps the 8 + 4 accumulators per row as 12 vectors over the 8 rows and
 * adds them in the same tree, vertically, so a batch equals one token.
 *
 * Repacked Q4_K (8 rows): per group and super-block, fp16 d[8] and dmin[8], the decoded 6-bit
 * scales sc[j][row] and mins m[j][row] as bytes, then for each 64-value chunk k eight 32-byte
 * vectors P_km (m = 0..7) whose 32-bit lane r holds bytes 32k+4m..32k+4m+3 of row r's nibbles (low
 * nibbles: sub-block 2k values 4m..4m+3; high: sub-block 2k+1). vpmaddubsw with the broadcast
 * activation bytes gives int16 pairs, one vpmaddwd with the rows' scales as int16 pairs widens and
 * scales them: lane m of sub-blocks 2k and 2k+1 for the 8 rows.
 * The repacked kernels read the Q8_K activation rows as they are.
 *
 * Numerics, Q6_K x Q8_K: ggml-cpu's x86 order too: per super-block, lane k (0..7) = sum over the 8
 * chunks of 32 values of sc * ((q - 32) . y over values 4k..4k+3 of the chunk) (exact int32, q in
 * 0..63, sc the chunk's sub-block of 16), acc[k] = fmaf(dy * d, (float)lane k, acc[k]); the 8 lanes
 * added in the tree above.
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

/* the reference's lane trees: 8 lanes ((0+4)+(2+6)) + ((1+5)+(3+7)), 4 lanes (0+2)+(1+3) */
KX_INLINE float kr_hsum8(__m256 v) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}
KX_INLINE float kr_hsum4(__m128 r) {
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

KX_INLINE void kr_q4_k(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const kb_q8_k *y[4];
    __m256 acc[4];
    __m128 accm[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_k, c);
        acc[c] = _mm256_setzero_ps();
        accm[c] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int i = 0; i < n / 256; i++) {
        const kb_q4_k *b = (const kb_q4_k *)w + i;
        const __m128i sm = kx_scales_k4(b->scales);
        const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
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
            const __m256i bs = kx_load(y[c][i].bsums);
            const __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            accm[c] = _mm_fmadd_ps(_mm_set1_ps(-y[c][i].d * kx_h2f(b->dmin)), _mm_cvtepi32_ps(_mm_madd_epi16(mins, s8)), accm[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c][i].d * kx_h2f(b->d)), _mm256_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kr_hsum8(acc[c]) + kr_hsum4(accm[c]);
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

/* nc columns through one group of 8 rows: acc[c][m] lane r = row r's reference lane m for column
 * c, accm[c][t] its min lane t; the unpacked nibbles are shared by the columns */
KX_INLINE void kr_q4k8_rows(const kr_q4k8 *w, int nb, const kb_q8_k *const *y, float *const *out, const int nc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4][8], accm[4][4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        KX_UNROLL for (int m = 0; m < 8; m++) acc[c][m] = _mm256_setzero_ps();
        KX_UNROLL for (int t = 0; t < 4; t++) accm[c][t] = _mm256_setzero_ps();
    }
    for (int i = 0; i < nb; i++) {
        const kr_q4k8 *b = &w[i];
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->dmin));
        KX_UNROLL for (int t = 0; t < 4; t++) {
            const __m256i mp = kr_pair8ab(b->m[2 * t], b->m[2 * t + 1]);
            KX_UNROLL for (int c = 0; c < nc; c++) {
                const int16_t *bs = y[c][i].bsums + 4 * t;
                const int32_t ys = (int32_t)(uint16_t)(int16_t)(bs[0] + bs[1]) | (int32_t)((uint32_t)(uint16_t)(int16_t)(bs[2] + bs[3]) << 16);
                accm[c][t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-y[c][i].d), dmw),
                                             _mm256_cvtepi32_ps(_mm256_madd_epi16(mp, _mm256_set1_epi32(ys))), accm[c][t]);
            }
        }
        __m256i sl[4], sh[4];
        KX_UNROLL for (int k = 0; k < 4; k++) { sl[k] = kr_pair8(b->sc[2 * k]); sh[k] = kr_pair8(b->sc[2 * k + 1]); }
        for (int m = 0; m < 8; m++) {
            __m256i lane[4];
            KX_UNROLL for (int c = 0; c < nc; c++) lane[c] = _mm256_setzero_si256();
            KX_UNROLL for (int k = 0; k < 4; k++) {
                const __m256i p = kx_load(b->q[k][m]);
                const __m256i lo = _mm256_and_si256(p, m4), hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), m4);
                KX_UNROLL for (int c = 0; c < nc; c++) {
                    int32_t y0, y1;
                    memcpy(&y0, y[c][i].qs + 64 * k + 4 * m, 4);
                    memcpy(&y1, y[c][i].qs + 64 * k + 32 + 4 * m, 4);
                    lane[c] = kx_madd(lane[c], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(y0)), sl[k]);
                    lane[c] = kx_madd(lane[c], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(y1)), sh[k]);
                }
            }
            KX_UNROLL for (int c = 0; c < nc; c++)
                acc[c][m] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(y[c][i].d), dw), _mm256_cvtepi32_ps(lane[c]), acc[c][m]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256 r0 = _mm256_add_ps(acc[c][4], acc[c][0]), r1 = _mm256_add_ps(acc[c][5], acc[c][1]);
        const __m256 r2 = _mm256_add_ps(acc[c][6], acc[c][2]), r3 = _mm256_add_ps(acc[c][7], acc[c][3]);
        const __m256 mm = _mm256_add_ps(_mm256_add_ps(accm[c][0], accm[c][2]), _mm256_add_ps(accm[c][1], accm[c][3]));
        _mm256_storeu_ps(out[c], _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3)), mm));
    }
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
    __m256 acc[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = KX_Y(kb_q8_k, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    for (int i = 0; i < n / 256; i++) {
        const kb_q6_k *b = (const kb_q6_k *)w + i;
        const kx_pairs sp = kx_pair_prep(_mm_loadu_si128((const __m128i *)b->scales));
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
                KX_UNROLL for (int c = 0; c < nc; c++) {
                    const __m256i yv = kx_load(y[c][i].qs + 128 * j + 32 * m);
                    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(a[m], yv), _mm256_maddubs_epi16(k32, yv));
                    isum[c] = kx_madd(isum[c], p, scv);
                }
            }
        }
        KX_UNROLL for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c][i].d * kx_h2f(b->d)), _mm256_cvtepi32_ps(isum[c]), acc[c]);
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kr_hsum8(acc[c]);
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

/* nc columns through one group of 8 rows: acc[c][m] lane r = row r's reference lane m (values
 * 4m..4m+3 of every 32-value chunk) for column c. The unpacked values are shared by the columns; the
 * accumulators are touched once per super-block and lane, so they may live in memory. */
KX_INLINE void kr_q6k8_rows(const kr_q6k8 *w, int nb, const kb_q8_k *const *y, float *const *out, const int nc) {
    const __m256i k32 = _mm256_set1_epi8(32);
    __m256 acc[4][8];
    KX_UNROLL for (int c = 0; c < nc; c++) KX_UNROLL for (int m = 0; m < 8; m++) acc[c][m] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const kr_q6k8 *b = &w[i];
        __m256i scv[16];
        KX_UNROLL for (int k = 0; k < 16; k++) scv[k] = kr_pair8ab_s(b->sc[k], b->sc[k]);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        for (int m = 0; m < 8; m++) {
            __m256i lane[4];
            KX_UNROLL for (int c = 0; c < nc; c++) lane[c] = _mm256_setzero_si256();
            KX_UNROLL for (int j = 0; j < 2; j++)
                KX_UNROLL for (int v = 0; v < 4; v++) {
                    const __m256i vals = kr_q6_vals(b, j, v, m), sc = scv[8 * j + 2 * v + m / 4];
                    KX_UNROLL for (int c = 0; c < nc; c++) {
                        int32_t y4;
                        memcpy(&y4, y[c][i].qs + 128 * j + 32 * v + 4 * m, 4);
                        const __m256i yb = _mm256_set1_epi32(y4);
                        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(vals, yb), _mm256_maddubs_epi16(k32, yb));
                        lane[c] = kx_madd(lane[c], p, sc);
                    }
                }
            KX_UNROLL for (int c = 0; c < nc; c++)
                acc[c][m] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(y[c][i].d), dw), _mm256_cvtepi32_ps(lane[c]), acc[c][m]);
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) {
        const __m256 r0 = _mm256_add_ps(acc[c][4], acc[c][0]), r1 = _mm256_add_ps(acc[c][5], acc[c][1]);
        const __m256 r2 = _mm256_add_ps(acc[c][6], acc[c][2]), r3 = _mm256_add_ps(acc[c][7], acc[c][3]);
        _mm256_storeu_ps(out[c], _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3)));
    }
}

static void kr_q6_k_rp8_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    const int nb = (int)(cols / 256);
    const kb_q8_k *const *a = (const kb_q8_k *const *)act;
    int c = 0;
    for (; c + 4 <= nc; c += 4) kr_q6k8_rows(w, nb, a + c, y + c, 4);
    for (; c < nc; c++) kr_q6k8_rows(w, nb, a + c, y + c, 1);
}

#endif
