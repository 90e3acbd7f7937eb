/* moerun bench: prompt-processing (pp) and generation (tg) speed, like llama-bench. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct { const char *name; int n; double mean, sd; } bench_row;

/* One pp or tg measurement after `depth` tokens of context (not timed, not profiled). */
static int bench_run(mr_session *s, int n_vocab, int depth, int n, int is_pp, int profile, double *tps) {
    /* like llama-bench, the last token of each eval produces logits */
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(depth + n + 1));
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    if (!tok || !logits) { free(tok); free(logits); fprintf(stderr, "error: out of memory\n"); return -1; }
    unsigned x = is_pp ? 12345 : 54321; /* tg decodes other tokens than pp's prompt (other routing) */
    for (int i = 0; i < depth + n; i++) { x = x * 1103515245u + 12345u; tok[i] = (int32_t)((x >> 8) % (unsigned)n_vocab); }
    tok[0] = 1 % n_vocab;
    mr_session_reset(s);
    int rc = 0;
    mr_profile_enable(0);
    if (depth > 0 && mr_session_eval(s, tok, depth, NULL, 0) != 0) rc = -1;
    mr_profile_enable(profile);
    double t0 = mr_cli_now();
    if (rc == 0) {
        if (is_pp) {
            rc = mr_session_eval(s, tok + depth, n, logits, 0);
            if (profile) mr_profile_eval_time(0, mr_cli_now() - t0);
        } else {
            for (int i = 0; i < n && rc == 0; i++) rc = mr_session_eval(s, tok + depth + i, 1, logits, 0);
            if (profile) mr_profile_eval_time(1, mr_cli_now() - t0);
        }
    }
    double dt = mr_cli_now() - t0;
    free(tok);
    free(logits);
    if (rc != 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return -1; }
    *tps = n / dt;
    return 0;
}

/* Process CPU time in seconds (all threads): a measure that a loaded machine disturbs less than wall time. */
static double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* tg with np sequences stepping together (continuous batching's decode step): each session s[q] gets
 * `depth` tokens of context (at least one, not timed), then n steps of one mr_sessions_eval over one
 * token of every sequence. Sequences draw different pseudo-random tokens (their own routing). tps
 * counts every sequence's tokens; cpu_ms is process CPU time per token. */
static int bench_run_multi(mr_session **s, int np, int n_vocab, int depth, int n, int profile, double *tps, double *cpu_ms) {
    const int ctx = depth > 0 ? depth : 1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)np * (size_t)(ctx + n));
    int32_t *step = malloc(sizeof(int32_t) * (size_t)np);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab * (size_t)np);
    if (!tok || !step || !logits) { free(tok); free(step); free(logits); fprintf(stderr, "error: out of memory\n"); return -1; }
    int rc = 0;
    mr_profile_enable(0);
    for (int q = 0; q < np && rc == 0; q++) {
        int32_t *t = tok + (size_t)q * (size_t)(ctx + n);
        unsigned x = 54321u + 7919u * (unsigned)q;
        for (int i = 0; i < ctx + n; i++) { x = x * 1103515245u + 12345u; t[i] = (int32_t)((x >> 8) % (unsigned)n_vocab); }
        t[0] = 1 % n_vocab;
        mr_session_reset(s[q]);
        rc = mr_session_eval(s[q], t, ctx, NULL, 0);
    }
    mr_profile_enable(profile);
    const double t0 = mr_cli_now(), c0 = bench_cpu_now();
    for (int i = 0; i < n && rc == 0; i++) {
        for (int q = 0; q < np; q++) step[q] = tok[(size_t)q * (size_t)(ctx + n) + (size_t)(ctx + i)];
        rc = mr_sessions_eval(s, step, np, logits);
    }
    if (profile) mr_profile_eval_time(1, mr_cli_now() - t0);
    const double dt = mr_cli_now() - t0, dc = bench_cpu_now() - c0;
    free(tok); free(step); free(logits);
    if (rc != 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return -1; }
    *tps = (double)n * np / dt;
    *cpu_ms = 1e3 * dc / ((double)n * np);
    return 0;
}

