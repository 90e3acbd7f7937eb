/* moerun bench: prompt-processing (pp) and generation (tg) speed, like llama-bench. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: moerun bench -m MODEL [-p N] [-n N] [-r N] [-t N] [--depth D] [--ram-budget SIZE]\n"
            "                    [-o md|csv|json] [--no-warmup] [--profile] [--moe-prune P] [--moe-skip T] ...\n\n"
            "Measures prompt processing (pp: N tokens in one batch) and text generation (tg: N tokens one\n"
            "at a time) in tokens/second, mean +- stddev over repetitions. Token ids are pseudo-random.\n"
            "  -p N             prompt length for the pp test (default 512; 0 skips it)\n"
            "  -n N             tokens generated in the tg test (default 128; 0 skips it)\n"
            "  -r N             repetitions (default 3)\n"
            "  -t N             threads (default 0 = physical cores)\n"
            "  --depth D        run each test after D tokens already in the context (default 0)\n"
            "  --ram-budget S   RAM for routed experts, e.g. 8G, 512M, auto (default: no paging); pager summary at exit\n"
            "  -o FMT           output format: md (default), csv, json\n"
            "  --no-warmup      skip the untimed warm-up run of each test\n"
            "  --profile        print the per-operator time table after the runs\n"
            MR_CLI_APPROX_HELP);
}

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

static int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *fmt = "md";
    int pp = 512, tg = 128, reps = 3, threads = 0, depth = 0, profile = 0, warmup = 1;
    const char *budget = NULL;
    mr_approx_params ap;
    mr_approx_params_default(&ap);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { bench_usage(stdout); return 0; }
        int af = mr_cli_approx_flag(argc, argv, &i, &ap);
        if (af < 0) return 1;
        if (af) continue;
        if (!strcmp(a, "--profile")) { profile = 1; continue; }
        if (!strcmp(a, "--no-warmup")) { warmup = 0; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "error: unknown or incomplete option '%s' (see moerun bench --help)\n", a); return 1; }
        const char *v = argv[++i];
        int bad = 0;
        /* the context is depth + max(pp, tg) + 1: bounds keep that an int */
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-p")) bad = mr_cli_int(a, v, 0, INT_MAX / 4, &pp);
        else if (!strcmp(a, "-n")) bad = mr_cli_int(a, v, 0, INT_MAX / 4, &tg);
        else if (!strcmp(a, "-r")) bad = mr_cli_int(a, v, 1, INT_MAX, &reps);
        else if (!strcmp(a, "-t")) bad = mr_cli_int(a, v, 0, MR_CLI_MAX_THREADS, &threads);
        else if (!strcmp(a, "--depth")) bad = mr_cli_int(a, v, 0, INT_MAX / 4, &depth);
        else if (!strcmp(a, "-o")) fmt = v;
        else if (!strcmp(a, "--ram-budget")) budget = v;
        else { fprintf(stderr, "error: unknown option %s (see moerun bench --help)\n", a); return 1; }
        if (bad) return 1;
    }
    if (!model) { fprintf(stderr, "error: -m MODEL is required (see moerun bench --help)\n"); return 1; }
    if (strcmp(fmt, "md") && strcmp(fmt, "csv") && strcmp(fmt, "json")) {
        fprintf(stderr, "error: -o must be md, csv or json\n");
        return 1;
    }
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = threads;
    int n_ctx = depth + (pp > tg ? pp : tg) + 1;
    mp.n_ctx = n_ctx;
    if (budget && mr_ram_budget_parse(budget, model, n_ctx, &mp.ram_budget)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        return 1;
    }
    double t0 = mr_cli_now();
    mr_model *m = mr_model_load(model, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    if (mr_model_set_approx(m, &ap)) { fprintf(stderr, "error: %s\n", mr_last_error()); mr_model_free(m); return 1; }
    fprintf(stderr, "loaded %s in %.2f s\n", model, mr_cli_now() - t0);
    mr_session *s = mr_session_new(m, n_ctx);
    if (!s) { fprintf(stderr, "error: %s\n", mr_last_error()); mr_model_free(m); return 1; }
    if (profile) mr_profile_reset();
    bench_row rows[2];
    int nrows = 0, rc = 0;
    mr_pager_stats ps0, ps1;
    double tg_s = 0;
    for (int t = 0; t < 2 && rc == 0; t++) {
        int n = t == 0 ? pp : tg;
        if (n == 0) continue;
        double sum = 0, sum2 = 0, tps = 0;
        /* warm-up like llama-bench (the whole prompt, or one generated token): page faults, caches */
        if (warmup && bench_run(s, mr_model_n_vocab(m), depth, t == 0 ? n : 1, t == 0, 0, &tps) != 0) rc = 1;
        if (budget && t == 1 && mr_model_pager_stats(m, &ps0)) budget = NULL;
        for (int r = 0; r < reps && rc == 0; r++) {
            if (bench_run(s, mr_model_n_vocab(m), depth, n, t == 0, profile, &tps) != 0) rc = 1;
            if (t == 1 && tps > 0) tg_s += n / tps;
            sum += tps;
            sum2 += tps * tps;
        }
        bench_row *br = &rows[nrows++];
        br->name = t == 0 ? "pp" : "tg";
        br->n = n;
        br->mean = sum / reps;
        br->sd = reps > 1 ? sqrt(fmax(0, (sum2 - sum * sum / reps) / (reps - 1))) : 0;
    }
    if (rc == 0) {
        struct stat st;
        double gib = stat(model, &st) == 0 ? (double)st.st_size / (1024.0 * 1024 * 1024) : 0;
        const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
        int nt = mr_model_n_threads(m);
        if (!strcmp(fmt, "md")) {
            printf("| model | arch | size | threads | test | t/s |\n|---|---|---:|---:|---:|---:|\n");
            for (int i = 0; i < nrows; i++) {
                char test[48];
                if (depth) snprintf(test, sizeof test, "%s%d @ d%d", rows[i].name, rows[i].n, depth);
                else snprintf(test, sizeof test, "%s%d", rows[i].name, rows[i].n);
                printf("| %s | %s | %.2f GiB | %d | %s | %.2f ± %.2f |\n", base, mr_model_arch(m), gib, nt, test,
                       rows[i].mean, rows[i].sd);
            }
        } else if (!strcmp(fmt, "csv")) {
            printf("model,arch,size_gib,threads,test,n,depth,tps_mean,tps_sd\n");
            for (int i = 0; i < nrows; i++)
                printf("%s,%s,%.4f,%d,%s,%d,%d,%.4f,%.4f\n", base, mr_model_arch(m), gib, nt, rows[i].name, rows[i].n,
                       depth, rows[i].mean, rows[i].sd);
        } else {
            printf("[");
            for (int i = 0; i < nrows; i++)
                printf("%s{\"model\":\"%s\",\"arch\":\"%s\",\"size_gib\":%.4f,\"threads\":%d,\"test\":\"%s\",\"n\":%d,"
                       "\"depth\":%d,\"reps\":%d,\"tps_mean\":%.4f,\"tps_sd\":%.4f}",
                       i ? "," : "", base, mr_model_arch(m), gib, nt, rows[i].name, rows[i].n, depth, reps, rows[i].mean,
                       rows[i].sd);
            printf("]\n");
        }
        if (profile) mr_profile_report(stdout);
        if (budget) mr_pager_print_summary(stderr, m, 0, 0, 0, 0);
        if (budget && tg > 0 && mr_model_pager_stats(m, &ps1) == 0)
            mr_pager_print_delta(stderr, "tg (timed runs only)", &ps1, &ps0, (long)tg * reps, tg_s);
        if (mr_approx_params_enabled(&ap)) mr_cli_approx_report(m, stderr);
    }
    mr_session_free(s);
    mr_model_free(m);
    return rc;
}

MR_COMMAND(bench, "measure prompt-processing and generation speed (like llama-bench)", cmd_bench)
