/* SIMD vec_dot kernels against the scalar reference of the same type, for every ISA this CPU has:
 * |simd - ref| <= 1e-5 * sum_i |w_i| |x_i| on random rows (and on saturation corners), and the
 * 4-column and GEMM kernels equal vec_dot bit for bit; some types equal the scalar reference bit for bit. */
#include "test.h"
#include "simd_data.h"
#include "quant/quant_simd.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* types whose SIMD kernels must exist in every ISA of the build's family: x86 (issue 3; the IQ
 * types and MXFP4 are checked in test_quant_iq.c), AArch64 (issue 12: the types MoE GGUFs use) */
#if MR_ARCH_ARM64
static const int required[] = {MR_TYPE_F32, MR_TYPE_F16, MR_TYPE_Q8_0, MR_TYPE_Q4_0, MR_TYPE_Q2_K, MR_TYPE_Q4_K,
                               MR_TYPE_Q5_K, MR_TYPE_Q6_K, MR_TYPE_IQ4_NL, MR_TYPE_IQ4_XS, MR_TYPE_MXFP4,
                               MR_TYPE_IQ3_S, MR_TYPE_IQ2_XXS};
#else
static const int required[] = {MR_TYPE_F32, MR_TYPE_F16, MR_TYPE_BF16, MR_TYPE_Q8_0, MR_TYPE_Q4_0, MR_TYPE_Q4_1,
                               MR_TYPE_Q5_0, MR_TYPE_Q5_1, MR_TYPE_Q2_K, MR_TYPE_Q3_K, MR_TYPE_Q4_K, MR_TYPE_Q5_K,
                               MR_TYPE_Q6_K, MR_TYPE_NVFP4};
#endif

/* types whose kernels of this build's SIMD ISAs run the scalar reference's float operations in its
 * order (golden near ties depend on it: quant_ref.c, quant_kern_arm.h): equal bit for bit */
#if MR_ARCH_ARM64
static const int same_bits[] = {MR_TYPE_Q8_0, MR_TYPE_Q4_K, MR_TYPE_Q2_0};
#else
static const int same_bits[] = {MR_TYPE_Q2_0};
#endif
static int is_same_bits(int type) {
    for (size_t i = 0; i < sizeof same_bits / sizeof same_bits[0]; i++)
        if (same_bits[i] == type) return 1;
    return 0;
}

static int sizes_for(int bs, int *out) {
    static const int f[] = {1, 7, 16, 17, 31, 32, 33, 63, 64, 65, 97, 172, 1000, 4096, 4099};
    int k = 0;
    if (bs == 1) {
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) out[k++] = f[i];
    } else {
        static const int mult[] = {1, 2, 3, 5, 8, 11, 16};
        for (size_t i = 0; i < sizeof mult / sizeof mult[0]; i++) out[k++] = bs * mult[i];
        out[k++] = 4096 - 4096 % bs;
        out[k++] = 14336 - 14336 % bs;
    }
    return k;
}

static mr_vec_dot_x4_fn x4_of(int type, int isa) {
    const mr_kern *k = mr_kern_isa(type, isa);
    return k ? k->dot4 : NULL;
}
/* the prepared 4-column kernel of an ISA's table, with its partner's prep */
static mr_vec_dot_x4_fn x4p_of(int type, int isa) {
    const mr_kern *k = mr_kern_isa(type, isa);
    return k ? k->dot4p : NULL;
}

static void test_tables_cover_required_types(void) {
    for (int isa = MR_ISA_SCALAR + 1; isa < MR_ISA_COUNT; isa++)
        if (mr_isa_available(isa))
        for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
            int t = required[i];
            CHECK(mr_type_vec_dot_isa(t, isa) != NULL, "%s has no %s vec_dot", mr_type_name(t), mr_isa_name(isa));
            CHECK(x4_of(t, isa) != NULL, "%s has no %s 4-column kernel", mr_type_name(t), mr_isa_name(isa));
        }
}

