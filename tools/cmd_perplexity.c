/* moerun perplexity: perplexity of a text (llama-perplexity semantics, see mr_perplexity in moerun.h),
 * and KL-divergence against a saved baseline run. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ppl_usage(FILE *f) {
    fprintf(f,
            "usage: moerun perplexity -m MODEL (-f TEXT | --tokens-file IDS) [-c N] [--chunks N] [-t N]\n"
            "                         [--save-logits FILE] [--kl-base FILE] [--bos ID] [--kv-f32] [--profile]\n"
            "                         [--moe-prune P] [--moe-tau T] [--moe-skip T] [--moe-approx SPEC]\n\n"
            "Perplexity like llama-perplexity: the text is tokenized (with BOS if the vocabulary adds one) and\n"
            "cut into chunks of N tokens; each chunk is evaluated from an empty context with its first token\n"
            "replaced by BOS, and the second half of each chunk is scored. Progress goes to stderr, the\n"
            "final estimate (PPL +/- its standard error) to stdout.\n"
            "  -c N              context (chunk) length (default 512)\n"
            "  --chunks N        score at most N chunks (default 0 = all)\n"
            "  -t N              threads (default 0 = physical cores)\n"
            "  --tokens-file F   take token ids (comma or space separated) from F instead of tokenizing a\n"
            "                    text; BOS is then given by --bos (default: none)\n"
            "  --bos ID          BOS id that replaces the first token of each chunk (-1: none; default: the\n"
            "                    model's BOS if its vocabulary adds one)\n"
            "  --save-logits F   save the scored rows' logits (a baseline for --kl-base)\n"
            "  --kl-base F       compare with a baseline saved by --save-logits (same text and -c): KL\n"
            "                    divergence KL(base || this), top-1 agreement, baseline PPL\n"
            "  --kv-f32          F32 KV cache (default F16 like the reference)\n"
            "  --profile         per-operator time table on stderr at the end\n"
            MR_CLI_APPROX_HELP);
}

typedef struct { double t0; int printed; } ppl_progress;

static void on_chunk(void *user, int chunk, int n_chunks, double ppl) {
    ppl_progress *p = user;
    if (chunk == 1) {
        double dt = mr_cli_now() - p->t0;
        fprintf(stderr, "perplexity: %.2f seconds per chunk - ETA %.1f s\n", dt, dt * n_chunks);
    }
    fprintf(stderr, "[%d]%.4f,", chunk, ppl);
    if (chunk % 10 == 0 || chunk == n_chunks) fprintf(stderr, "\n");
    fflush(stderr);
}

static int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *text_path = NULL, *ids_path = NULL, *save = NULL, *base = NULL;
    int n_ctx = 512, chunks = 0, bos_set = 0, profile = 0;
    int bos = -1;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_approx_params ap;
    mr_approx_params_default(&ap);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { ppl_usage(stdout); return 0; }
        int af = mr_cli_approx_flag(argc, argv, &i, &ap);
        if (af < 0) return 1;
        if (af) continue;
        if (!strcmp(a, "--kv-f32")) { mp.kv_f32 = 1; continue; }
        if (!strcmp(a, "--profile")) { profile = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "error: unknown or incomplete option '%s' (see moerun perplexity --help)\n", a); return 1; }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-f")) text_path = v;
        else if (!strcmp(a, "--tokens-file")) ids_path = v;
        else if (!strcmp(a, "--save-logits")) save = v;
        else if (!strcmp(a, "--kl-base")) base = v;
        else if (!strcmp(a, "-c")) bad = mr_cli_int(a, v, 4, INT_MAX, &n_ctx);
        else if (!strcmp(a, "--chunks")) bad = mr_cli_int(a, v, 0, INT_MAX, &chunks);
        else if (!strcmp(a, "-t")) bad = mr_cli_int(a, v, 0, MR_CLI_MAX_THREADS, &mp.n_threads);
        else if (!strcmp(a, "--bos")) { bad = mr_cli_int(a, v, -1, INT_MAX, &bos); bos_set = 1; }
        else { fprintf(stderr, "error: unknown option %s (see moerun perplexity --help)\n", a); return 1; }
        if (bad) return 1;
    }
    if (!model) { fprintf(stderr, "error: -m MODEL is required (see moerun perplexity --help)\n"); return 1; }
    if (!text_path == !ids_path) { fprintf(stderr, "error: give exactly one of -f TEXT and --tokens-file IDS\n"); return 1; }
    if (save && base) { fprintf(stderr, "error: --save-logits and --kl-base cannot be combined\n"); return 1; }

    int rc = 1, n_tok = 0;
    int32_t *ids = NULL;
    char *buf = NULL;
    mr_model *m = NULL;
    mr_tokenizer *own_tk = NULL;
    size_t len = 0;
    if (!(buf = mr_cli_read_file(text_path ? text_path : ids_path, &len))) {
        fprintf(stderr, "error: cannot read %s\n", text_path ? text_path : ids_path);
        return 1;
    }
    mp.n_ctx = n_ctx;
    double t0 = mr_cli_now();
    if (!(m = mr_model_load(model, &mp))) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    if (mr_model_set_approx(m, &ap)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    if (text_path) {
        /* like llama-perplexity: tokenize with the model's special tokens (BOS if it adds one), no
         * parsing of special-token text; BOS then also replaces the first token of every chunk */
        mr_tokenizer *tk = mr_model_tokenizer(m);
        if (!tk && !(tk = own_tk = mr_tokenizer_load(model))) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
        int cap = (int)(len < 0x3fffffff ? len : 0x3fffffff) + 16;
        if (!(ids = malloc(sizeof(int32_t) * (size_t)cap))) { fprintf(stderr, "error: out of memory\n"); goto done; }
        n_tok = mr_tokenize(tk, buf, len, 1, 0, ids, cap);
        if (n_tok < 0) {
            fprintf(stderr, "error: tokenizing %s: %s\n", text_path, n_tok == INT_MIN ? mr_last_error() : "too many tokens");
            goto done;
        }
        if (!bos_set) bos = mr_tokenizer_adds_bos(tk) ? mr_tokenizer_bos(tk) : -1;
    } else if (mr_cli_parse_ids(buf, &ids, &n_tok)) {
        fprintf(stderr, "error: %s: bad token list (expected non-negative ids)\n", ids_path);
        goto done;
    }
    fprintf(stderr, "perplexity: loaded %s in %.2f s; %d tokens, context %d, %d threads\n", model, mr_cli_now() - t0,
            n_tok, n_ctx, mr_model_n_threads(m));
    if (n_tok < 2 * n_ctx) {
        fprintf(stderr, "error: need at least %d tokens for a context of %d, the input has %d\n", 2 * n_ctx, n_ctx, n_tok);
        goto done;
    }
    if (profile) { mr_profile_reset(); mr_profile_enable(1); }
    ppl_progress pr = {mr_cli_now(), 0};
    mr_ppl_result r;
    if (mr_perplexity(m, ids, n_tok, n_ctx, chunks, (int32_t)bos, save, base, on_chunk, &pr, &r)) {
        fprintf(stderr, "\nerror: %s\n", mr_last_error());
        goto done;
    }
    double dt = mr_cli_now() - pr.t0;
    if (profile) {
        mr_profile_enable(0);
        mr_profile_eval_time(0, dt);
        mr_profile_report(stderr);
    }
    fprintf(stderr, "perplexity: %d chunks, %d tokens scored in %.2f s (%.1f tokens/s evaluated)\n", r.n_chunks,
            r.n_scored, dt, (double)r.n_chunks * n_ctx / dt);
    printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    if (r.has_kl) {
        printf("Baseline PPL      : %.4f (ln(PPL/PPL_base) = %.6f)\n", r.base_ppl, r.nll - log(r.base_ppl));
        printf("KL-divergence     : mean %.6g, median %.6g, p99 %.6g, max %.6g\n", r.kl_mean, r.kl_median, r.kl_p99, r.kl_max);
        printf("Same top-1 token  : %.3f%%\n", 100.0 * r.top1_frac);
    }
    if (mr_approx_params_enabled(&ap)) mr_cli_approx_report(m, stdout);
    if (save) fprintf(stderr, "perplexity: saved the scored logits to %s\n", save);
    rc = 0;
done:
    mr_tokenizer_free(own_tk);
    mr_model_free(m);
    free(ids);
    free(buf);
    return rc;
}

MR_COMMAND(perplexity, "perplexity of a text and KL-divergence against a baseline (like llama-perplexity)", cmd_perplexity)
