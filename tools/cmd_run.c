/* moerun run: generate text from a prompt, streaming to stdout; timings on stderr. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t run_interrupted;
static void run_on_sigint(int sig) { (void)sig; run_interrupted = 1; }

static void run_usage(FILE *f) {
    fprintf(f, "usage: moerun run -m MODEL (-p PROMPT | -f FILE) [options]\n"
               "  -p PROMPT          the prompt text\n"
               "  -f FILE            read the prompt from FILE instead\n"
               "  -n N               tokens to generate (default 128; stops earlier at end of generation)\n"
               MR_CLI_SAMPLER_HELP
               "  -t THREADS         worker threads (default 0 = physical cores)\n"
               "  -c CTX             context length (default 0 = min(training context, 4096))\n"
               "  --ram-budget SIZE  RAM for routed experts (e.g. 8G, 512M, auto; default 0 = no paging);\n"
               "                     prints the pager summary at exit\n"
               "  --stats-file FILE  pager counters as JSON lines: one for the prompt, one per generated token\n"
               "  --no-bos           do not add the model's BOS token\n"
               "  --official         deepseek4: the official model's graph (indexer QAT, shared-expert clamp)\n"
               "                     instead of the reference llama.cpp fork (docs/DEEPSEEK4.md)\n"
               "  --show-ids         also print the generated token ids (a line \"ids: a,b,...\" on stdout)\n"
               MR_CLI_APPROX_HELP
               "  --profile          per-operator time table (prefill and decode) on stderr at the end\n"
               "  Ctrl-C stops the generation (statistics are still printed).\n");
}

static int cmd_run(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *pfile = NULL, *budget = NULL, *stats_path = NULL;
    FILE *stats = NULL;
    mr_pager_stats pst_prev, pst_now;
    int n_gen = 128, show_ids = 0, no_bos = 0, profile = 0;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_sampler_params sp;
    mr_sampler_default_params(&sp);
    mr_approx_params ap;
    mr_approx_params_default(&ap);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        int af = mr_cli_approx_flag(argc, argv, &i, &ap);
        if (!af) af = mr_cli_sampler_flag(argc, argv, &i, &sp);
        if (af < 0) return 1;
        if (af) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { run_usage(stdout); return 0; }
        else if (!strcmp(a, "-m") && has) model = argv[++i];
        else if (!strcmp(a, "-p") && has) prompt = argv[++i];
        else if (!strcmp(a, "-f") && has) pfile = argv[++i];
        else if (!strcmp(a, "-n") && has) { if (mr_cli_int(a, argv[++i], 0, INT_MAX, &n_gen)) return 1; }
        else if (!strcmp(a, "-t") && has) { if (mr_cli_int(a, argv[++i], 0, MR_CLI_MAX_THREADS, &mp.n_threads)) return 1; }
        else if (!strcmp(a, "-c") && has) { if (mr_cli_int(a, argv[++i], 0, INT_MAX, &mp.n_ctx)) return 1; }
        else if (!strcmp(a, "--official")) mp.reference = 0;
        else if (!strcmp(a, "--ram-budget") && has) budget = argv[++i];
        else if (!strcmp(a, "--stats-file") && has) stats_path = argv[++i];
        else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (!strcmp(a, "--show-ids")) show_ids = 1;
        else if (!strcmp(a, "--profile")) profile = 1;
        else { fprintf(stderr, "error: unknown or incomplete option '%s'\n", a); run_usage(stderr); return 1; }
    }
    if (!model || (!prompt && !pfile)) { fprintf(stderr, "error: -m MODEL and -p PROMPT (or -f FILE) are required\n"); return 1; }
    if (prompt && pfile) { fprintf(stderr, "error: give one of -p PROMPT and -f FILE, not both\n"); return 1; }
    char *text = NULL;
    if (pfile && !(text = mr_cli_read_file(pfile, NULL))) { fprintf(stderr, "error: cannot read %s\n", pfile); return 1; }
    if (!text) text = strdup(prompt);
    if (!text) { fprintf(stderr, "error: out of memory\n"); return 1; }

    int rc = 1;
    mr_model *m = NULL;
    mr_session *s = NULL;
    mr_gen *g = NULL;
    int32_t *ids = NULL;
    double t0 = 0, t_load;
    int n_prompt = 0;

    t0 = mr_cli_now();
    if (budget && mr_ram_budget_parse(budget, model, mp.n_ctx, &mp.ram_budget)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    if (stats_path && !(stats = fopen(stats_path, "w"))) { fprintf(stderr, "error: cannot write %s\n", stats_path); goto done; }
    m = mr_model_load(model, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    mr_model_pager_stats(m, &pst_prev);
    if (mr_model_set_approx(m, &ap)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    t_load = mr_cli_now() - t0;
    mr_tokenizer *tok = mr_model_tokenizer(m);
    if (!tok) { fprintf(stderr, "error: %s has no usable tokenizer\n", model); goto done; }
    size_t tl = strlen(text);
    int cap = (int)(tl + 16 < INT_MAX / 2 ? tl + 16 : INT_MAX / 2);
    ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) { fprintf(stderr, "error: out of memory\n"); goto done; }
    n_prompt = mr_tokenize(tok, text, tl, !no_bos, 1, ids, cap);
    if (n_prompt < 0) { fprintf(stderr, "error: tokenize: %s\n", n_prompt == INT_MIN ? mr_last_error() : "too many tokens"); goto done; }
    if (n_prompt == 0) { fprintf(stderr, "error: the prompt is empty\n"); goto done; }
    s = mr_session_new(m, 0);
    if (!s) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    const int n_ctx = mr_session_n_ctx(s);
    if (n_prompt >= n_ctx) { fprintf(stderr, "error: the prompt (%d tokens) does not fit the context (%d)\n", n_prompt, n_ctx); goto done; }
    if (n_prompt + n_gen > n_ctx) {
        fprintf(stderr, "warning: generating at most %d tokens (context %d)\n", n_ctx - n_prompt, n_ctx);
        n_gen = n_ctx - n_prompt;
    }
    mr_gen_params gp;
    mr_gen_params_default(&gp);
    gp.sampler = sp;
    gp.max_tokens = n_gen;
    g = mr_gen_new(s, &gp);
    if (!g) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = run_on_sigint;
    sigaction(SIGINT, &sa, NULL);

    if (profile) { mr_profile_reset(); mr_profile_enable(1); }
    if (mr_gen_prefill(g, ids, n_prompt) < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    int n_past = mr_session_n_past(s);
    if (stats && mr_model_pager_stats(m, &pst_now) == 0) { mr_pager_stats_json(stats, n_past - 1, &pst_now, &pst_prev); pst_prev = pst_now; }
    fputs(text, stdout); /* the prompt, then the continuation */
    fflush(stdout);
    mr_gen_step st = {0};
    while (!st.finish && !run_interrupted) {
        if (mr_gen_next(g, &st)) { fprintf(stderr, "\nerror: %s\n", mr_last_error()); goto done; }
        if (st.len) { fwrite(st.text, 1, st.len, stdout); fflush(stdout); }
        /* one stats line per decode step (a step evaluates the token sampled by the previous one) */
        if (stats && mr_session_n_past(s) > n_past && mr_model_pager_stats(m, &pst_now) == 0) {
            n_past = mr_session_n_past(s);
            mr_pager_stats_json(stats, n_past - 1, &pst_now, &pst_prev);
            pst_prev = pst_now;
        }
    }
    mr_gen_stats gs;
    mr_gen_get_stats(g, &gs);
    if (profile) {
        mr_profile_enable(0);
        mr_profile_eval_time(0, gs.prefill_s);
        mr_profile_eval_time(1, gs.decode_s);
    }
    printf("\n");
    if (show_ids) {
        const int32_t *gen;
        int n_done = mr_gen_tokens(g, &gen);
        printf("ids: ");
        for (int i = 0; i < n_done; i++) printf("%s%d", i ? "," : "", gen[i]);
        printf("\n");
    }
    fflush(stdout);
    if (run_interrupted) fprintf(stderr, "(interrupted)\n");
    fprintf(stderr, "load: %.3f s (%s, %d threads)\n", t_load, mr_model_arch(m), mr_model_n_threads(m));
    fprintf(stderr, "prompt: %d tokens in %.3f s, %.2f tok/s\n", n_prompt, gs.prefill_s,
            gs.prefill_s > 0 ? n_prompt / gs.prefill_s : 0.0);
    /* the last token sampled is not evaluated: report the decode steps actually run */
    fprintf(stderr, "generated: %d tokens in %.3f s, %.2f tok/s (%d decode steps)\n", gs.n_gen, gs.decode_s,
            gs.decode_s > 0 ? gs.n_decode / gs.decode_s : 0.0, gs.n_decode);
    if (mr_approx_params_enabled(&ap)) mr_cli_approx_report(m, stderr);
    if (budget) mr_pager_print_summary(stderr, m, n_prompt, gs.prefill_s, gs.n_decode, gs.decode_s);
    if (profile) mr_profile_report(stderr);
    rc = 0;
done:
    if (stats) fclose(stats);
    free(text); free(ids);
    mr_gen_free(g);
    mr_session_free(s);
    mr_model_free(m);
    return rc;
}

MR_COMMAND(run, "generate text from a prompt", cmd_run)