/* Greedy generation of n tokens with the generation loop (speculative when spec->max > 0) after a
 * repetitive prompt of plen tokens (a 16-token pseudo-random pattern repeated: the kind of text
 * where n-gram drafts are accepted; random weights make acceptance depend on the prompt). Only the
 * generation is timed; tok/s counts the tokens the timed evals produced. */
/* Oracle drafts: the continuation a plain greedy run produced after the same prompt (so every
 * draft is accepted): the verification speed with perfect drafts, an upper bound for any drafter. */
typedef struct { const int32_t *ids; int n, plen; } bench_oracle;
static int bench_oracle_draft(void *user, const int32_t *hist, int n_hist, int kmax, int32_t *out) {
    const bench_oracle *o = user;
    (void)hist;
    int at = n_hist - o->plen, k = 0; /* generated tokens so far */
    for (; k < kmax && at + k >= 0 && at + k < o->n; k++) out[k] = o->ids[at + k];
    return k;
}

static int bench_gen(mr_session *s, int n_vocab, int plen, int n, mr_cli_spec *spec, int spec_on, int profile, double *tps,
                     mr_gen_stats *gs, bench_oracle *oracle, int32_t *out_ids) {
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)plen);
    if (!tok) { fprintf(stderr, "error: out of memory\n"); return -1; }
    unsigned x = 777;
    for (int i = 0; i < plen; i++) {
        if (i < 16) { x = x * 1103515245u + 12345u; tok[i] = (int32_t)((x >> 8) % (unsigned)n_vocab); }
        else tok[i] = tok[i - 16];
    }
    tok[0] = 1 % n_vocab;
    mr_session_reset(s);
    mr_gen_params gp;
    mr_gen_params_default(&gp);
    gp.sampler.temperature = 0;
    gp.max_tokens = n;
    gp.ignore_eos = 1;
    if (spec_on) { gp.spec_max = spec->max; gp.spec_ngram = spec->ngram; gp.draft = spec->draft; gp.mtp = spec->mtp; }
    if (spec_on && oracle) { oracle->plen = plen; gp.draft_fn = bench_oracle_draft; gp.draft_user = oracle; }
    mr_gen *g = mr_gen_new(s, &gp);
    int rc = g ? 0 : -1;
    mr_profile_enable(0);
    if (rc == 0 && mr_gen_prefill(g, tok, plen) != 0) rc = -1;
    mr_profile_enable(profile);
    double t0 = mr_cli_now();
    mr_gen_step st = {0};
    while (rc == 0 && !st.finish) rc = mr_gen_next(g, &st);
    double dt = mr_cli_now() - t0;
    if (profile) mr_profile_eval_time(1, dt);
    if (rc == 0) {
        mr_gen_get_stats(g, gs);
        if (out_ids) {
            const int32_t *ids;
            int k = mr_gen_tokens(g, &ids);
            memcpy(out_ids, ids, sizeof(int32_t) * (size_t)(k < n ? k : n));
        }
        *tps = (gs->n_decode + gs->n_draft_accepted) / dt;
    } else fprintf(stderr, "error: %s\n", mr_last_error());
    mr_gen_free(g);
    free(tok);
    return rc;
}

#define BENCH_MAX_LIST 16
typedef struct { int v[BENCH_MAX_LIST], n; long lo, hi; } bench_list;

/* "64,128,512" (llama-bench's lists): every value in [lo, hi] */
static int bench_opt_list(const char *opt, const char *v, void *dst) {
    bench_list *l = dst;
    l->n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (l->n == BENCH_MAX_LIST) { fprintf(stderr, "error: %s: at most %d values\n", opt, BENCH_MAX_LIST); return -1; }
        if (mr_cli_int(opt, t, l->lo, l->hi, &l->v[l->n])) return -1;
        l->n++;
    }
    if (!l->n) { fprintf(stderr, "error: bad value '%s' for %s (want a comma-separated list)\n", v, opt); return -1; }
    return 0;
}

typedef struct {
    mr_cli_common c;
    bench_list pp, tg, threads, depth, par;
    int reps, profile, no_warmup;
    const char *fmt, *plot;
    mr_cli_spec spec;
} bench_args;

