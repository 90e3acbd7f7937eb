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
#include "moerun_tools.h"

/* Option values (tools/cli_opts.c). The whole string must parse and lie in [lo, hi]; otherwise they
 * print "error: bad value 'V' for OPT (want ...)" on stderr and return -1 (the caller exits 1).
 * hi >= MR_CLI_BIG means "no upper bound worth mentioning". */
#define MR_CLI_BIG 1e9
#define MR_CLI_MAX_THREADS 1024 /* -t: 0 = physical cores */
int mr_cli_int(const char *opt, const char *v, long lo, long hi, int *out);
int mr_cli_float(const char *opt, const char *v, double lo, double hi, float *out);
int mr_cli_u64(const char *opt, const char *v, uint64_t *out); /* decimal or 0x hex, no sign */
double mr_cli_now(void);                                        /* monotonic seconds */
/* The whole file (also a pipe; "-" is stdin), NUL-terminated; its length in *len (may be NULL). NULL if unreadable. */
char *mr_cli_read_file(const char *path, size_t *len);
/* In place: \n \r \t \\ \' \" \xHH become the characters (llama.cpp's --escape); others stay. */
void mr_cli_unescape(char *s);
/* "1,2,3" (also spaces, newlines, brackets) -> malloc'd non-negative ids; -1 on a malformed list. */
int mr_cli_parse_ids(const char *s, int32_t **out, int *n);

/* One line: the setting and, if evals ran with it, experts/token kept and skipped rows/blocks. */
void mr_cli_approx_report(const mr_model *m, FILE *out);

/* ---- the option table (tools/cli_args.c) ----
 * Every command describes its options in one array of mr_opt; mr_cli_parse parses argv with it and
 * mr_cli_print_opts prints the option part of --help from it (tests/cli_help.sh checks that each
 * listed spelling parses). names: every spelling, comma-separated ("-n, --n-predict"); "--opt=value"
 * works for long names. NOTICE kinds are llama.cpp options that do not apply here: accepted, with
 * "notice: OPT ignored: HELP" on stderr (NOTICE_ARG consumes a value, NOTICE_OPT an optional on/off). */
enum { MR_OPT_FLAG, MR_OPT_INT, MR_OPT_FLOAT, MR_OPT_U64, MR_OPT_STR, MR_OPT_FN,
       MR_OPT_NOTICE, MR_OPT_NOTICE_ARG, MR_OPT_NOTICE_OPT };
typedef struct {
    const char *names, *arg, *help;  /* arg: value name, NULL for a flag */
    int kind;
    void *dst;                       /* FLAG: int (set to ival); INT: int; FLOAT: float; U64: uint64_t;
                                        STR: const char *; FN: passed to fn */
    double lo, hi;                   /* INT / FLOAT bounds */
    int ival;
    int (*fn)(const char *opt, const char *v, void *dst); /* 0, or -1 after printing "error: ..." */
} mr_opt;
#define MR_NOPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* 0 parsed, 1 --help printed (exit 0), -1 error printed (exit 1). Arguments not starting with '-'
 * (and "-" itself) go to pos[0 .. max_pos) (*n_pos of them); more are an error. */
int mr_cli_parse(const char *cmd, const mr_opt *opts, int n_opts, void (*usage)(FILE *), int argc, char **argv,
                 const char **pos, int max_pos, int *n_pos);
void mr_cli_print_opts(FILE *f, const mr_opt *opts, int n_opts);

/* The environment (tools/cli_env.c, where every variable is listed): read once by main (-1: an
 * error printed), applied to the model settings of every command (mr_cli_common_init and the draft
 * model), listed by moerun --help. */
int mr_cli_env_read(void);
void mr_cli_env_apply(mr_model_params *mp);
void mr_cli_env_help(FILE *f);

/* Settings of the commands that load a model, and their option groups. */
typedef struct {
    const char *model, *budget;
    mr_model_params mp;
    mr_sampler_params sp;
    mr_approx_params ap;
    int seed_set, n_batch, ignore_eos, warmup_dummy;
    const char *approx_path;     /* --moe-approx-file (run, chat) */
    mr_approx_file *approx_file; /* opened by mr_cli_load; free with mr_approx_file_free */
} mr_cli_common;
void mr_cli_common_init(mr_cli_common *c);
/* The control file of --moe-approx-file, between evaluations: a change is applied and named on stderr
 * ("moe approx (FILE): SPEC"), a bad file reported once ("warning: ..."). Nothing without the option. */
