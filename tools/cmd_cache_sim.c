/* moerun cache-sim: replay a routing trace through the expert-cache policies. */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 16

static void help(FILE *f) {
    fprintf(f,
            "usage: moerun cache-sim [--trace FILE] [--policy NAME|all] [--sizes P1,P2,...]\n\n"
            "Replays a routing trace (token -> layer -> rank) through one global cache of (layer, expert)\n"
            "pairs and prints the hit rate of each policy at each cache size, with the offline optimum\n"
            "(Belady) and the share of the LRU -> Belady gap each policy closes.\n\n"
            "  --trace FILE   trace in the KJVR format (default $MR_SHARED or ../shared,\n"
            "                 golden/routing/kjv-moe.trace.bin)\n"
            "  --policy NAME  one policy, or 'all' (default)\n"
            "  --sizes LIST   cache sizes in percent of all pairs (default 25,50,75)\n\npolicies:\n");
    for (int i = 0; i < mr_cache_sim_n_policies(); i++) {
        const char *desc, *name = mr_cache_sim_policy(i, &desc);
        fprintf(f, "  %-10s %s%s\n", name, desc, strcmp(name, mr_cache_default_policy()) ? "" : " (default)");
    }
}

static int run(int argc, char **argv) {
    char def_trace[1024];
    const char *shared = getenv("MR_SHARED");
    snprintf(def_trace, sizeof def_trace, "%s/golden/routing/kjv-moe.trace.bin", shared ? shared : "../shared");
    const char *trace_path = def_trace, *policy = "all", *sizes_arg = "25,50,75";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(stdout); return 0; }
        if (i + 1 >= argc) { fprintf(stderr, "error: unknown or incomplete option '%s'\n", argv[i]); return 1; }
        if (!strcmp(argv[i], "--trace")) trace_path = argv[++i];
        else if (!strcmp(argv[i], "--policy")) policy = argv[++i];
        else if (!strcmp(argv[i], "--sizes")) sizes_arg = argv[++i];
        else { fprintf(stderr, "error: unknown option '%s'\n", argv[i]); return 1; }
    }
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
    mr_routing_trace *t = mr_routing_trace_load(trace_path);
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
    for (int i = 0; i < np; i++) {
        if (chosen >= 0 && i != chosen && strcmp(mr_cache_sim_policy(i, NULL), "belady")) continue;
        const char *name = mr_cache_sim_policy(i, NULL);
        printf("%-9s%c", name, strcmp(name, mr_cache_default_policy()) ? ' ' : '*');
        for (int j = 0; j < n_sizes; j++) {
            mr_cache_sim_result r;
            if (mr_cache_sim(t, name, slots[j], &r)) { printf("\n"); goto done; }
            double h = 100.0 * (double)r.hits / (double)r.accesses;
            double gap = bel[j] - lru[j];
            if (gap > 1e-9) printf("   %6.2f (%4.0f%%)", h, 100.0 * (h - lru[j]) / gap);
            else printf("   %6.2f        ", h);
        }
        printf("\n");
        fflush(stdout);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "error: %s\n", mr_last_error());
    mr_routing_trace_free(t);
    return rc;
}

static void __attribute__((constructor)) register_cache_sim(void) {
    mr_cli_register("cache-sim", "replay a routing trace through the expert-cache policies", run);
}
