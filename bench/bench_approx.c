/* make bench-approx: speed of the MoE approximations (docs/APPROX.md), a benchmark, not a test.
 *
 * For each setting: decode (one token per eval, windows of --window tokens from BOS) and prefill
 * (batches of --window tokens) over the first --tokens tokens of a text, reporting milliseconds of
 * process CPU time per token (best of --reps passes: on a shared machine CPU time is far steadier
 * than wall time; with -t 1 it is the single thread's time), the speedup against the exact model,
 * and the experts / rows / down blocks the setting skipped. The settings take turns within each
 * pass, so that load from other processes affects them alike; the first setting is the reference.
 *
 * With --ram-budget SIZE the experts are paged: the decode passes also report the expert reads
 * (pager misses) and bytes read per token.
 *
 * Usage: bench_approx [-m MODEL] [-f TEXT] [-t THREADS] [--tokens N] [--window N] [--reps R]
 *                     [--ram-budget SIZE] [SPEC ...]   (default specs: off, prune=0.9, skip=0.02, ...) */
#include "moerun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* CPU seconds for the tokens: decode (one at a time) or prefill (one batch per window) */
static double pass(mr_session *s, const int32_t *ids, int n, int window, int bos, int decode) {
    int32_t *w = malloc(sizeof(int32_t) * (size_t)window);
    double t0 = cpu_now();
    for (int p = 0; p + window <= n; p += window) {
        memcpy(w, ids + p, sizeof(int32_t) * (size_t)window);
        if (bos >= 0) w[0] = bos;
        mr_session_reset(s);
        if (decode) {
            for (int i = 0; i < window; i++)
                if (mr_session_eval(s, w + i, 1, NULL, 0)) { fprintf(stderr, "error: %s\n", mr_last_error()); exit(1); }
        } else if (mr_session_eval(s, w, window, NULL, 0)) { fprintf(stderr, "error: %s\n", mr_last_error()); exit(1); }
    }
    free(w);
    return cpu_now() - t0;
}

