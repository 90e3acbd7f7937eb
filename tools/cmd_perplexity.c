/* moerun perplexity: perplexity of a text (llama-perplexity semantics, see mr_perplexity in moerun.h),
 * and KL-divergence against a saved baseline run. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mr_cli_common c;
    const char *text_path, *ids_path, *save, *base;
    int n_ctx, chunks, bos, bos_set, profile, n_batch;
} ppl_args;

static int ppl_opt_bos(const char *opt, const char *v, void *dst) {
    ppl_args *a = dst;
    if (mr_cli_int(opt, v, -1, INT_MAX, &a->bos)) return -1;
    a->bos_set = 1;
    return 0;
}

#define PPL_OPTS(a) \
    MR_CLI_OPT_MODEL(&(a)->c), \
    {.names = "-f, --file", .arg = "TEXT", .help = "the text to score (- = standard input)", .kind = MR_OPT_STR, .dst = &(a)->text_path}, \
    {.names = "-c, --ctx-size", .arg = "N", .help = "context (chunk) length (default 512)", .kind = MR_OPT_INT, .dst = &(a)->n_ctx, \
     .lo = 4, .hi = 0x7fffffff}, \
    {.names = "--chunks", .arg = "N", .help = "score at most N chunks (default 0 = all)", .kind = MR_OPT_INT, .dst = &(a)->chunks, \
     .lo = 0, .hi = 0x7fffffff}, \
    MR_CLI_OPT_THREADS(&(a)->c), \
    {.names = "--tokens-file", .arg = "F", .help = "take token ids (comma or space separated) from F instead of tokenizing\n" \
     "a text; BOS is then given by --bos (default: none)", .kind = MR_OPT_STR, .dst = &(a)->ids_path}, \
    {.names = "--bos", .arg = "ID", .help = "BOS id that replaces the first token of each chunk (-1: none; default:\n" \
     "the model's BOS if its vocabulary adds one)", .kind = MR_OPT_FN, .dst = (a), .fn = ppl_opt_bos}, \
    {.names = "--save-logits", .arg = "F", .help = "save the scored rows' logits (a baseline for --kl-base)", .kind = MR_OPT_STR, \
     .dst = &(a)->save}, \
    {.names = "--kl-base, --kl-divergence-base", .arg = "F", .help = "compare with a baseline saved by --save-logits (same text and\n" \
     "-c): KL divergence KL(base || this), top-1 agreement, the base's top-1\n" \
     "in this run's top-3, mean probability cosine, top-10 KL, baseline PPL", .kind = MR_OPT_STR, .dst = &(a)->base}, \
    {.names = "--kv-f32", .help = "F32 KV cache (default F16 like the reference)", .kind = MR_OPT_FLAG, .dst = &(a)->c.mp.kv_f32, .ival = 1}, \
    MR_CLI_OPT_BUDGET(&(a)->c), \
    {.names = "--profile", .help = "per-operator time table on stderr at the end", .kind = MR_OPT_FLAG, .dst = &(a)->profile, .ival = 1}, \
    MR_CLI_OPTS_APPROX(&(a)->c), \
    MR_CLI_OPTS_IGNORED, \
    {.names = "-b, --batch-size, -ub, --ubatch-size", .arg = "N", .help = "tokens per evaluation (default 0: each half of a chunk is one;\n" \
     "1: token by token like decoding, what cache-aware expert selection needs\nto be measured; exact results do not depend on it)", \
     .kind = MR_OPT_INT, .dst = &(a)->n_batch, .lo = 0, .hi = 0x7fffffff}

static void ppl_usage(FILE *f) {
    ppl_args a;
    const mr_opt opts[] = {PPL_OPTS(&a)};
    fprintf(f, "usage: moerun perplexity -m MODEL (-f TEXT | --tokens-file IDS) [-c N] [--chunks N] [-t N]\n"
               "                         [--save-logits FILE] [--kl-base FILE] [--bos ID] [--kv-f32] [--profile]\n"
               "                         [--moe-prune P] [--moe-tau T] [--moe-skip T] [--moe-approx SPEC]\n\n"
               "Perplexity like llama-perplexity: the text is tokenized (with BOS if the vocabulary adds one) and\n"
               "cut into chunks of N tokens; each chunk is evaluated from an empty context with its first token\n"
               "replaced by BOS, and the second half of each chunk is scored. Progress goes to stderr, the\n"
               "final estimate (PPL +/- its standard error) to stdout.\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
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
    ppl_args a;
    memset(&a, 0, sizeof a);
    mr_cli_common_init(&a.c);
    a.n_ctx = 512;
    a.bos = -1;
    const mr_opt opts[] = {PPL_OPTS(&a)};
    int pr_rc = mr_cli_parse("perplexity", opts, MR_NOPTS(opts), ppl_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    const char *model = a.c.model, *text_path = a.text_path, *ids_path = a.ids_path, *save = a.save, *base = a.base;
    const int n_ctx = a.n_ctx, chunks = a.chunks, profile = a.profile;
    int bos = a.bos;
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
    a.c.mp.n_ctx = n_ctx;
    double t0 = mr_cli_now();
    int intr;
    mr_cli_catch_sigint();
    if (!(m = mr_cli_load(&a.c, NULL, &intr))) { if (intr) rc = 130; goto done; }
    if (text_path) {
        /* like llama-perplexity: tokenize with the model's special tokens (BOS if it adds one), no
         * parsing of special-token text; BOS then also replaces the first token of every chunk */
        mr_tokenizer *tk = mr_model_tokenizer(m);
        if (!tk && !(tk = own_tk = mr_tokenizer_load(model))) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
        if ((n_tok = mr_cli_tokenize(tk, buf, len, 1, 0, &ids)) < 0) goto done;
        if (!a.bos_set) bos = mr_tokenizer_adds_bos(tk) ? mr_tokenizer_bos(tk) : -1;
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
    if (mr_perplexity(m, ids, n_tok, n_ctx, chunks, a.n_batch, (int32_t)bos, save, base, on_chunk, &pr, &r)) {
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
        printf("Top-1 in top-3    : %.3f%% (the baseline's top-1 among this run's 3 most likely)\n", 100.0 * r.top3_frac);
        printf("Cosine similarity : mean %.6f (of the probability vectors)\n", r.cos_mean);
        printf("Top-10 KL         : mean %.6g (the baseline's 10 most likely tokens + one bin for the rest)\n", r.kl_top10_mean);
    }
    if (mr_approx_params_enabled(&a.c.ap)) mr_cli_approx_report(m, stdout);
    if (a.c.budget) mr_pager_print_summary(stderr, m, (long)r.n_chunks * n_ctx, dt, 0, 0);
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
