/* moerun cache-sim: replay a routing trace through the expert-cache policies. */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 16

typedef struct { const char *trace, *synth, *policy, *sizes, *plot; } sim_args;

#define SIM_OPTS(a) \
    {.names = "--trace", .arg = "FILE", .help = "trace in the KJVR format (default $MR_SHARED or ../shared,\n" \
     "golden/routing/kjv-moe.trace.bin)", .kind = MR_OPT_STR, .dst = &(a)->trace}, \
    {.names = "--synth", .arg = "N,L,K,E[,Z[,SEED]]", .help = "instead of a file: N tokens routed through L layers to top-K of E\n" \
     "experts drawn independently with popularity rank^-Z (default 0 = uniform)", .kind = MR_OPT_STR, .dst = &(a)->synth}, \
    {.names = "--policy", .arg = "NAME", .help = "one policy, or 'all' (default)", .kind = MR_OPT_STR, .dst = &(a)->policy}, \
    {.names = "--sizes", .arg = "P1,P2,..", .help = "cache sizes in percent of all pairs (default 25,50,75; with --plot\n" \
     "5,10,20,...,90)", .kind = MR_OPT_STR, .dst = &(a)->sizes}, \
    {.names = "--plot", .arg = "FILE.svg", .help = "also draw hit rate against cache size per policy (Belady dashed)", \
     .kind = MR_OPT_STR, .dst = &(a)->plot}

