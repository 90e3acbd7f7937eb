/* MoE approximation options shared by the commands that run a model (see cli.h, docs/APPROX.md). */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <string.h>

void mr_cli_approx_report(const mr_model *m, FILE *out) {
    mr_approx_params p;
    mr_model_get_approx(m, &p);
    mr_approx_stats s;
    mr_model_approx_stats(m, &s);
    char buf[384];
    mr_approx_format(&p, buf, sizeof buf);
    if (!s.token_layers && !s.ffn_rows_total && !s.sub_token_layers) { fprintf(out, "moe approx: %s\n", buf); return; }
    fprintf(out, "moe approx: %s:", buf);
    if (s.token_layers)
        fprintf(out, " experts/token %.3f of %.0f (%.1f%% kept)", (double)s.experts_kept / (double)s.token_layers,
                (double)s.experts_routed / (double)s.token_layers, 100.0 * (double)s.experts_kept / (double)s.experts_routed);
    if (s.rows_total)
        fprintf(out, ", rows skipped %.1f%%, down blocks skipped %.1f%%", 100.0 * (double)s.rows_skipped / (double)s.rows_total,
                s.blocks_total ? 100.0 * (double)s.blocks_skipped / (double)s.blocks_total : 0.0);
    if (s.ffn_rows_total)
        fprintf(out, "%s shared/dense FFN rows skipped %.1f%%", s.token_layers ? "," : "",
                100.0 * (double)s.ffn_rows_skipped / (double)s.ffn_rows_total);
    if (s.sub_token_layers)
        fprintf(out, ", cache-aware: %.3f misses per token-layer routed, %.3f substituted (%.1f%%)",
                (double)s.sub_misses / (double)s.sub_token_layers, (double)s.sub_substituted / (double)s.sub_token_layers,
                s.sub_misses ? 100.0 * (double)s.sub_substituted / (double)s.sub_misses : 0.0);
    fprintf(out, "\n");
}

void mr_cli_approx_poll(mr_cli_common *c, mr_model *m) {
    if (!c->approx_file) return;
    int rc = mr_approx_file_poll(c->approx_file, m);
    if (rc < 0) { fprintf(stderr, "warning: %s\n", mr_last_error()); return; }
    if (rc == 0) return;
    mr_approx_params p;
    mr_model_get_approx(m, &p);
    char buf[384];
    mr_approx_format(&p, buf, sizeof buf);
    fprintf(stderr, "moe approx (%s): %s\n", mr_approx_file_path(c->approx_file), buf);
}