void mr_cli_approx_poll(mr_cli_common *c, mr_model *m);
int mr_cli_opt_seed(const char *opt, const char *v, void *dst);           /* dst: mr_cli_common */
int mr_cli_opt_repeat_penalty(const char *opt, const char *v, void *dst); /* dst: float */
int mr_cli_opt_graph(const char *opt, const char *v, void *dst);          /* dst: int (MR_GRAPH_*) */
int mr_cli_opt_approx(const char *opt, const char *v, void *dst);         /* dst: mr_approx_params */
uint64_t mr_cli_random_seed(void);
/* A random seed unless --seed gave one; "seed: N" on stderr either way (so a run can be repeated). */
void mr_cli_pick_seed(mr_cli_common *c);

#define MR_CLI_OPT_MODEL(c) \
    {.names = "-m, --model", .arg = "FILE", .help = "GGUF model file (required)", .kind = MR_OPT_STR, .dst = &(c)->model}
#define MR_CLI_OPT_THREADS(c) \
    {.names = "-t, --threads", .arg = "N", .help = "worker threads (default 0 = physical cores, at most\n" \
     "the cgroup CPU quota and the affinity mask)", .kind = MR_OPT_INT, \
     .dst = &(c)->mp.n_threads, .lo = 0, .hi = MR_CLI_MAX_THREADS}
#define MR_CLI_OPT_CTX(c) \
    {.names = "-c, --ctx-size", .arg = "N", .help = "context length (default 0 = min(training context, 4096))", \
     .kind = MR_OPT_INT, .dst = &(c)->mp.n_ctx, .lo = 0, .hi = 0x7fffffff}
#define MR_CLI_OPT_BUDGET(c) \
    {.names = "--ram-budget", .arg = "SIZE", .help = "RAM for routed experts (e.g. 8G, 512M; auto = from\n" \
     "MemAvailable or the memory cgroup's room; default: no paging);\n" \
     "prints the pager summary at exit", .kind = MR_OPT_STR, .dst = &(c)->budget}
#define MR_CLI_OPT_OFFICIAL(c) \
    {.names = "--graph", .arg = "NAME", .help = "deepseek4: official (default: FP8 KV rows, indexer QAT, shared-expert\n" \
     "clamp), mainline (llama.cpp's: no FP8 KV simulation), fork (the llama.cpp\n" \
     "fork of ../shared/golden: no indexer QAT, no shared clamp); docs/DEEPSEEK4.md", .kind = MR_OPT_FN, \
     .dst = &(c)->mp.graph, .fn = mr_cli_opt_graph}, \
    {.names = "--official", .help = "deepseek4: the same as --graph official", .kind = MR_OPT_FLAG, \
     .dst = &(c)->mp.graph, .ival = MR_GRAPH_OFFICIAL}
/* llama.cpp options with no meaning here */
#define MR_CLI_OPTS_IGNORED \
    {.names = "-ngl, --gpu-layers, --n-gpu-layers", .arg = "N", .help = "moerun runs on the CPU", .kind = MR_OPT_NOTICE_ARG}, \
    {.names = "--no-mmap", .help = "the model file is always memory-mapped", .kind = MR_OPT_NOTICE}, \
    {.names = "--mlock", .help = "the pager decides what stays in RAM, see --ram-budget", .kind = MR_OPT_NOTICE}, \
    {.names = "-fa, --flash-attn", .help = "attention always runs fused, without the score matrix", .kind = MR_OPT_NOTICE_OPT}
