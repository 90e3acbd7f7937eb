/* moerun synth: write a random-weight GGUF of a named shape and quant mix. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void synth_usage(FILE *f) {
    fprintf(f, "usage: moerun synth -o OUT.gguf [--shape NAME] [--mix NAME] [--layers N] [--ratios R,R,..]\n"
               "                   [--zipf S] [--seed N]\n"
               "       moerun synth --list\n\n"
               "Writes a random-weight model for benchmarks (weights are random blocks of the chosen quant\n"
               "types; the tokenizer is a synthetic SPM vocabulary with byte fallback).\n"
               "  --shape NAME  model shape (default qwen3-30b-a3b)\n"
               "  --mix NAME    quant mix (default q4_0)\n"
               "  --layers N    keep only the first N layers (default: all; deepseek4 shapes may go deeper,\n"
               "                continuing the layer pattern)\n"
               "  --ratios LIST deepseek4: per-layer compress ratios (0, 4 or 128), e.g. 0,0,4,128; sets the\n"
               "                depth if --layers is not given (default: the full model's ratios of those layers)\n"
               "  --zipf S      skew routing: expert popularity ~ Zipf(S) (default 0 = near-uniform); deepseek4:\n"
               "                through the router bias exp_probs_b and the hash-routing tables\n"
               "  --seed N      random seed (default 1)\n");
}

static int cmd_synth(int argc, char **argv) {
    mr_synth_params p = {.shape = "qwen3-30b-a3b", .mix = "q4_0", .seed = 1};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { synth_usage(stdout); return 0; }
        if (!strcmp(a, "--list")) { mr_synth_list(stdout); return 0; }
        if (!has) { fprintf(stderr, "error: unknown or incomplete option '%s' (see moerun synth --help)\n", a); return 1; }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--shape")) p.shape = v;
        else if (!strcmp(a, "--mix")) p.mix = v;
        else if (!strcmp(a, "--layers")) bad = mr_cli_int(a, v, 1, INT_MAX, &p.n_layers);
        else if (!strcmp(a, "--ratios")) p.ratios = v;
        else if (!strcmp(a, "--zipf")) bad = mr_cli_float(a, v, 0, MR_CLI_BIG, &p.zipf);
        else if (!strcmp(a, "--seed")) bad = mr_cli_u64(a, v, &p.seed);
        else { fprintf(stderr, "error: unknown option %s (see moerun synth --help)\n", a); return 1; }
        if (bad) return 1;
    }
    if (!out) { fprintf(stderr, "error: -o OUT.gguf is required (see moerun synth --help)\n"); return 1; }
    if (mr_synth(out, &p) != 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}

MR_COMMAND(synth, "write a random-weight model of a real shape (benchmarks)", cmd_synth)