static void test_isa_override(void) {
    int best = mr_cpu_best_isa();
    for (int isa = MR_ISA_SCALAR; isa < MR_ISA_COUNT; isa++) {
        if (!mr_isa_available(isa)) {
            CHECK(mr_set_isa(isa) == -1, "mr_set_isa(%s) accepted on a CPU or build without it", mr_isa_name(isa));
            continue;
        }
        CHECK(mr_set_isa(isa) == 0, "mr_set_isa(%s)", mr_isa_name(isa));
        CHECK(mr_isa() == isa, "mr_isa() = %d after mr_set_isa(%d)", mr_isa(), isa);
        mr_vec_dot_fn want = isa == MR_ISA_SCALAR ? mr_type_get(MR_TYPE_Q8_0)->vec_dot
                                                  : mr_type_vec_dot_isa(MR_TYPE_Q8_0, isa);
        CHECK(mr_type_vec_dot(MR_TYPE_Q8_0) == want, "q8_0 vec_dot under %s", mr_isa_name(isa));
    }
    CHECK(mr_set_isa(MR_ISA_COUNT) == -1, "bad ISA accepted");
    mr_set_isa(best);
}

static void test_vec_dot_vs_scalar(void) {
    int n_tested = 0;
    for (int type = 0; type < MR_TYPE_COUNT; type++) {
        const mr_type_traits *t = mr_type_get(type);
        if (!t || !t->vec_dot || !t->to_float) continue;
        for (int isa = MR_ISA_SCALAR + 1; isa < MR_ISA_COUNT; isa++) {
            mr_vec_dot_fn f = mr_isa_available(isa) ? mr_type_vec_dot_isa(type, isa) : NULL;
            mr_vec_dot_x4_fn f4 = x4_of(type, isa);
            if (!f) continue;
            int sizes[32], ns = sizes_for(t->block_size, sizes);
            double worst = 0;
            for (int si = 0; si < ns; si++) {
                const int n = sizes[si];
                size_t wb = mr_row_size(type, n), xb = mr_row_size(t->vec_dot_type, n);
                uint8_t *w = malloc(wb), *x = malloc(4 * xb);
                float *wf = malloc(sizeof(float) * (size_t)n), *xf = malloc(sizeof(float) * 4 * (size_t)n);
                for (int trial = 0; trial < 4; trial++) {
                    const int extreme = trial == 3;
                    sd_weights(type, w, n, extreme);
                    for (int c = 0; c < 4; c++) sd_acts(t->vec_dot_type, x + c * xb, n, extreme, xf + (size_t)c * n);
                    t->to_float(w, wf, n);
                    float s4[4] = {0}, s4p[4] = {0};
                    if (f4) f4(n, s4, w, x, xb);
                    mr_vec_dot_x4_fn f4p = x4p_of(type, isa);
                    const mr_kern *kp = mr_kern_isa(t->vec_dot_type, isa);
                    CHECK(!f4p || (kp && kp->prep), "%s %s: a prepared kernel without its partner's prep", t->name, mr_isa_name(isa));
                    if (f4p && kp && kp->prep) {
                        size_t pb = (size_t)(n / 32) * (size_t)kp->prep_bytes;
                        uint8_t *xp = malloc(4 * pb);
                        for (int c = 0; c < 4; c++) kp->prep(x + c * xb, xp + c * pb, n);
                        f4p(n, s4p, w, xp, pb);
                        free(xp);
                    }
                    for (int c = 0; c < 4; c++) {
                        double bound = 0;
                        for (int i = 0; i < n; i++) bound += fabs((double)wf[i] * xf[(size_t)c * n + i]);
                        float ref = 0, got = 0;
                        t->vec_dot(n, &ref, w, x + c * xb);
                        f(n, &got, w, x + c * xb);
                        double err = fabs((double)got - ref), rel = bound > 0 ? err / bound : err;
                        if (rel > worst) worst = rel;
                        CHECK(rel <= 1e-5 && isfinite(got), "%s %s n=%d trial %d col %d: simd %.9g ref %.9g (err %.3g of %.3g)",
                              t->name, mr_isa_name(isa), n, trial, c, got, ref, err, bound);
                        if (is_same_bits(type))
                            CHECK(memcmp(&got, &ref, sizeof got) == 0, "%s %s n=%d trial %d col %d: simd %.9g != scalar %.9g",
                                  t->name, mr_isa_name(isa), n, trial, c, got, ref);
                        if (f4)
                            CHECK(memcmp(&s4[c], &got, sizeof got) == 0, "%s %s n=%d col %d: 4-column %.9g != vec_dot %.9g",
                                  t->name, mr_isa_name(isa), n, c, s4[c], got);
                        if (f4p)
                            CHECK(memcmp(&s4p[c], &got, sizeof got) == 0, "%s %s n=%d col %d: prepared 4-column %.9g != vec_dot %.9g",
                                  t->name, mr_isa_name(isa), n, c, s4p[c], got);
                    }
                }
                free(w); free(x); free(wf); free(xf);
            }
            printf("# %-8s %-7s max rel err %.2e%s%s%s\n", t->name, mr_isa_name(isa), worst, f4 ? " (4-col bit-exact)" : "",
                   x4p_of(type, isa) ? " (prepared 4-col bit-exact)" : "", is_same_bits(type) ? " (== scalar bit for bit)" : "");
            n_tested++;
        }
    }
    CHECK(n_tested > 0 || mr_cpu_best_isa() == MR_ISA_SCALAR, "no SIMD kernel tested");
}