/* the context is depth + max(pp, tg) + 1: bounds keep that an int */
#define BENCH_OPTS(b) \
    MR_CLI_OPT_MODEL(&(b)->c), \
    {.names = "-p, --n-prompt", .arg = "N[,N..]", .help = "prompt lengths for the pp test (default 512; 0 skips it)", \
     .kind = MR_OPT_FN, .dst = &(b)->pp, .fn = bench_opt_list}, \
    {.names = "-n, --n-gen", .arg = "N[,N..]", .help = "tokens generated in the tg test (default 128; 0 skips it)", \
     .kind = MR_OPT_FN, .dst = &(b)->tg, .fn = bench_opt_list}, \
    {.names = "-r, --repetitions", .arg = "N", .help = "repetitions (default 3)", .kind = MR_OPT_INT, .dst = &(b)->reps, \
     .lo = 1, .hi = INT_MAX}, \
    {.names = "-t, --threads", .arg = "N[,N..]", .help = "thread counts (default 0 = physical cores, at most\n" \
     "the CPU quota and affinity mask)", .kind = MR_OPT_FN, \
     .dst = &(b)->threads, .fn = bench_opt_list}, \
    {.names = "-d, --depth, --n-depth", .arg = "D[,D..]", .help = "run each test after D tokens already in the context (default 0)", \
     .kind = MR_OPT_FN, .dst = &(b)->depth, .fn = bench_opt_list}, \
    {.names = "-np, --parallel", .arg = "N[,N..]", .help = "each tg test also with N sequences decoding together, one\n" \
     "forward pass per step (\"tgM xN\": t/s counts all N; needs multi-sequence evaluation)", .kind = MR_OPT_FN, \
     .dst = &(b)->par, .fn = bench_opt_list}, \
    MR_CLI_OPT_BUDGET(&(b)->c), \
    {.names = "-o, --output", .arg = "FMT", .help = "output format: md (default), csv, json", .kind = MR_OPT_STR, .dst = &(b)->fmt}, \
    {.names = "--plot", .arg = "FILE.svg", .help = "also draw tok/s per test and thread count as an SVG bar chart", \
     .kind = MR_OPT_STR, .dst = &(b)->plot}, \
    {.names = "--no-warmup", .help = "skip the untimed warm-up run of each test", .kind = MR_OPT_FLAG, .dst = &(b)->no_warmup, .ival = 1}, \
    {.names = "--profile", .help = "print the per-operator time table after the runs", .kind = MR_OPT_FLAG, .dst = &(b)->profile, \
     .ival = 1}, \
    MR_CLI_OPTS_APPROX(&(b)->c), \
    MR_CLI_OPTS_SPEC(&(b)->spec), \
    MR_CLI_OPTS_IGNORED

