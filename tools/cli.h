/* CLI plumbing: every tools/cmd_*.c registers its subcommand with MR_COMMAND, so adding a command
 * never edits a shared table. Commands use only the public header include/moerun.h. */
#ifndef MR_CLI_H
#define MR_CLI_H
typedef int (*mr_cmd_fn)(int argc, char **argv); /* argv[0] is the subcommand name; returns exit status */
void mr_cli_register(const char *name, const char *summary, mr_cmd_fn fn);
#define MR_COMMAND(name, summary, fn) \
    static void __attribute__((constructor)) mr_register_##name(void) { mr_cli_register(#name, summary, fn); }
/* Parse sizes like 512M, 8G, 1.5G, 4096 (bytes). Returns -1 on a malformed value. */
int mr_cli_parse_size(const char *s, unsigned long long *out);

/* MoE approximation flags for commands that run a model (docs/APPROX.md): --moe-prune P, --moe-tau T,
 * --moe-skip T, --moe-approx "prune=P tau=T min=N rescale=l2 skip=T skip_abs=A". If argv[*i] is one
 * of them: consumes its value (++*i), updates *p and returns 1; 0 if it is not; -1 after printing
 * "error: ..." for a bad value. Apply with mr_model_set_approx after loading. */
#include <stdio.h>
#include "moerun.h"
#define MR_CLI_APPROX_HELP \
    "  --moe-prune P     MoE: drop the tail of the top-k experts beyond cumulative weight P (0-1)\n" \
    "  --moe-tau T       MoE: drop experts whose weight is below T * the largest (0-1)\n" \
    "  --moe-skip T      MoE: skip SwiGLU rows with |silu(gate)| < T * the row max (0-1)\n" \
    "  --moe-approx S    MoE approximations as one spec, e.g. \"prune=0.9 skip=0.05 rescale=l2\"\n"
int mr_cli_approx_flag(int argc, char **argv, int *i, mr_approx_params *p);
/* One line: the setting and, if evals ran with it, experts/token kept and skipped rows/blocks. */
void mr_cli_approx_report(const mr_model *m, FILE *out);
#endif
