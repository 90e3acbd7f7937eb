/* MoE approximation options shared by the commands that run a model (see cli.h, docs/APPROX.md). */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <string.h>

int mr_cli_approx_flag(int argc, char **argv, int *i, mr_approx_params *p) {
    const char *a = argv[*i];
    const char *key = !strcmp(a, "--moe-prune") ? "prune" : !strcmp(a, "--moe-tau") ? "tau"
                    : !strcmp(a, "--moe-skip") ? "skip" : !strcmp(a, "--moe-approx") ? "" : NULL;
    if (!key) return 0;
    if (*i + 1 >= argc) { fprintf(stderr, "error: %s needs a value\n", a); return -1; }
    const char *v = argv[++*i];
    char spec[256];
    if (*key) snprintf(spec, sizeof spec, "%s=%s", key, v);
    else snprintf(spec, sizeof spec, "%s", v);
    if (*key && strpbrk(v, " ,\t")) { fprintf(stderr, "error: bad value '%s' for %s\n", v, a); return -1; }
    if (mr_approx_parse(spec, p)) { fprintf(stderr, "error: %s %s: %s\n", a, v, mr_last_error()); return -1; }
    return 1;
}

void mr_cli_approx_report(const mr_model *m, FILE *out) {
    mr_approx_params p;
    mr_model_get_approx(m, &p);
    mr_approx_stats s;
    mr_model_approx_stats(m, &s);
    char buf[160];
    mr_approx_format(&p, buf, sizeof buf);
    if (!s.token_layers) { fprintf(out, "moe approx: %s\n", buf); return; }
    fprintf(out, "moe approx: %s: experts/token %.3f of %.0f (%.1f%% kept)", buf,
            (double)s.experts_kept / (double)s.token_layers, (double)s.experts_routed / (double)s.token_layers,
            100.0 * (double)s.experts_kept / (double)s.experts_routed);
    if (s.rows_total)
        fprintf(out, ", rows skipped %.1f%%, down blocks skipped %.1f%%", 100.0 * (double)s.rows_skipped / (double)s.rows_total,
                s.blocks_total ? 100.0 * (double)s.blocks_skipped / (double)s.blocks_total : 0.0);
    fprintf(out, "\n");
}
