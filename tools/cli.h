/* CLI plumbing: every tools/cmd_*.c registers its subcommand with MR_COMMAND, so adding a command
 * never edits a shared table. Commands use only the public header include/moerun.h. */
#ifndef MR_CLI_H
#define MR_CLI_H
typedef int (*mr_cmd_fn)(int argc, char **argv); /* argv[0] is the subcommand name; returns exit status */
void mr_cli_register(const char *name, const char *summary, mr_cmd_fn fn);
#define MR_COMMAND(name, summary, fn) \
    static void __attribute__((constructor)) mr_register_##name(void) { mr_cli_register(#name, summary, fn); }

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "moerun.h"

/* Option values (tools/cli_opts.c). The whole string must parse and lie in [lo, hi]; otherwise they
 * print "error: bad value 'V' for OPT (want ...)" on stderr and return -1 (the caller exits 1).
 * hi >= MR_CLI_BIG means "no upper bound worth mentioning". */
#define MR_CLI_BIG 1e9
#define MR_CLI_MAX_THREADS 1024 /* -t: 0 = physical cores */
int mr_cli_int(const char *opt, const char *v, long lo, long hi, int *out);
int mr_cli_float(const char *opt, const char *v, double lo, double hi, float *out);
int mr_cli_u64(const char *opt, const char *v, uint64_t *out); /* decimal or 0x hex, no sign */
double mr_cli_now(void);                                        /* monotonic seconds */
/* The whole file (also a pipe), NUL-terminated; its length in *len (may be NULL). NULL if unreadable. */
char *mr_cli_read_file(const char *path, size_t *len);
/* "1,2,3" (also spaces, newlines, brackets) -> malloc'd non-negative ids; -1 on a malformed list. */
int mr_cli_parse_ids(const char *s, int32_t **out, int *n);

/* Sampler flags of run and chat: like mr_cli_approx_flag below (1 consumed, 0 not one, -1 error). */
#define MR_CLI_SAMPLER_HELP \
    "  --temp T           temperature (default 0.8; 0 = greedy)\n" \
    "  --top-k K          keep the K most likely tokens (default 40; 0 = off)\n" \
    "  --top-p P          keep the most likely tokens up to probability P (default 0.95; 1 = off)\n" \
    "  --min-p P          drop tokens below P times the best one's probability (default 0.05; 0 = off)\n" \
    "  --repeat-penalty R penalise the logits of the last N tokens by R (default 1 = off)\n" \
    "  --repeat-last-n N  tokens the repeat penalty looks at (default 64)\n" \
    "  --seed S           sampler seed (default 0x5eed)\n"
int mr_cli_sampler_flag(int argc, char **argv, int *i, mr_sampler_params *sp);

/* MoE approximation flags for commands that run a model (docs/APPROX.md): --moe-prune P, --moe-tau T,
 * --moe-skip T, --moe-approx "prune=P tau=T min=N rescale=l2 skip=T skip_abs=A". If argv[*i] is one
 * of them: consumes its value (++*i), updates *p and returns 1; 0 if it is not; -1 after printing
 * "error: ..." for a bad value. Apply with mr_model_set_approx after loading. */
#define MR_CLI_APPROX_HELP \
    "  --moe-prune P     MoE: drop the tail of the top-k experts beyond cumulative weight P (0-1)\n" \
    "  --moe-tau T       MoE: drop experts whose weight is below T * the largest (0-1)\n" \
    "  --moe-skip T      MoE: skip SwiGLU rows with |silu(gate)| < T * the row max (0-1)\n" \
    "  --moe-approx S    MoE approximations as one spec, e.g. \"prune=0.9 skip=0.05 rescale=l2\"\n"
int mr_cli_approx_flag(int argc, char **argv, int *i, mr_approx_params *p);
/* One line: the setting and, if evals ran with it, experts/token kept and skipped rows/blocks. */
void mr_cli_approx_report(const mr_model *m, FILE *out);

/* Ctrl-C and progress lines (tools/cli_progress.c). mr_cli_catch_sigint sets mr_cli_interrupted on
 * SIGINT (without SA_RESTART). The progress callbacks draw "WHAT: done/total (p%), rate, ETA" on
 * stderr when it is a terminal, and return mr_cli_interrupted so the library stops between chunks;
 * commands exit 130 when Ctrl-C stopped a load or a prefill. */
#include <signal.h>
extern volatile sig_atomic_t mr_cli_interrupted;
void mr_cli_catch_sigint(void);
typedef struct {
    const char *what, *stage;
    double t0;
    int tty, shown;
} mr_cli_progress;
void mr_cli_progress_init(mr_cli_progress *p, const char *what);
int mr_cli_progress_gen(void *user, int done, int total);                      /* mr_gen_progress_fn */
int mr_cli_progress_load(void *user, const char *stage, int done, int total); /* model load */
void mr_cli_progress_clear(mr_cli_progress *p);                               /* erase the line */
#endif