int main(int argc, char **argv) {
    const char *model = "../shared/models/kjv-moe-q8_0.gguf", *text = "../shared/golden/ppl/kjv-valid.txt";
    int threads = 1, n_tok = 1024, window = 128, reps = 3, n_specs = 0;
    const char *budget = NULL;
    const char *specs[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-m") && has) model = argv[++i];
        else if (!strcmp(a, "-f") && has) text = argv[++i];
        else if (!strcmp(a, "-t") && has) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--tokens") && has) n_tok = atoi(argv[++i]);
        else if (!strcmp(a, "--window") && has) window = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && has) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--ram-budget") && has) budget = argv[++i];
        else if (a[0] == '-') { fprintf(stderr, "usage: see the comment at the top of bench/bench_approx.c\n"); return 1; }
        else if (n_specs < 64) specs[n_specs++] = a;
    }
    if (!n_specs) {
        static const char *def[] = {"off", "prune=0.9", "prune=0.8", "tau=0.3", "skip=0.02", "skip=0.05", "skip=0.1",
                                    "skip=0.2", "skip=0.5", "prune=0.9 skip=0.02", "prune=0.8 skip=0.05"};
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) specs[n_specs++] = def[i];
    }
    if (window < 2 || n_tok < window || reps < 1) { fprintf(stderr, "error: bad --tokens/--window/--reps\n"); return 1; }
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = threads;
    mp.n_ctx = window;
    if (budget && mr_ram_budget_parse(budget, model, window, &mp.ram_budget)) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    mr_model *m = mr_model_load(model, &mp);
    char *buf = read_all(text);
    if (!m || !buf) { fprintf(stderr, "error: %s\n", m ? "cannot read the text" : mr_last_error()); return 1; }
    mr_tokenizer *tk = mr_model_tokenizer(m);
    int cap = (int)strlen(buf) + 16;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    int n = tk ? mr_tokenize(tk, buf, strlen(buf), 1, 0, ids, cap) : -1;
    if (n < n_tok) { fprintf(stderr, "error: the text has %d tokens, fewer than --tokens %d\n", n, n_tok); return 1; }
    const int bos = mr_tokenizer_adds_bos(tk) ? mr_tokenizer_bos(tk) : -1;
    mr_session *s = mr_session_new(m, window);
    if (!s) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    printf("%s, %d threads, %d tokens in windows of %d, best of %d, CPU ms/token\n\n", model, mr_model_n_threads(m),
           n_tok, window, reps);
    mr_pager_stats ps0, ps1;
    const int paging = mr_model_pager_stats(m, &ps0) == 0 && ps0.paging;
    if (paging) printf("expert pager: %d slots of %.0f KiB (%.1f%% of the experts)\n\n", ps0.n_slots, ps0.slot_bytes / 1024.0,
                       100.0 * (double)ps0.arena_bytes / (double)ps0.expert_bytes);
    printf("| setting | experts/token | rows skipped | down blocks skipped | decode ms/tok | speedup | prefill ms/tok | speedup |%s\n",
           paging ? " expert reads/tok (decode) | KiB read/tok |" : "");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|%s\n", paging ? "---:|---:|" : "");
    /* settings interleaved within each repetition, so a burst of load on the machine hits them all */
    double *dec = malloc(sizeof(double) * (size_t)n_specs), *pre = malloc(sizeof(double) * (size_t)n_specs);
    double *miss = calloc((size_t)n_specs, sizeof(double)), *bytes = calloc((size_t)n_specs, sizeof(double));
    mr_approx_stats *st = calloc((size_t)n_specs, sizeof *st);
    mr_approx_params *ap = malloc(sizeof *ap * (size_t)n_specs);
    for (int k = 0; k < n_specs; k++) {
        mr_approx_params_default(&ap[k]);
        if (mr_approx_parse(specs[k], &ap[k])) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
        dec[k] = pre[k] = 1e30;
    }
    pass(s, ids, window, window, bos, 1); /* warm-up */
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < n_specs; k++) {
            if (mr_model_set_approx(m, &ap[k])) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
            mr_model_approx_stats_reset(m);
            mr_model_pager_stats(m, &ps0);
            double t = pass(s, ids, n_tok, window, bos, 1);
            mr_model_pager_stats(m, &ps1);
            mr_model_approx_stats(m, &st[k]);
            miss[k] += (double)(ps1.misses - ps0.misses);
            bytes[k] += (double)(ps1.bytes_read - ps0.bytes_read);
            if (t < dec[k]) dec[k] = t;
            t = pass(s, ids, n_tok, window, bos, 0);
            if (t < pre[k]) pre[k] = t;
        }
    const int used = (n_tok / window) * window;
    for (int k = 0; k < n_specs; k++) {
        const double d = 1e3 * dec[k] / used, p = 1e3 * pre[k] / used;
        char ek[32] = "all (exact)", rs[32] = "-", bs[32] = "-";
        if (st[k].token_layers) snprintf(ek, sizeof ek, "%.3f", (double)st[k].experts_kept / (double)st[k].token_layers);
        if (st[k].rows_total) {
            snprintf(rs, sizeof rs, "%.1f%%", 100.0 * (double)st[k].rows_skipped / (double)st[k].rows_total);
            snprintf(bs, sizeof bs, "%.1f%%", 100.0 * (double)st[k].blocks_skipped / (double)st[k].blocks_total);
        }
        printf("| %s | %s | %s | %s | %.3f | %.2fx | %.3f | %.2fx |", specs[k], ek, rs, bs, d, dec[0] / dec[k], p,
               pre[0] / pre[k]);
        if (paging) printf(" %.3f | %.1f |", miss[k] / reps / used, bytes[k] / reps / used / 1024.0);
        printf("\n");
    }
    free(dec); free(pre); free(miss); free(bytes); free(st); free(ap);
    mr_session_free(s);
    mr_model_free(m);
    free(ids);
    free(buf);
    return 0;
}