/* Every GEMM block kernel (mr_gemm_fn) of every ISA here equals vec_dot bit for bit for each row
 * and column, over tile edges (rows and columns not multiples of the kernels' tiles), and writes
 * nothing outside its nr x nc block. */
static void test_gemm_vs_dot(void) {
    static const int nrs[] = {1, 3, 4, 5, 8, 16}, ncs[] = {1, 2, 3, 4, 5, 7, 9, 32};
    const float sentinel = -12345.0f;
    for (int type = 0; type < MR_TYPE_COUNT; type++) {
        const mr_type_traits *t = mr_type_get(type);
        if (!t || !t->vec_dot) continue;
        for (int isa = MR_ISA_SCALAR + 1; isa < MR_ISA_COUNT; isa++) {
            const mr_kern *k = mr_isa_available(isa) ? mr_kern_isa(type, isa) : NULL;
            if (!k || !k->gemm || !k->dot) continue;
            const int n = 8 * (t->block_size > 32 ? t->block_size : 32);
            const size_t wb = mr_row_size(type, n), xb = mr_row_size(t->vec_dot_type, n), s_col = MR_GEMM_NR + 3;
            uint8_t *w = malloc(wb * MR_GEMM_NR), *x = malloc(xb * MR_GEMM_NC);
            float *s = malloc(sizeof(float) * s_col * MR_GEMM_NC);
            sd_weights(type, w, (int64_t)n * MR_GEMM_NR, 0);
            sd_acts(t->vec_dot_type, x, (int64_t)n * MR_GEMM_NC, 0, NULL);
            int bad = 0;
            for (size_t a = 0; a < sizeof nrs / sizeof nrs[0]; a++)
                for (size_t b = 0; b < sizeof ncs / sizeof ncs[0]; b++) {
                    const int nr = nrs[a], nc = ncs[b];
                    for (size_t i = 0; i < s_col * MR_GEMM_NC; i++) s[i] = sentinel;
                    k->gemm(n, w, wb, nr, x, xb, nc, s, s_col);
                    for (int c = 0; c < MR_GEMM_NC; c++)
                        for (int r = 0; r < (int)s_col; r++) {
                            const float got = s[(size_t)c * s_col + (size_t)r];
                            float want = sentinel;
                            if (r < nr && c < nc) k->dot(n, &want, w + (size_t)r * wb, x + (size_t)c * xb);
                            if (memcmp(&got, &want, sizeof got) && bad++ < 3)
                                CHECK(0, "%s %s gemm nr=%d nc=%d row %d col %d: %.9g, vec_dot %.9g", t->name,
                                      mr_isa_name(isa), nr, nc, r, c, got, want);
                        }
                }
            CHECK(bad == 0, "%s %s gemm: %d results differ from vec_dot", t->name, mr_isa_name(isa), bad);
            printf("# %-8s %-7s gemm == vec_dot bit for bit\n", t->name, mr_isa_name(isa));
            free(w); free(x); free(s);
        }
    }
}

