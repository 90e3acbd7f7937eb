/* The workload of bench/aarch64_insn.sh (make bench-aarch64-insn): a fixed number of kernel calls
 * whose executed instructions the emulator counts. Not a timing benchmark: it prints nothing but
 * a checksum, and its cost is the same on every run (same data, same calls).
 *
 * Usage: bench_insn TYPE ISA MODE REPS [ROWS COLS]
 *   TYPE  a weight type (q4_0, iq3_s, ...), ISA scalar|neon|dotprod|avx2|avx512
 *   MODE  dot   REPS passes of one vec_dot per row (ROWS rows of COLS values, one column)
 *         dot4  REPS passes of one 4-column call per row (the multi-column path: dot4)
 *         gemm  REPS passes of one GEMM block call: ROWS rows (<= MR_GEMM_NR) x MR_GEMM_NC columns
 *         rp1, rp8  REPS passes over the rows' repacked copy (mr_repack_make, made before the passes)
 *               with 1 or 8 columns per group call
 * Exit status 2 when the ISA has no kernel of its own for the type (mr_kern_get would fall back).
 * The script runs it with two REPS values and divides the difference of the counts by the extra
 * weights, so set-up, start-up and loop overhead cancel out. */
#include "base/base.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/repack.h"
#include "../tests/simd_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s TYPE scalar|neon|dotprod|avx2|avx512 dot|dot4|gemm|rp1|rp8 REPS [ROWS COLS]\n", argv[0]);
        return 1;
    }
    const int type = mr_type_from_name(argv[1]);
    const char *in = argv[2], *mode = argv[3];
    int isa = -1;
    for (int i = 0; i < MR_ISA_COUNT; i++)
        if (!strcmp(mr_isa_name(i), in)) isa = i;
    const int reps = atoi(argv[4]), rows = argc > 6 ? atoi(argv[5]) : 8, cols = argc > 6 ? atoi(argv[6]) : 4096;
    if (type < 0 || isa < 0 || reps < 0 || rows < 1 || cols < 256 || cols % 256) {
        fprintf(stderr, "error: bad arguments\n");
        return 1;
    }
    const mr_type_traits *t = mr_type_get(type);
    const mr_kern *k = mr_kern_get(type, isa);
    if (!k || !k->dot || k->isa != isa) return 2;
    const int four = !strcmp(mode, "dot4"), gemm = !strcmp(mode, "gemm"), rpn = !strcmp(mode, "rp1") ? 1 : !strcmp(mode, "rp8") ? 8 : 0;
    if ((four && !k->dot4) || (gemm && (!k->gemm || rows > MR_GEMM_NR))) return 2;
    if (rpn && (!k->rp || rows % k->rp->rows || rpn > k->rp->max_nc || mr_set_isa(isa))) return 2;
    const size_t wrow = mr_row_size(type, cols), yrow = mr_row_size(t->vec_dot_type, cols);
    uint8_t *w = mr_aligned_alloc(64, wrow * rows), *y = mr_aligned_alloc(64, yrow * MR_GEMM_NC);
    if (!w || !y) return 1;
    sd_weights(type, w, (int64_t)rows * cols, 0);
    sd_acts(t->vec_dot_type, y, (int64_t)cols * MR_GEMM_NC, 0, NULL);
    mr_repacked *rp = NULL;
    if (rpn) {
        int err;
        if (!(rp = mr_repack_make(NULL, w, type, cols, rows, &err))) return 1;
    }
    float s[4] = {0, 0, 0, 0}, sum = 0;
    static float sg[MR_GEMM_NR * MR_GEMM_NC];
    for (int i = 0; i < reps; i++) {
        if (rpn) {
            const void *act[8];
            float out[8], *yo[8];
            for (int c = 0; c < 8; c++) { act[c] = y + (size_t)c * yrow; yo[c] = out + c; }
            for (int r = 0; r < rows; r += k->rp->rows) {
                k->rp->group(mr_repack_at(rp, w + (size_t)r * wrow, type, cols, isa, NULL), cols, act, yo, rpn);
                sum += out[0];
            }
            continue;
        }
        if (gemm) {
            k->gemm(cols, w, wrow, rows, y, yrow, MR_GEMM_NC, sg, (size_t)rows);
            for (int j = 0; j < rows * MR_GEMM_NC; j++) sum += sg[j];
            continue;
        }
        for (int r = 0; r < rows; r++) {
            if (four) k->dot4(cols, s, w + (size_t)r * wrow, y, yrow);
            else k->dot(cols, s, w + (size_t)r * wrow, y);
            sum += s[0] + s[3];
        }
    }
    printf("%.9g\n", (double)sum);
    mr_repack_free(rp);
    mr_aligned_free(w);
    mr_aligned_free(y);
    return 0;
}
