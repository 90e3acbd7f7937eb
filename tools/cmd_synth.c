/* moerun synth: write a random-weight GGUF of a named shape and quant mix. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { mr_synth_params p; const char *out; int list; } synth_args;

#define SYNTH_OPTS(a) \
    {.names = "-o, --output", .arg = "OUT.gguf", .help = "file to write (required)", .kind = MR_OPT_STR, .dst = &(a)->out}, \
    {.names = "--shape", .arg = "NAME", .help = "model shape (default qwen3-30b-a3b)", .kind = MR_OPT_STR, .dst = &(a)->p.shape}, \
    {.names = "--mix", .arg = "NAME", .help = "quant mix (default q4_0)", .kind = MR_OPT_STR, .dst = &(a)->p.mix}, \
    {.names = "--layers", .arg = "N", .help = "keep only the first N layers (default: all; deepseek4 shapes may go\n" \
     "deeper, continuing the layer pattern)", .kind = MR_OPT_INT, .dst = &(a)->p.n_layers, .lo = 1, .hi = 0x7fffffff}, \
    {.names = "--ratios", .arg = "LIST", .help = "deepseek4: per-layer compress ratios (0, 4 or 128), e.g. 0,0,4,128;\n" \
     "sets the depth if --layers is not given (default: the full model's\nratios of those layers)", .kind = MR_OPT_STR, \
     .dst = &(a)->p.ratios}, \
    {.names = "--zipf", .arg = "S", .help = "skew routing: expert popularity ~ Zipf(S) (default 0 = near-uniform);\n" \
     "deepseek4: through the router bias exp_probs_b and the hash-routing tables", .kind = MR_OPT_FLOAT, .dst = &(a)->p.zipf, \
     .lo = 0, .hi = MR_CLI_BIG}, \
    {.names = "--layout", .arg = "NAME", .help = "deepseek4: trunk (default), mtp (+ a bundled MTP block), mtp-only (an\n" \
     "MTP sidecar), dspark (a DSpark drafter, arch dflash), v41 (arch deepseek41)", .kind = MR_OPT_STR, .dst = &(a)->p.layout}, \
    {.names = "--shexp-clamp", .arg = "X", .help = "deepseek4: write swiglu_clamp_shexp = X for every layer (default: key\n" \
     "absent, so the shared expert takes swiglu_clamp_exp = 10)", .kind = MR_OPT_FLOAT, .dst = &(a)->p.shexp_clamp, \
     .lo = 0, .hi = MR_CLI_BIG}, \
    {.names = "-s, --seed", .arg = "N", .help = "random seed (default 1)", .kind = MR_OPT_U64, .dst = &(a)->p.seed}, \
    {.names = "--list", .help = "list the shapes and quant mixes", .kind = MR_OPT_FLAG, .dst = &(a)->list, .ival = 1}

static void synth_usage(FILE *f) {
    synth_args a;
    const mr_opt opts[] = {SYNTH_OPTS(&a)};
    fprintf(f, "usage: moerun synth -o OUT.gguf [--shape NAME] [--mix NAME] [--layers N] [--ratios R,R,..]\n"
               "                   [--zipf S] [--seed N] [--layout NAME] [--shexp-clamp X]\n"
               "       moerun synth --list\n\n"
               "Writes a random-weight model for benchmarks (weights are random blocks of the chosen quant\n"
               "types; the tokenizer is a synthetic SPM vocabulary with byte fallback).\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int cmd_synth(int argc, char **argv) {
    synth_args a = {.p = {.shape = "qwen3-30b-a3b", .mix = "q4_0", .seed = 1}};
    const mr_opt opts[] = {SYNTH_OPTS(&a)};
    int pr_rc = mr_cli_parse("synth", opts, MR_NOPTS(opts), synth_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    if (a.list) { mr_synth_list(stdout); return 0; }
    mr_synth_params p = a.p;
    const char *out = a.out;
    if (!out) { fprintf(stderr, "error: -o OUT.gguf is required (see moerun synth --help)\n"); return 1; }
    if (mr_synth(out, &p) != 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}

MR_COMMAND(synth, "write a random-weight model of a real shape (benchmarks)", cmd_synth)