/* SIMD activation quantizers of every ISA here: the same bytes as the scalar reference, also on
 * special values (AVX2 must have all five; other ISAs are checked for those they have) */
static void test_quantizers_bit_exact(void) {
    static const int types[] = {MR_TYPE_Q8_0, MR_TYPE_Q8_1, MR_TYPE_Q8_K, MR_TYPE_F16, MR_TYPE_BF16};
    const int n = 4096;
    float *x = malloc(sizeof(float) * n);
    uint8_t *a = malloc(2 * 292 * n / 256 + 4096), *b = malloc(2 * 292 * n / 256 + 4096);
    for (int isa = MR_ISA_SCALAR + 1; isa < MR_ISA_COUNT; isa++)
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        if (!mr_isa_available(isa)) continue;
        const int type = types[ti];
        const mr_type_traits *t = mr_type_get(type);
        mr_from_float_fn f = mr_kern_isa(type, isa)->from_float;
        CHECK(f != NULL || isa != MR_ISA_AVX2, "%s: no AVX2 quantizer", t->name);
        if (!f) continue;
        printf("# %s %s quantizer checked\n", t->name, mr_isa_name(isa));
        for (int trial = 0; trial < 40; trial++) {
            const float scale = powf(10.0f, (float)(trial % 13) - 6.0f); /* 1e-6 .. 1e6 */
            for (int i = 0; i < n; i++) x[i] = sd_normalish() * scale;
            if (trial % 5 == 1) /* ties: exact multiples of half a quantum, and repeated maxima */
                for (int i = 0; i < n; i++) x[i] = (float)((int)(sd_u32() % 255) - 127) * 0.5f;
            if (trial % 5 == 2) /* specials sprinkled in */
                for (int i = 0; i < n; i += 1 + (int)(sd_u32() % 300)) {
                    static const float sp[] = {0.0f, -0.0f, 1e-40f, -1e-45f, 65504.0f, 65520.0f, 1e30f, -3e38f};
                    x[i] = sp[sd_u32() % 8];
                }
            if (trial % 5 == 3) { /* a NaN and an infinity in some blocks, an all-zero block */
                x[sd_u32() % n] = __builtin_nanf("");
                x[sd_u32() % n] = -__builtin_inff();
                memset(x + 512, 0, 256 * sizeof(float));
            }
            const int k = trial % 4 == 0 ? n - 256 + (t->block_size == 1 ? 37 : 0) : n;
            size_t bytes = mr_row_size(type, k);
            memset(a, 0x55, bytes);
            memset(b, 0xaa, bytes);
            t->from_float(x, a, k);
            f(x, b, k);
            size_t at = 0;
            while (at < bytes && a[at] == b[at]) at++;
            CHECK(at == bytes, "%s %s trial %d k=%d: byte %zu differs (ref %02x simd %02x)", t->name, mr_isa_name(isa), trial, k, at,
                  at < bytes ? a[at] : 0, at < bytes ? b[at] : 0);
        }
    }
    free(x); free(a); free(b);
}

int main(void) {
    RUN(test_tables_cover_required_types);
    RUN(test_isa_override);
    RUN(test_vec_dot_vs_scalar);
    RUN(test_gemm_vs_dot);
    RUN(test_quantizers_bit_exact);
    return t_finish();
}