#define MR_CLI_OPTS_SAMPLER(c) \
    {.names = "--temp, --temperature", .arg = "T", .help = "temperature (default 0.8; 0 = greedy)", .kind = MR_OPT_FLOAT, \
     .dst = &(c)->sp.temperature, .lo = 0, .hi = MR_CLI_BIG}, \
    {.names = "--top-k", .arg = "K", .help = "keep the K most likely tokens (default 40; 0 = off)", .kind = MR_OPT_INT, \
     .dst = &(c)->sp.top_k, .lo = 0, .hi = 0x7fffffff}, \
    {.names = "--top-p", .arg = "P", .help = "keep the most likely tokens up to probability P (default 0.95; 1 = off)", \
     .kind = MR_OPT_FLOAT, .dst = &(c)->sp.top_p, .lo = 0, .hi = 1}, \
    {.names = "--min-p", .arg = "P", .help = "drop tokens below P times the best one's probability (default 0.05;\n0 = off)", \
     .kind = MR_OPT_FLOAT, .dst = &(c)->sp.min_p, .lo = 0, .hi = 1}, \
    {.names = "--repeat-penalty", .arg = "R", .help = "penalise the logits of the last N tokens by R (default 1 = off)", \
     .kind = MR_OPT_FN, .dst = &(c)->sp.repeat_penalty, .fn = mr_cli_opt_repeat_penalty}, \
    {.names = "--repeat-last-n", .arg = "N", .help = "tokens the repeat penalty looks at (default 64)", .kind = MR_OPT_INT, \
     .dst = &(c)->sp.repeat_last_n, .lo = 0, .hi = MR_SAMPLER_MAX_LAST_N}, \
    {.names = "-s, --seed", .arg = "S", .help = "sampler seed (default: random, printed on stderr)", .kind = MR_OPT_FN, \
     .dst = (c), .fn = mr_cli_opt_seed}, \
    {.names = "--ignore-eos", .help = "never sample end-of-generation tokens", .kind = MR_OPT_FLAG, .dst = &(c)->ignore_eos, .ival = 1}, \
    {.names = "-b, --batch-size, -ub, --ubatch-size", .arg = "N", .help = "prompt tokens per evaluation (default 512; results do not\ndepend on it; smaller reacts sooner to Ctrl-C)", \
     .kind = MR_OPT_INT, .dst = &(c)->n_batch, .lo = 1, .hi = 0x7fffffff}
#define MR_CLI_OPT_APPROX_FILE(c) \
    {.names = "--moe-approx-file", .arg = "PATH", .help = "MoE approximations from a control file (a spec, e.g. \"k=5 layers=3-\";\n" \
     "empty or \"off\": exact), re-read when it changes, checked before every token; it\n" \
     "holds the whole setting and, when present at start, overrides --moe-approx", .kind = MR_OPT_STR, .dst = &(c)->approx_path}
#define MR_CLI_OPTS_APPROX(c) \
    {.names = "--moe-prune", .arg = "P", .help = "MoE: drop the tail of the top-k experts beyond cumulative weight P (0-1)", \
     .kind = MR_OPT_FN, .dst = &(c)->ap, .fn = mr_cli_opt_approx}, \
    {.names = "--moe-tau", .arg = "T", .help = "MoE: drop experts whose weight is below T * the largest (0-1)", \
     .kind = MR_OPT_FN, .dst = &(c)->ap, .fn = mr_cli_opt_approx}, \
    {.names = "--moe-skip", .arg = "T", .help = "MoE: skip SwiGLU rows with |silu(gate)| < T * the row max (0-1)", \
     .kind = MR_OPT_FN, .dst = &(c)->ap, .fn = mr_cli_opt_approx}, \
    {.names = "--moe-approx", .arg = "SPEC", .help = "MoE approximations as one spec, e.g. \"prune=0.9 skip=0.05 rescale=l2\";\n" \
     "keys: prune tau min k min_w rescale rho layers prune_hash skip skip_abs,\nrows=M (routed experts keep M of every 128 SwiGLU rows, by |silu(gate)|),\n" \
     "rows_shared=M (shared experts), rows_dense=M (dense FFNs); cache-aware selection\n" \
     "when paging: sub_margin=R (a routed expert not in RAM is replaced by the best cached\n" \
     "one scoring within R of it, relative), sub_w=W (only misses of weight <= W), sub_miss=B\n" \
     "(at most B misses per token and layer; -1 none), sub_hash=1 (also hash layers); docs/APPROX.md", \
     .kind = MR_OPT_FN, .dst = &(c)->ap, .fn = mr_cli_opt_approx}

