/* moerun quant-check: verify dequantization and dot products against golden quant files. */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <string.h>

typedef struct { int lo, hi; } isa_range;

static int opt_isa(const char *opt, const char *v, void *dst) {
    isa_range *r = dst;
    (void)opt;
    if (!strcmp(v, "all")) {
        r->lo = 0;                 /* the ones this build and CPU cannot run are skipped */
        r->hi = MR_KERNEL_ISA_COUNT - 1;
        return 0;
    }
    int isa = mr_kernel_isa_from_name(v);
    if (isa < 0) { fprintf(stderr, "error: unknown --isa '%s' (scalar|avx2|avx512|neon|dotprod|all)\n", v); return -1; }
    if (!mr_kernel_isa_available(isa)) { fprintf(stderr, "error: this CPU cannot run %s kernels\n", v); return -1; }
    r->lo = r->hi = isa;
    return 0;
}

#define QC_OPTS(r) \
    {.names = "--isa", .arg = "NAME", .help = "scalar, avx2, avx512, neon, dotprod or all (default: the ISA in use)", .kind = MR_OPT_FN, \
     .dst = (r), .fn = opt_isa}

static void usage(FILE *f) {
    isa_range r;
    const mr_opt opts[] = {QC_OPTS(&r)};
    fprintf(f,
            "usage: moerun quant-check [--isa scalar|avx2|avx512|neon|dotprod|all] FILE.bin...\n\n"
            "Checks golden quant files (shared/golden/quants/TYPE.bin): the dequantized weights must\n"
            "equal ggml's bit for bit, and y = W x (activations converted to the type's partner type,\n"
            "then the ISA's dot-product kernel) must be within %g of ggml's y relative to\n"
            "sum |w||x| of the row. One line per file and ISA; exit 1 if any check fails.\n"
            "--isa defaults to the instruction set in use (MOERUN_ISA or the best this CPU has);\n"
            "'all' checks every ISA this CPU can run. An ISA without a kernel for the type is\n"
            "checked with the scalar reference and marked 'scalar fallback'.\n",
            MR_QUANT_CHECK_Y_TOL);
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

#define QC_MAX_FILES 256

static int cmd_quant_check(int argc, char **argv) {
    isa_range ir = {mr_kernel_isa_current(), mr_kernel_isa_current()};
    const mr_opt opts[] = {QC_OPTS(&ir)};
    const char *files[QC_MAX_FILES];
    int nfiles = 0;
    int pr_rc = mr_cli_parse("quant-check", opts, MR_NOPTS(opts), usage, argc, argv, files, QC_MAX_FILES, &nfiles);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    const int isa_lo = ir.lo, isa_hi = ir.hi;
    if (!nfiles) { fprintf(stderr, "error: no golden file given (see moerun quant-check --help)\n"); return 1; }

    int failed = 0, errors = 0;
    for (int i = 0; i < nfiles; i++) {
        for (int isa = isa_lo; isa <= isa_hi; isa++) {
            if (!mr_kernel_isa_available(isa)) continue;
            mr_quant_check_result r;
            if (mr_quant_check_file(files[i], isa, &r) != 0) {
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
