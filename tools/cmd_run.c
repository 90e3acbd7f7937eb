/* moerun run: generate text from a prompt, streaming to stdout; timings on stderr. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mr_cli_common c;
    const char *prompt, *pfile, *stats_path;
    int n_gen, show_ids, no_bos, profile, escape, no_display_prompt;
    mr_cli_spec spec;
} run_args;

#define RUN_OPTS(r) \
    MR_CLI_OPT_MODEL(&(r)->c), \
    {.names = "-p, --prompt", .arg = "TEXT", .help = "the prompt text", .kind = MR_OPT_STR, .dst = &(r)->prompt}, \
    {.names = "-f, --file", .arg = "FILE", .help = "read the prompt from FILE instead (- = standard input)", .kind = MR_OPT_STR, \
     .dst = &(r)->pfile}, \
    {.names = "-n, --n-predict, --predict", .arg = "N", .help = "tokens to generate (default 128; -1 = until the context is full);\n" \
     "stops earlier at the end of generation", .kind = MR_OPT_INT, .dst = &(r)->n_gen, .lo = -1, .hi = INT_MAX}, \
    {.names = "-e, --escape", .help = "turn \\n \\t \\\\ \\\" \\' \\xHH in -p into characters (the default)", .kind = MR_OPT_FLAG, \
     .dst = &(r)->escape, .ival = 1}, \
    {.names = "--no-escape", .help = "take -p as it is", .kind = MR_OPT_FLAG, .dst = &(r)->escape, .ival = 0}, \
    MR_CLI_OPTS_SAMPLER(&(r)->c), \
    MR_CLI_OPT_THREADS(&(r)->c), \
    MR_CLI_OPT_CTX(&(r)->c), \
    MR_CLI_OPT_BUDGET(&(r)->c), \
    {.names = "--stats-file", .arg = "FILE", .help = "pager counters as JSON lines: one for the prompt, one per decode step", \
     .kind = MR_OPT_STR, .dst = &(r)->stats_path}, \
    {.names = "--no-bos", .help = "do not add the model's BOS token", .kind = MR_OPT_FLAG, .dst = &(r)->no_bos, .ival = 1}, \
    {.names = "--no-display-prompt", .help = "print only the continuation, not the prompt", .kind = MR_OPT_FLAG, \
     .dst = &(r)->no_display_prompt, .ival = 1}, \
    MR_CLI_OPT_OFFICIAL(&(r)->c), \
    {.names = "--show-ids", .help = "also print the generated token ids (a line \"ids: a,b,...\" on stdout)", \
     .kind = MR_OPT_FLAG, .dst = &(r)->show_ids, .ival = 1}, \
    MR_CLI_OPTS_APPROX(&(r)->c), \
    MR_CLI_OPT_APPROX_FILE(&(r)->c), \
    MR_CLI_OPTS_SPEC(&(r)->spec), \
    {.names = "--profile", .help = "per-operator time table (prefill and decode) on stderr at the end", .kind = MR_OPT_FLAG, \
     .dst = &(r)->profile, .ival = 1}, \
    MR_CLI_OPTS_IGNORED, \
    {.names = "--jinja", .help = "run uses no chat template", .kind = MR_OPT_NOTICE}, \
    {.names = "-no-cnv, --no-conversation", .help = "run never converses; that is moerun chat", .kind = MR_OPT_NOTICE}

static void run_usage(FILE *f) {
    run_args r;
    const mr_opt opts[] = {RUN_OPTS(&r)};
    fprintf(f, "usage: moerun run -m MODEL (-p PROMPT | -f FILE) [options]\n\n"
               "Generates a continuation of the prompt on stdout (the prompt first); load, prompt and generation\n"
               "speed on stderr. A progress line is shown on a terminal while loading and reading the prompt.\n"
               "Ctrl-C stops loading, the prompt or the generation (statistics are still printed; exit status 130).\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int cmd_run(int argc, char **argv) {
    run_args r;
    memset(&r, 0, sizeof r);
    mr_cli_common_init(&r.c);
    mr_cli_spec_default(&r.spec);
    r.n_gen = 128;
    r.escape = 1;
    const mr_opt opts[] = {RUN_OPTS(&r)};
    int pr_rc = mr_cli_parse("run", opts, MR_NOPTS(opts), run_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    if (!r.c.model || (!r.prompt && !r.pfile)) { fprintf(stderr, "error: -m MODEL and -p PROMPT (or -f FILE) are required\n"); return 1; }
    if (r.prompt && r.pfile) { fprintf(stderr, "error: give one of -p PROMPT and -f FILE, not both\n"); return 1; }
    char *text = NULL;
    if (r.pfile && !(text = mr_cli_read_file(r.pfile, NULL))) { fprintf(stderr, "error: cannot read %s\n", r.pfile); return 1; }
    if (!text) {
        text = strdup(r.prompt);
        if (text && r.escape) mr_cli_unescape(text);
    }
    if (!text) { fprintf(stderr, "error: out of memory\n"); return 1; }

    int rc = 1, stop_rc = 0;
    FILE *stats = NULL;
    mr_pager_stats pst_prev, pst_now;
    mr_model *m = NULL;
    mr_session *s = NULL;
    mr_gen *g = NULL;
    int32_t *ids = NULL;
    int n_prompt = 0;

    mr_cli_catch_sigint();
    mr_cli_pick_seed(&r.c);
    if (r.stats_path && !(stats = fopen(r.stats_path, "w"))) { fprintf(stderr, "error: cannot write %s\n", r.stats_path); goto done; }
    int intr;
    r.c.mp.mtp |= r.spec.mtp || r.spec.draft_path; /* an MTP sidecar as -md reads the trunk's states */
    m = mr_cli_load(&r.c, NULL, &intr);
    if (!m) { if (intr) rc = 130; goto done; }
    mr_model_pager_stats(m, &pst_prev);
    mr_tokenizer *tok = mr_model_tokenizer(m);
    if (!tok) { fprintf(stderr, "error: %s has no usable tokenizer\n", r.c.model); goto done; }
    n_prompt = mr_cli_tokenize(tok, text, strlen(text), !r.no_bos, 1, &ids);
    if (n_prompt < 0) goto done;
    if (n_prompt == 0) { fprintf(stderr, "error: the prompt is empty\n"); goto done; }
    s = mr_session_new(m, 0);
    if (!s) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    const int n_ctx = mr_session_n_ctx(s);
    if (n_prompt >= n_ctx) { fprintf(stderr, "error: the prompt (%d tokens) does not fit the context (%d)\n", n_prompt, n_ctx); goto done; }
    if (r.n_gen > n_ctx - n_prompt) {
        fprintf(stderr, "warning: generating at most %d tokens (context %d)\n", n_ctx - n_prompt, n_ctx);
        r.n_gen = n_ctx - n_prompt;
    }
    mr_cli_progress pr;
    mr_gen_params gp;
    mr_gen_params_default(&gp);
    gp.sampler = r.c.sp;
    gp.max_tokens = r.n_gen; /* -1: until the context is full */
    gp.ignore_eos = r.c.ignore_eos;
    gp.n_batch = r.c.n_batch;
    gp.progress = mr_cli_progress_gen;
    gp.user = &pr;
    if (mr_cli_spec_setup(&r.spec, mr_model_n_threads(m), n_ctx, &gp)) goto done;
    g = mr_gen_new(s, &gp);
    if (!g) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }

    if (r.profile) { mr_profile_reset(); mr_profile_enable(1); }
    mr_cli_progress_init(&pr, "prefill");
    int pf = mr_gen_prefill(g, ids, n_prompt);
    mr_cli_progress_clear(&pr);
    if (pf < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    int n_past = mr_session_n_past(s);
    mr_gen_step st = {0};
    if (pf > 0) {
        fprintf(stderr, "(interrupted during the prompt: %d of %d tokens evaluated)\n", n_past, n_prompt);
        stop_rc = 130;
        st.finish = MR_GEN_ABORTED;
    } else {
        if (stats && mr_model_pager_stats(m, &pst_now) == 0) { mr_pager_stats_json(stats, n_past - 1, &pst_now, &pst_prev); pst_prev = pst_now; }
        if (!r.no_display_prompt) fputs(text, stdout); /* the prompt, then the continuation */
        fflush(stdout);
    }
    while (!st.finish) {
        mr_cli_approx_poll(&r.c, m); /* a token boundary: the control file's changes apply here */
        if (mr_cli_interrupted) { mr_gen_stop(g, &st); stop_rc = 130; }
        else if (mr_gen_next(g, &st)) { fprintf(stderr, "\nerror: %s\n", mr_last_error()); goto done; }
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
    if (r.profile) {
        mr_profile_enable(0);
        mr_profile_eval_time(0, gs.prefill_s);
        mr_profile_eval_time(1, gs.decode_s);
    }
    if (pf == 0) printf("\n");
    if (r.show_ids) {
        const int32_t *gen;
        int n_done = mr_gen_tokens(g, &gen);
        printf("ids: ");
        for (int i = 0; i < n_done; i++) printf("%s%d", i ? "," : "", gen[i]);
        printf("\n");
    }
    fflush(stdout);
    if (stop_rc && pf == 0) fprintf(stderr, "(interrupted)\n");
    fprintf(stderr, "prompt: %d tokens in %.3f s, %.2f tok/s\n", gs.n_prompt, gs.prefill_s,
            gs.prefill_s > 0 ? gs.n_prompt / gs.prefill_s : 0.0);
    /* the last token sampled is not evaluated: report the decode steps actually run */
    fprintf(stderr, "generated: %d tokens in %.3f s, %.2f tok/s (%d decode steps)\n", gs.n_gen, gs.decode_s,
            gs.decode_s > 0 ? (gs.n_decode + gs.n_draft_accepted) / gs.decode_s : 0.0, gs.n_decode);
    mr_cli_spec_report(&r.spec, g, stderr);
    if (mr_approx_params_enabled(&r.c.ap)) mr_cli_approx_report(m, stderr);
    if (r.c.budget) mr_pager_print_summary(stderr, m, gs.n_prompt, gs.prefill_s, gs.n_decode, gs.decode_s);
    if (r.profile) mr_profile_report(stderr);
    rc = stop_rc;
done:
    if (stats) fclose(stats);
    free(text); free(ids);
    mr_gen_free(g);
    mr_cli_spec_free(&r.spec);
    mr_session_free(s);
    mr_model_free(m);
    mr_approx_file_free(r.c.approx_file);
    return rc;
}

MR_COMMAND(run, "generate text from a prompt", cmd_run)
