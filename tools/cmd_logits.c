/* moerun logits: evaluate token ids and write every position's logits as a .lgts file. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void logits_usage(FILE *f) {
    fprintf(f, "usage: moerun logits -m MODEL (--tokens 1,2,3 | --tokens-file FILE) [--decode] -o OUT.lgts\n"
               "                     [-t THREADS] [-c CTX] [--kv-f32] [--official] [--dump NAMES]\n"
               "                     [--ram-budget SIZE|auto] [--stats-file FILE]\n"
               "  Evaluates the ids as one batch (default) or one at a time (--decode, through the KV cache)\n"
               "  and writes the logits of every position (0..n-1) in the LGTS format.\n"
               "  -t THREADS   worker threads (default 0 = physical cores)\n"
               "  -c CTX       context length (at least the number of ids, the default)\n"
               "  --kv-f32     F32 KV cache (default F16 like the reference)\n"
               "  --official   deepseek4: the official model's numerics instead of the reference fork's\n"
               "  --dump NAMES print intermediate tensors (comma list or 'all') to stderr\n"
               "  --ram-budget SIZE|auto  page routed experts through SIZE bytes of RAM (8G, 512M; auto from\n"
               "               MemAvailable); prints the pager summary on stderr at exit\n"
               "  --stats-file FILE  one JSON line of pager counters per evaluation (per token with --decode)\n");
}

static int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *toks = NULL, *tokfile = NULL, *budget = NULL, *stats_path = NULL;
    FILE *stats = NULL;
    mr_pager_stats st_prev, st_now;
    double t_eval = 0;
    int decode = 0;
    mr_model_params mp;
    mr_model_params_default(&mp);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { logits_usage(stdout); return 0; }
        else if (!strcmp(a, "-m") && has) model = argv[++i];
        else if (!strcmp(a, "-o") && has) out = argv[++i];
        else if (!strcmp(a, "--tokens") && has) toks = argv[++i];
        else if (!strcmp(a, "--tokens-file") && has) tokfile = argv[++i];
        else if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "-t") && has) { if (mr_cli_int(a, argv[++i], 0, MR_CLI_MAX_THREADS, &mp.n_threads)) return 1; }
        else if (!strcmp(a, "-c") && has) { if (mr_cli_int(a, argv[++i], 0, INT_MAX, &mp.n_ctx)) return 1; }
        else if (!strcmp(a, "--kv-f32")) mp.kv_f32 = 1;
        else if (!strcmp(a, "--official")) mp.reference = 0;
        else if (!strcmp(a, "--dump") && has) mp.dump = argv[++i];
        else if (!strcmp(a, "--ram-budget") && has) budget = argv[++i];
        else if (!strcmp(a, "--stats-file") && has) stats_path = argv[++i];
        else { fprintf(stderr, "error: unknown or incomplete option '%s'\n", a); logits_usage(stderr); return 1; }
    }
    if (!model || !out || (!toks && !tokfile)) {
        fprintf(stderr, "error: -m MODEL, -o OUT and --tokens (or --tokens-file) are required\n");
        return 1;
    }
    char *text = NULL;
    if (tokfile && !(text = mr_cli_read_file(tokfile, NULL))) { fprintf(stderr, "error: cannot read %s\n", tokfile); return 1; }
    int32_t *ids = NULL;
    int n = 0;
    if (mr_cli_parse_ids(text ? text : toks, &ids, &n) || n == 0) {
        free(text);
        free(ids);
        fprintf(stderr, "error: bad token list (expected comma-separated non-negative ids)\n");
        return 1;
    }
    free(text);
    int rc = 1;
    mr_model *m = NULL;
    mr_session *s = NULL;
    float *lg = NULL;
    int32_t *pos = NULL;
    if (mp.n_ctx <= 0) mp.n_ctx = n;
    if (budget && mr_ram_budget_parse(budget, model, mp.n_ctx, &mp.ram_budget)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        goto done;
    }
    if (stats_path && !(stats = fopen(stats_path, "w"))) { fprintf(stderr, "error: cannot write %s\n", stats_path); goto done; }
    m = mr_model_load(model, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    s = mr_session_new(m, n > mp.n_ctx ? n : mp.n_ctx);
    if (!s) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    const int V = mr_model_n_vocab(m);
    lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
    pos = malloc(sizeof(int32_t) * (size_t)n);
    if (!lg || !pos) { fprintf(stderr, "error: out of memory\n"); goto done; }
    for (int i = 0; i < n; i++) pos[i] = i;
    mr_model_pager_stats(m, &st_prev);
    t_eval = mr_cli_now();
    if (decode) {
        for (int i = 0; i < n; i++) {
            if (mr_session_eval(s, ids + i, 1, lg + (size_t)i * V, 0)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
            if (stats && mr_model_pager_stats(m, &st_now) == 0) { mr_pager_stats_json(stats, i, &st_now, &st_prev); st_prev = st_now; }
        }
    } else {
        if (mr_session_eval(s, ids, n, lg, 1)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
        if (stats && mr_model_pager_stats(m, &st_now) == 0) mr_pager_stats_json(stats, n - 1, &st_now, &st_prev);
    }
    t_eval = mr_cli_now() - t_eval;
    if (budget) mr_pager_print_summary(stderr, m, decode ? 0 : n, decode ? 0 : t_eval, decode ? n : 0, decode ? t_eval : 0);
    if (mr_lgts_write(out, n, V, pos, lg)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    rc = 0;
done:
    if (stats) fclose(stats);
    free(lg); free(pos); free(ids);
    mr_session_free(s);
    mr_model_free(m);
    return rc;
}

MR_COMMAND(logits, "evaluate token ids and write their logits (.lgts)", cmd_logits)
