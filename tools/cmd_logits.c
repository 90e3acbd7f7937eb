/* moerun logits: evaluate token ids and write every position's logits as a .lgts file. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mr_cli_common c;
    const char *out, *toks, *tokfile, *stats_path;
    int decode;
} logits_args;

#define LOGITS_OPTS(a) \
    MR_CLI_OPT_MODEL(&(a)->c), \
    {.names = "--tokens", .arg = "1,2,3", .help = "token ids to evaluate", .kind = MR_OPT_STR, .dst = &(a)->toks}, \
    {.names = "--tokens-file", .arg = "FILE", .help = "read the ids from FILE (- = standard input)", .kind = MR_OPT_STR, \
     .dst = &(a)->tokfile}, \
    {.names = "-o, --output", .arg = "OUT.lgts", .help = "file to write (required)", .kind = MR_OPT_STR, .dst = &(a)->out}, \
    {.names = "--decode", .help = "evaluate one token at a time through the KV cache (default: one batch)", .kind = MR_OPT_FLAG, \
     .dst = &(a)->decode, .ival = 1}, \
    MR_CLI_OPT_THREADS(&(a)->c), \
    {.names = "-c, --ctx-size", .arg = "N", .help = "context length (at least the number of ids, the default)", .kind = MR_OPT_INT, \
     .dst = &(a)->c.mp.n_ctx, .lo = 0, .hi = 0x7fffffff}, \
    {.names = "--kv-f32", .help = "F32 KV cache (default F16 like the reference)", .kind = MR_OPT_FLAG, .dst = &(a)->c.mp.kv_f32, .ival = 1}, \
    MR_CLI_OPT_OFFICIAL(&(a)->c), \
    {.names = "--dump", .arg = "NAMES", .help = "print intermediate tensors (comma list or 'all') to stderr", .kind = MR_OPT_STR, \
     .dst = &(a)->c.mp.dump}, \
    MR_CLI_OPT_BUDGET(&(a)->c), \
    {.names = "--stats-file", .arg = "FILE", .help = "one JSON line of pager counters per evaluation (per token with --decode)", \
     .kind = MR_OPT_STR, .dst = &(a)->stats_path}, \
    MR_CLI_OPTS_IGNORED

static void logits_usage(FILE *f) {
    logits_args a;
    const mr_opt opts[] = {LOGITS_OPTS(&a)};
    fprintf(f, "usage: moerun logits -m MODEL (--tokens 1,2,3 | --tokens-file FILE) [--decode] -o OUT.lgts\n"
               "                     [-t THREADS] [-c CTX] [--kv-f32] [--graph G] [--dump NAMES]\n"
               "                     [--ram-budget SIZE|auto] [--stats-file FILE] [--ep]\n\n"
               "Evaluates the ids as one batch (default) or one at a time (--decode, through the KV cache)\n"
               "and writes the logits of every position (0..n-1) in the LGTS format. With --ep (an MPI build, under\n"
               "mpirun) rank 0 evaluates and writes the file, the other ranks compute their share of the experts.\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int cmd_logits(int argc, char **argv) {
    logits_args a;
    memset(&a, 0, sizeof a);
    mr_cli_common_init(&a.c);
    const mr_opt opts[] = {LOGITS_OPTS(&a)};
    int pr_rc = mr_cli_parse("logits", opts, MR_NOPTS(opts), logits_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    const char *model = a.c.model, *out = a.out, *toks = a.toks, *tokfile = a.tokfile, *budget = a.c.budget,
               *stats_path = a.stats_path;
    const int decode = a.decode;
    mr_model_params mp = a.c.mp;
    FILE *stats = NULL;
    mr_pager_stats st_prev, st_now;
    double t_eval = 0;
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
    /* with --ep only rank 0 writes files; the other ranks serve experts (mr_cli_ep_join) */
    if (stats_path && mr_ep_rank() == 0 && !(stats = fopen(stats_path, "w"))) { fprintf(stderr, "error: cannot write %s\n", stats_path); goto done; }
    m = mr_model_load(model, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    mr_cli_ep_join(m);
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
