/* moerun quant-check: verify dequantization and dot products against golden quant files. */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: moerun quant-check [--isa scalar|avx2|avx512|all] FILE.bin...\n\n"
            "Checks golden quant files (shared/golden/quants/TYPE.bin): the dequantized weights must\n"
            "equal ggml's bit for bit, and y = W x (activations converted to the type's partner type,\n"
            "then the ISA's dot-product kernel) must be within %g of ggml's y relative to\n"
            "sum |w||x| of the row. One line per file and ISA; exit 1 if any check fails.\n"
            "--isa defaults to the instruction set in use (MOERUN_ISA or the best this CPU has);\n"
            "'all' checks every ISA this CPU can run. An ISA without a kernel for the type is\n"
            "checked with the scalar reference and marked 'scalar fallback'.\n",
            MR_QUANT_CHECK_Y_TOL);
}

static int cmd_quant_check(int argc, char **argv) {
    int isa_lo = mr_kernel_isa_current(), isa_hi = isa_lo, nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        if (!strcmp(argv[i], "--isa")) {
            if (i + 1 >= argc) { fprintf(stderr, "error: --isa needs a value\n"); return 1; }
            const char *v = argv[++i];
            if (!strcmp(v, "all")) {
                isa_lo = 0;
                for (isa_hi = 0; mr_kernel_isa_available(isa_hi + 1);) isa_hi++;
            } else {
                int isa = mr_kernel_isa_from_name(v);
                if (isa < 0) { fprintf(stderr, "error: unknown --isa '%s' (scalar|avx2|avx512|all)\n", v); return 1; }
                if (!mr_kernel_isa_available(isa)) { fprintf(stderr, "error: this CPU cannot run %s kernels\n", v); return 1; }
                isa_lo = isa_hi = isa;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "error: unknown option '%s' (see moerun quant-check --help)\n", argv[i]);
            return 1;
        } else {
            nfiles++;
        }
    }
    if (!nfiles) { fprintf(stderr, "error: no golden file given (see moerun quant-check --help)\n"); return 1; }

    int failed = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--isa")) { i++; continue; }
        for (int isa = isa_lo; isa <= isa_hi; isa++) {
            mr_quant_check_result r;
            if (mr_quant_check_file(argv[i], isa, &r) != 0) {
                fprintf(stderr, "error: %s\n", mr_last_error());
                errors++;
                break;
            }
            char isa_desc[40];
            snprintf(isa_desc, sizeof isa_desc, "%s%s", mr_kernel_isa_name(isa), r.isa_fallback ? "(scalar fallback)" : "");
            printf("%-8s %-24s dequant max|diff| %-8.3g (%ld of %d differ)  y max rel err %-9.3g %s\n", r.type_name,
                   isa_desc, r.dequant_max_abs, r.dequant_mismatches, r.rows * r.cols, r.y_max_rel,
                   r.pass ? "PASS" : "FAIL");
            if (!r.pass) failed++;
        }
    }
    fflush(stdout);
    if (errors || failed) {
        if (failed) fprintf(stderr, "error: %d check(s) failed\n", failed);
        return 1;
    }
    return 0;
}

static void __attribute__((constructor)) mr_register_quant_check(void) {
    mr_cli_register("quant-check", "verify quant kernels against golden files", cmd_quant_check);
}