/* Load c->model: --ram-budget resolved for n_ctx, a progress line while repacking, Ctrl-C stops the
 * load (then *interrupted = 1), approximations applied, a warning when the context exceeds the
 * training context, and the summary line "load: T s (arch, ...)" on stderr. NULL on failure (error
 * printed). tmpl: the chat template to name in the summary (NULL: none). */
mr_model *mr_cli_load(mr_cli_common *c, const char *tmpl, int *interrupted);
/* --ep (docs/MULTIHOST.md), once the model is loaded: ranks > 0 serve their experts until rank 0
 * ends, then free m and exit here; rank 0 attaches the other ranks to m and returns. Without --ep
 * nothing. mr_cli_load calls it; commands that load models themselves (logits, server) too. */
void mr_cli_ep_join(mr_model *m);
/* Tokenize a whole text (any length) into a malloc'd array; -1 after printing an error. */
int mr_cli_tokenize(const mr_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                    int32_t **out);

/* SVG charts (tools/cli_svg.c); each value is in data-value="..." and a <title>. 0, or -1 after
 * printing an error. Bars: vals[ncat][nser], grouped by category. Lines: y against x per series
 * (ymax_fixed > 0 fixes the y range, e.g. 100 for percentages). */
int mr_svg_bars(const char *path, const char *title, const char *ylabel, const char *const *cats, int ncat,
                const char *const *series, int nser, const double *vals, const char *unit);
typedef struct { const char *name; const double *x, *y; int n, dashed; } mr_svg_series;
int mr_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel, const mr_svg_series *ser,
                 int nser, double ymax_fixed);

/* Speculative decoding options of run, chat, bench and server (tools/cli_spec.c,
 * docs/SPECULATIVE.md). mr_cli_spec_setup loads the draft model (if any) and fills gp. */
#define MR_CLI_SPEC_DEFAULT_MAX 8
typedef struct {
    int max, ngram;
    int mtp;                 /* --spec-mtp: drafts from the model's MTP block (load it with mp.mtp) */
    const char *draft_path;
    mr_model *draft_model;
    mr_session *draft;
} mr_cli_spec;
void mr_cli_spec_default(mr_cli_spec *o);
int mr_cli_opt_spec(const char *opt, const char *v, void *dst);   /* dst: mr_cli_spec */
#define MR_CLI_OPTS_SPEC(o) MR_CLI_OPTS_SPEC_NGRAM(o), \
    {.names = "-md, --model-draft", .arg = "FILE", .help = "draft with a smaller model of the same vocabulary, or a DeepSeek-V4\n" \
     "MTP sidecar (turns --spec on)", \
     .kind = MR_OPT_FN, .dst = (o), .fn = mr_cli_opt_spec}, \
    MR_CLI_OPT_SPEC_MTP(o)
#define MR_CLI_OPT_SPEC_MTP(o) \
    {.names = "--spec-mtp", .help = "draft with the model's own MTP block (deepseek4 files with nextn_predict_layers;\n" \
     "like mainline llama.cpp's draft-mtp speculative type; turns --spec on)", .kind = MR_OPT_FN, .dst = (o), .fn = mr_cli_opt_spec}
/* without a draft model (the server's) */
#define MR_CLI_OPTS_SPEC_NGRAM(o) \
    {.names = "--spec", .help = "speculative decoding with n-gram drafts from the context (prompt lookup):\n" \
     "same output (greedy: identical tokens), faster on repetitive text", .kind = MR_OPT_FN, .dst = (o), \
     .fn = mr_cli_opt_spec}, \
    {.names = "--draft-max, --draft, --draft-n", .arg = "N", .help = "draft tokens per verification step (default 8 when on; 0 = off)", \
     .kind = MR_OPT_FN, .dst = (o), .fn = mr_cli_opt_spec}, \
    {.names = "--spec-ngram", .arg = "N", .help = "longest n-gram matched for a draft (default 3; turns --spec on)", \
     .kind = MR_OPT_FN, .dst = (o), .fn = mr_cli_opt_spec}
int mr_cli_spec_setup(mr_cli_spec *o, int n_threads, int n_ctx, mr_gen_params *gp);
/* "speculative: ..." line (acceptance, tokens per step); nothing when off. */
void mr_cli_spec_report(const mr_cli_spec *o, const mr_gen *g, FILE *out);
void mr_cli_spec_free(mr_cli_spec *o);

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