static void bench_usage(FILE *f) {
    bench_args b;
    const mr_opt opts[] = {BENCH_OPTS(&b)};
    fprintf(f, "usage: moerun bench -m MODEL [-p N,..] [-n N,..] [-t N,..] [-d D,..] [-r N] [options]\n\n"
               "Measures prompt processing (pp: N tokens in one batch) and text generation (tg: N tokens one\n"
               "at a time) in tokens/second, mean +- stddev over repetitions. Token ids are pseudo-random.\n"
               "Lists run every combination (threads x depth x test), like llama-bench.\n"
               "With --spec (or -md) each tg test also runs as greedy generation after a repetitive prompt\n"
               "(depth tokens, default 64): plainly (\"tgN gen\"), speculatively (\"tgN spec\"), and with oracle drafts\n"
               "(\"tgN oracle\": the plain run's own continuation, all accepted: the upper bound of any drafter).\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int list_max(const bench_list *l) {
    int m = 0;
    for (int i = 0; i < l->n; i++) m = l->v[i] > m ? l->v[i] : m;
    return m;
}

/* tok/s per test (groups) and thread count (bars) */
static int bench_plot(const char *path, const char *model, const bench_row *rows, const int *thr, const int *dep, int n) {
    char cats[64][48], sers[16][24];
    int ncat = 0, nser = 0, ci[256], si[256];
    if (n > 256) n = 256;
    for (int i = 0; i < n; i++) {
        char c[48], t[24];
        if (dep[i]) snprintf(c, sizeof c, "%s%d @ d%d", rows[i].name, rows[i].n, dep[i]);
        else snprintf(c, sizeof c, "%s%d", rows[i].name, rows[i].n);
        snprintf(t, sizeof t, "%d thread%s", thr[i], thr[i] == 1 ? "" : "s");
        int k = 0;
        while (k < ncat && strcmp(cats[k], c)) k++;
        if (k == ncat && ncat < 64) snprintf(cats[ncat++], sizeof cats[0], "%s", c);
        ci[i] = k;
        k = 0;
        while (k < nser && strcmp(sers[k], t)) k++;
        if (k == nser && nser < 16) snprintf(sers[nser++], sizeof sers[0], "%s", t);
        si[i] = k;
    }
    double vals[64 * 16] = {0};
    const char *cp[64], *sp[16];
    for (int i = 0; i < ncat; i++) cp[i] = cats[i];
    for (int i = 0; i < nser; i++) sp[i] = sers[i];
    for (int i = 0; i < n; i++)
        if (ci[i] < 64 && si[i] < 16) vals[ci[i] * nser + si[i]] = rows[i].mean;
    char title[160];
    snprintf(title, sizeof title, "moerun bench: %s", model);
    return mr_svg_bars(path, title, "tokens / second", cp, ncat, sp, nser, vals, "tok/s");
}

/* One result row in the chosen format. approx: the model's active MoE approximation ("off" when none):
 * a column in md only when one is active (the default table keeps llama-bench's columns), always
 * the last field in csv (quoted) and json. */
static void bench_print_row(const char *fmt, const char *model, const char *arch, double gib, int nt, const char *test,
                            const char *name, int n, int depth, int reps, double mean, double sd, const char *approx, int first) {
    if (!strcmp(fmt, "md")) {
        printf("| %s | %s | %.2f GiB | %d | %s | %.2f ± %.2f |", model, arch, gib, nt, test, mean, sd);
        if (strcmp(approx, "off")) printf(" %s |", approx);
        printf("\n");
    } else if (!strcmp(fmt, "csv"))
        printf("%s,%s,%.4f,%d,%s,%d,%d,%.4f,%.4f,\"%s\"\n", model, arch, gib, nt, name, n, depth, mean, sd, approx);
    else
        printf("%s{\"model\":\"%s\",\"arch\":\"%s\",\"size_gib\":%.4f,\"threads\":%d,\"test\":\"%s\",\"n\":%d,"
               "\"depth\":%d,\"reps\":%d,\"tps_mean\":%.4f,\"tps_sd\":%.4f,\"moe_approx\":\"%s\"}",
               first ? "" : ",", model, arch, gib, nt, name, n, depth, reps, mean, sd, approx);
    fflush(stdout);
}

static int cmd_bench(int argc, char **argv) {
    bench_args b;
    memset(&b, 0, sizeof b);
    mr_cli_common_init(&b.c);
    mr_cli_spec_default(&b.spec);
    b.pp = (bench_list){{512}, 1, 0, INT_MAX / 4};
    b.tg = (bench_list){{128}, 1, 0, INT_MAX / 4};
    b.threads = (bench_list){{0}, 1, 0, MR_CLI_MAX_THREADS};
    b.depth = (bench_list){{0}, 1, 0, INT_MAX / 4};
    b.par = (bench_list){{1}, 1, 1, 64};
    b.reps = 3;
    b.fmt = "md";
    const mr_opt opts[] = {BENCH_OPTS(&b)};
    int pr_rc = mr_cli_parse("bench", opts, MR_NOPTS(opts), bench_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    if (!b.c.model) { fprintf(stderr, "error: -m MODEL is required (see moerun bench --help)\n"); return 1; }
    if (strcmp(b.fmt, "md") && strcmp(b.fmt, "csv") && strcmp(b.fmt, "json")) {
        fprintf(stderr, "error: -o must be md, csv or json\n");
        return 1;
    }
    const int gen_depth_min = 64; /* the repetitive prompt of the gen/spec rows */
    const int n_ctx = (list_max(&b.depth) > gen_depth_min ? list_max(&b.depth) : gen_depth_min) +
                      (list_max(&b.pp) > list_max(&b.tg) ? list_max(&b.pp) : list_max(&b.tg)) + 1;
    b.c.mp.n_ctx = n_ctx;
    const int n_tg_kinds = b.spec.max ? 4 : 1; /* tg, tg gen, tg spec, tg oracle */
    int32_t *gen_ids = malloc(sizeof(int32_t) * (size_t)(list_max(&b.tg) + 1));
    if (!gen_ids) { fprintf(stderr, "error: out of memory\n"); return 1; }
    /* --parallel: rows "tgM xN" (also for N = 1 when listed beside others) */
    const int par_on = b.par.n > 1 || b.par.v[0] > 1;
    char par_names[BENCH_MAX_LIST][16];
    for (int k = 0; k < b.par.n; k++) snprintf(par_names[k], sizeof par_names[k], "tg x%d", b.par.v[k]);
    const int max_rows = b.threads.n * b.depth.n * (b.pp.n + b.tg.n * (n_tg_kinds + b.par.n));
    bench_row *rows = calloc((size_t)max_rows, sizeof *rows);
    int *row_threads = calloc((size_t)max_rows, sizeof *row_threads), *row_depth = calloc((size_t)max_rows, sizeof *row_depth);
    if (!rows || !row_threads || !row_depth) { free(rows); free(row_threads); free(row_depth); free(gen_ids); fprintf(stderr, "error: out of memory\n"); return 1; }
    int nrows = 0, rc = 0;
    struct stat st;
    const double gib = stat(b.c.model, &st) == 0 ? (double)st.st_size / (1024.0 * 1024 * 1024) : 0;
    const char *base = strrchr(b.c.model, '/') ? strrchr(b.c.model, '/') + 1 : b.c.model;
    char arch[64] = "";
    mr_cli_catch_sigint();
    /* the setting as requested on the command line (mr_cli_load applies it to every load) */
    char approx[256] = "off";
    if (mr_approx_params_enabled(&b.c.ap)) mr_approx_format(&b.c.ap, approx, sizeof approx);
    if (!strcmp(b.fmt, "md"))
        printf("| model | arch | size | threads | test | t/s |%s\n|---|---|---:|---:|---:|---:|%s\n",
               strcmp(approx, "off") ? " moe approx |" : "", strcmp(approx, "off") ? "---|" : "");
    else if (!strcmp(b.fmt, "csv")) printf("model,arch,size_gib,threads,test,n,depth,tps_mean,tps_sd,moe_approx\n");
    else printf("[");
    /* one model load per thread count (the pool is made at load) */
    for (int ti = 0; ti < b.threads.n && rc == 0; ti++) {
        b.c.mp.n_threads = b.threads.v[ti];
        int intr;
        b.c.mp.mtp |= b.spec.mtp || b.spec.draft_path; /* an MTP sidecar as -md reads the trunk's states */
        mr_model *m = mr_cli_load(&b.c, NULL, &intr);
        if (!m) { rc = intr ? 130 : 1; break; }
        snprintf(arch, sizeof arch, "%s", mr_model_arch(m));
        mr_session *s = mr_session_new(m, n_ctx);
        if (!s) { fprintf(stderr, "error: %s\n", mr_last_error()); mr_model_free(m); rc = 1; break; }
        /* the sessions of the parallel rows (ss[0] is s) */
        mr_session *ss[64] = {s};
        for (int q = 1; q < list_max(&b.par) && rc == 0; q++)
            if (!(ss[q] = mr_session_new(m, n_ctx))) { fprintf(stderr, "error: %s\n", mr_last_error()); rc = 1; }
        if (rc == 0 && par_on && !mr_model_can_batch(m)) {
            fprintf(stderr, "error: --parallel: %s has no multi-sequence evaluation\n", arch);
            rc = 1;
        }
        if (rc) { for (int q = 0; q < 64; q++) mr_session_free(ss[q]); mr_model_free(m); break; }
        if (b.profile) mr_profile_reset();
        const int nt = mr_model_n_threads(m);
        if (b.spec.max && !b.spec.draft && mr_cli_spec_setup(&b.spec, nt, n_ctx, &(mr_gen_params){0})) { rc = 1; mr_session_free(s); mr_model_free(m); break; }
        for (int di = 0; di < b.depth.n && rc == 0; di++) {
            const int depth = b.depth.v[di];
            for (int t = 0; t < b.pp.n + b.tg.n * n_tg_kinds && rc == 0; t++) {
                const int is_pp = t < b.pp.n, kind = is_pp ? 0 : (t - b.pp.n) / b.tg.n; /* 0 tg, 1 gen, 2 spec, 3 oracle */
                const int n = is_pp ? b.pp.v[t] : b.tg.v[(t - b.pp.n) % b.tg.n];
                if (n == 0) continue;
                if (kind) { /* greedy generation, plain or speculative */
                    const int plen = depth > gen_depth_min ? depth : gen_depth_min;
                    double tps = 0, sum = 0, sum2 = 0, tg_s = 0;
                    mr_gen_stats gs = {0}, tot = {0};
                    mr_pager_stats ps0, ps1;
                    const int pg = b.c.budget && mr_model_pager_stats(m, &ps0) == 0;
                    long produced = 0;
                    for (int r = 0; r < b.reps && rc == 0; r++) {
                        if (mr_cli_interrupted) { rc = 130; break; }
                        /* the oracle replays the plain run's continuation (same prompt, greedy) */
                        bench_oracle orc = {gen_ids, n, plen};
                        if (bench_gen(s, mr_model_n_vocab(m), plen, n, &b.spec, kind >= 2, b.profile, &tps, &gs, kind == 3 ? &orc : NULL,
                                      kind == 1 ? gen_ids : NULL) != 0) rc = 1;
                        sum += tps;
                        sum2 += tps * tps;
                        if (tps > 0) tg_s += (gs.n_decode + gs.n_draft_accepted) / tps;
                        produced += gs.n_decode + gs.n_draft_accepted;
                        tot.n_spec_steps += gs.n_spec_steps; tot.n_drafted += gs.n_drafted; tot.n_draft_accepted += gs.n_draft_accepted;
                    }
                    if (rc) break;
                    char label[64];
                    static const char *const kname[4] = {"", "gen", "spec", "oracle"};
                    snprintf(label, sizeof label, "tg%d %s (timed runs only)", n, kname[kind]);
                    if (pg && mr_model_pager_stats(m, &ps1) == 0) mr_pager_print_delta(stderr, m, label, &ps1, &ps0, produced, tg_s);
                    if (kind >= 2)
                        fprintf(stderr, "tg%d %s: %d verification steps, %d drafted, %d accepted (%.1f%%), %.2f tokens per step\n", n,
                                kname[kind], tot.n_spec_steps, tot.n_drafted, tot.n_draft_accepted,
                                tot.n_drafted ? 100.0 * tot.n_draft_accepted / tot.n_drafted : 0.0,
                                tot.n_spec_steps ? (double)(tot.n_spec_steps + tot.n_draft_accepted) / tot.n_spec_steps : 0.0);
                    bench_row *br = &rows[nrows];
                    br->name = kind == 3 ? "tg oracle" : kind == 2 ? "tg spec" : "tg gen";
                    br->n = n;
                    br->mean = sum / b.reps;
                    br->sd = b.reps > 1 ? sqrt(fmax(0, (sum2 - sum * sum / b.reps) / (b.reps - 1))) : 0;
                    row_threads[nrows] = nt;
                    row_depth[nrows] = depth;
                    char test[48];
                    snprintf(test, sizeof test, "tg%d %s @ d%d", n, kname[kind], plen);
                    bench_print_row(b.fmt, base, arch, gib, nt, test, br->name, n, plen, b.reps, br->mean, br->sd, approx, !nrows);
                    nrows++;
                    continue;
                }
                double sum = 0, sum2 = 0, tps = 0, tg_s = 0;
                /* warm-up like llama-bench (the whole prompt, or one generated token): page faults, caches */
                if (!b.no_warmup && bench_run(s, mr_model_n_vocab(m), depth, is_pp ? n : 1, is_pp, 0, &tps) != 0) rc = 1;
                mr_pager_stats ps0, ps1;
                const int tg_pager = b.c.budget && !is_pp && mr_model_pager_stats(m, &ps0) == 0;
                for (int r = 0; r < b.reps && rc == 0; r++) {
                    if (mr_cli_interrupted) { rc = 130; break; }
                    if (bench_run(s, mr_model_n_vocab(m), depth, n, is_pp, b.profile, &tps) != 0) rc = 1;
                    if (tps > 0) tg_s += n / tps;
                    sum += tps;
                    sum2 += tps * tps;
                }
                if (rc) break;
                /* the pager during the timed decode runs only (the summary at the end mixes in pp) */
                if (tg_pager && mr_model_pager_stats(m, &ps1) == 0) {
                    char label[64];
                    snprintf(label, sizeof label, "tg%d (timed runs only)", n);
                    mr_pager_print_delta(stderr, m, label, &ps1, &ps0, (long)n * b.reps, tg_s);
                }
                bench_row *br = &rows[nrows];
                br->name = is_pp ? "pp" : "tg";
                br->n = n;
                br->mean = sum / b.reps;
                br->sd = b.reps > 1 ? sqrt(fmax(0, (sum2 - sum * sum / b.reps) / (b.reps - 1))) : 0;
                row_threads[nrows] = nt;
                row_depth[nrows] = depth;
                /* rows are printed as they are measured (a long run shows progress) */
                char test[48];
                if (depth) snprintf(test, sizeof test, "%s%d @ d%d", br->name, n, depth);
                else snprintf(test, sizeof test, "%s%d", br->name, n);
                bench_print_row(b.fmt, base, arch, gib, nt, test, br->name, n, depth, b.reps, br->mean, br->sd, approx, !nrows);
                nrows++;
                if (is_pp || !par_on) continue;
                /* the same decode with 1..N sequences per step, alternating within each repetition */
                double psum[BENCH_MAX_LIST] = {0}, psum2[BENCH_MAX_LIST] = {0}, pcpu[BENCH_MAX_LIST] = {0};
                for (int k = 0; k < b.par.n && rc == 0 && !b.no_warmup; k++)
                    if (bench_run_multi(ss, b.par.v[k], mr_model_n_vocab(m), depth, 1, 0, &tps, &pcpu[k])) rc = 1;
                for (int r = 0; r < b.reps && rc == 0; r++)
                    for (int k = 0; k < b.par.n && rc == 0; k++) {
                        if (mr_cli_interrupted) { rc = 130; break; }
                        double cms = 0;
                        if (bench_run_multi(ss, b.par.v[k], mr_model_n_vocab(m), depth, n, b.profile, &tps, &cms)) rc = 1;
                        psum[k] += tps;
                        psum2[k] += tps * tps;
                        pcpu[k] += cms;
                    }
                if (rc) break;
                for (int k = 0; k < b.par.n; k++) {
                    br = &rows[nrows];
                    br->name = par_names[k];
                    br->n = n;
                    br->mean = psum[k] / b.reps;
                    br->sd = b.reps > 1 ? sqrt(fmax(0, (psum2[k] - psum[k] * psum[k] / b.reps) / (b.reps - 1))) : 0;
                    row_threads[nrows] = nt;
                    row_depth[nrows] = depth;
                    snprintf(test, sizeof test, "tg%d x%d", n, b.par.v[k]);
                    if (depth) snprintf(test + strlen(test), sizeof test - strlen(test), " @ d%d", depth);
                    bench_print_row(b.fmt, base, arch, gib, nt, test, br->name, n, depth, b.reps, br->mean, br->sd, approx, !nrows);
                    fprintf(stderr, "%s: %.2f ms CPU per token (process CPU time, mean of %d runs)\n", test, pcpu[k] / b.reps, b.reps);
                    nrows++;
                }
            }
        }
        if (rc == 0) {
            if (b.profile) mr_profile_report(stdout);
            if (b.c.budget) mr_pager_print_summary(stderr, m, 0, 0, 0, 0);
            if (mr_approx_params_enabled(&b.c.ap)) mr_cli_approx_report(m, stderr);
        }
        for (int q = 0; q < 64; q++) mr_session_free(ss[q]);
        mr_model_free(m);
    }
    mr_cli_spec_free(&b.spec);
    free(gen_ids);
    if (!strcmp(b.fmt, "json")) printf("]\n");
    if (rc == 0 && b.plot) rc = bench_plot(b.plot, base, rows, row_threads, row_depth, nrows) ? 1 : 0;
    free(rows); free(row_threads); free(row_depth);
    return rc;
}

MR_COMMAND(bench, "measure prompt-processing and generation speed (like llama-bench)", cmd_bench)