static void help(FILE *f) {
    sim_args a;
    const mr_opt opts[] = {SIM_OPTS(&a)};
    fprintf(f,
            "usage: moerun cache-sim [--trace FILE | --synth N,L,K,E[,Z[,SEED]]] [--policy NAME|all] [--sizes P1,P2,...] [--plot FILE.svg]\n\n"
            "Replays a routing trace (token -> layer -> rank) through one global cache of (layer, expert)\n"
            "pairs and prints the hit rate of each policy at each cache size, with the offline optimum\n"
            "(Belady) and the share of the LRU -> Belady gap each policy closes.\n\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
    fprintf(f, "policies:\n");
    for (int i = 0; i < mr_cache_sim_n_policies(); i++) {
        const char *desc, *name = mr_cache_sim_policy(i, &desc);
        fprintf(f, "  %-10s %s%s\n", name, desc, strcmp(name, mr_cache_default_policy()) ? "" : " (default)");
    }
}

static int run(int argc, char **argv) {
    char def_trace[1024];
    const char *shared = getenv("MR_SHARED");
    snprintf(def_trace, sizeof def_trace, "%s/golden/routing/kjv-moe.trace.bin", shared ? shared : "../shared");
    sim_args a = {def_trace, NULL, "all", NULL, NULL};
    const mr_opt opts[] = {SIM_OPTS(&a)};
    int pr_rc = mr_cli_parse("cache-sim", opts, MR_NOPTS(opts), help, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    const char *trace_path = a.trace, *policy = a.policy;
    const char *sizes_arg = a.sizes ? a.sizes : a.plot ? "5,10,20,30,40,50,60,70,80,90" : "25,50,75";
    double pct[MAX_SIZES];
    int n_sizes = 0;
    for (const char *s = sizes_arg; *s;) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || v <= 0 || v > 100 || (*end && *end != ',') || n_sizes == MAX_SIZES) {
            fprintf(stderr, "error: --sizes wants up to %d percentages in (0, 100], got '%s'\n", MAX_SIZES, sizes_arg);
            return 1;
        }
        pct[n_sizes++] = v;
        s = *end ? end + 1 : end;
    }
    if (!n_sizes) { fprintf(stderr, "error: --sizes is empty\n"); return 1; }
    int np = mr_cache_sim_n_policies(), chosen = -1;
    if (strcmp(policy, "all")) {
        for (int i = 0; i < np; i++)
            if (!strcmp(policy, mr_cache_sim_policy(i, NULL))) chosen = i;
        if (chosen < 0) { fprintf(stderr, "error: unknown policy '%s' (see --help)\n", policy); return 1; }
    }
    mr_routing_trace *t = NULL;
    char synth_name[96];
    if (a.synth) {
        int sn = 0, sl = 0, sk = 0, se = 0, used = 0;
        double z = 0;
        unsigned long long seed = 1;
        int got = sscanf(a.synth, "%d,%d,%d,%d%n,%lf%n,%llu%n", &sn, &sl, &sk, &se, &used, &z, &used, &seed, &used);
        if (got < 4 || a.synth[used]) {
            fprintf(stderr, "error: --synth wants N,L,K,E[,Z[,SEED]] (e.g. 20000,12,6,256,1.0), got '%s'\n", a.synth);
            return 1;
        }
        t = mr_routing_trace_synth(sn, sl, sk, se, z, seed);
        snprintf(synth_name, sizeof synth_name, "synth-%s", a.synth);
        trace_path = synth_name;
    } else t = mr_routing_trace_load(trace_path);
    if (!t) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    int n_tok, n_layer, top_k, n_expert;
    mr_routing_trace_shape(t, &n_tok, &n_layer, &top_k, &n_expert);
    int pairs = n_layer * n_expert, slots[MAX_SIZES];
    for (int j = 0; j < n_sizes; j++) {
        slots[j] = (int)(pct[j] / 100.0 * pairs + 0.5);
        if (slots[j] < top_k) slots[j] = top_k;
    }
    printf("trace %s: %d tokens, %d layers, top-%d of %d experts (%d pairs), %lld accesses\n", trace_path, n_tok,
           n_layer, top_k, n_expert, pairs, (long long)n_tok * n_layer * top_k);
    printf("hit rate %% (share of the LRU -> Belady gap closed); * = default policy\n%-10s", "policy");
    for (int j = 0; j < n_sizes; j++) {
        char h[32];
        snprintf(h, sizeof h, "%g%% (%d)", pct[j], slots[j]);
        printf(" %16s", h);
    }
    printf("\n");
    /* LRU and Belady first: every other row is judged against them */
    double lru[MAX_SIZES], bel[MAX_SIZES];
    int rc = 1;
    for (int j = 0; j < n_sizes; j++) {
        mr_cache_sim_result r;
        if (mr_cache_sim(t, "lru", slots[j], &r)) goto done;
        lru[j] = 100.0 * (double)r.hits / (double)r.accesses;
        if (mr_cache_sim(t, "belady", slots[j], &r)) goto done;
        bel[j] = 100.0 * (double)r.hits / (double)r.accesses;
    }
    double hit[64][MAX_SIZES];
    const char *names[64];
    int nplot = 0;
    for (int i = 0; i < np; i++) {
        if (chosen >= 0 && i != chosen && strcmp(mr_cache_sim_policy(i, NULL), "belady") &&
            strcmp(mr_cache_sim_policy(i, NULL), "static"))
            continue;
        const char *name = mr_cache_sim_policy(i, NULL);
        printf("%-9s%c", name, strcmp(name, mr_cache_default_policy()) ? ' ' : '*');
        for (int j = 0; j < n_sizes; j++) {
            mr_cache_sim_result r;
            if (mr_cache_sim(t, name, slots[j], &r)) { printf("\n"); goto done; }
            double h = 100.0 * (double)r.hits / (double)r.accesses;
            if (nplot < 64) hit[nplot][j] = h;
            double gap = bel[j] - lru[j];
            if (gap > 1e-9) printf("   %6.2f (%4.0f%%)", h, 100.0 * (h - lru[j]) / gap);
            else printf("   %6.2f        ", h);
        }
        printf("\n");
        fflush(stdout);
        if (nplot < 64) names[nplot++] = name;
    }
    rc = 0;
    if (a.plot) {
        mr_svg_series ser[64];
        for (int i = 0; i < nplot; i++)
            ser[i] = (mr_svg_series){names[i], pct, hit[i], n_sizes, !strcmp(names[i], "belady")};
        char title[160];
        const char *base = strrchr(trace_path, '/') ? strrchr(trace_path, '/') + 1 : trace_path;
        snprintf(title, sizeof title, "expert-cache hit rate: %s", base);
        if (mr_svg_lines(a.plot, title, "cache size, % of all (layer, expert) pairs", "hit rate %", ser, nplot, 100)) rc = 2;
    }
done:
    if (rc == 1) fprintf(stderr, "error: %s\n", mr_last_error());
    if (rc) rc = 1;
    mr_routing_trace_free(t);
    return rc;
}

static void __attribute__((constructor)) register_cache_sim(void) {
    mr_cli_register("cache-sim", "replay a routing trace through the expert-cache policies", run);
}
