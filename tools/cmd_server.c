/* moerun server: OpenAI-compatible HTTP API. Its options are on the shared option table (cli.h), so
 * the spellings, --opt=value, bounds, errors and --help are those of run and chat. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int server_stop;
/* an atomic store: the server's threads read the flag with an atomic load (http.c) */
static void on_signal(int sig) { (void)sig; __atomic_store_n(&server_stop, 1, __ATOMIC_RELAXED); }

typedef struct {
    mr_cli_common c;
    mr_server_params sp;
    mr_cli_spec spec;
} server_args;

static int opt_template(const char *opt, const char *v, void *dst) {
    if (!mr_chat_template_known(v)) { fprintf(stderr, "error: bad value '%s' for %s (unknown chat template)\n", v, opt); return -1; }
    *(const char **)dst = v;
    return 0;
}

/* --cache-ram not given: 1/8 of the memory available after the load, at most llama-server's default */
#define CACHE_RAM_DEFAULT UINT64_MAX
#define CACHE_RAM_MAX (8ull << 30)

/* --cache-ram / --cache-disk: a size ("512M", "2G"); a bare number is MiB, as llama-server's --cache-ram */
static int opt_cache_size(const char *opt, const char *v, void *dst) {
    uint64_t b;
    char *end;
    double mib = strtod(v, &end);
    if (end != v && !*end && mib >= 0 && mib < 1e12) b = (uint64_t)(mib * 1048576.0);
    else if (mr_size_parse(v, &b)) { fprintf(stderr, "error: bad value '%s' for %s (want a size: 512M, 2G; a number is MiB)\n", v, opt); return -1; }
    *(uint64_t *)dst = b;
    return 0;
}

#define SERVER_OPTS(a) \
    MR_CLI_OPT_MODEL(&(a)->c), \
    {.names = "--host", .arg = "H", .help = "address to listen on (default 127.0.0.1)", .kind = MR_OPT_STR, .dst = &(a)->sp.host}, \
    {.names = "--port", .arg = "P", .help = "port (default 8080)", .kind = MR_OPT_INT, .dst = &(a)->sp.port, .lo = 1, .hi = 65535}, \
    MR_CLI_OPT_CTX(&(a)->c), \
    MR_CLI_OPT_THREADS(&(a)->c), \
    MR_CLI_OPT_BUDGET(&(a)->c), \
    {.names = "-a, --alias", .arg = "NAME", .help = "model id to report (default: general.name)", .kind = MR_OPT_STR, \
     .dst = &(a)->sp.alias}, \
    {.names = "-np, --parallel", .arg = "N", .help = "N slots (sessions) served at once (default 1); for qwen3moe, llama,\n" \
     "deepseek4 a step evaluates the decode tokens of all slots and a piece\nof a prompt in one pass (experts read once per step; docs/SERVER.md)", \
     .kind = MR_OPT_INT, .dst = &(a)->sp.n_parallel, .lo = 1, .hi = 256}, \
    {.names = "-b, --batch-size, -ub, --ubatch-size", .arg = "N", .help = "with --parallel > 1 (qwen3moe / llama / deepseek4): prompt tokens\n" \
     "per step beside the decode tokens (default 32): smaller keeps the\nother slots' tokens coming sooner, larger reads a long prompt faster", \
     .kind = MR_OPT_INT, .dst = &(a)->sp.step_prompt, .lo = 1, .hi = 4096}, \
    {.names = "--chat-template", .arg = "NAME", .help = "chatml, llama2, llama3, phi3, gemma, deepseek3, deepseek4, chatglm4,\n" \
     "gpt-oss, kimi-k2 (default: detected)", .kind = MR_OPT_FN, .dst = &(a)->sp.chat_template, .fn = opt_template}, \
    {.names = "--api-key", .arg = "KEY", .help = "require \"Authorization: Bearer KEY\" or \"x-api-key: KEY\" (not on\n" \
     "/health; default: the MOERUN_API_KEY environment variable, else no key)", .kind = MR_OPT_STR, .dst = &(a)->sp.api_key}, \
    {.names = "--admin-key", .arg = "KEY", .help = "key for GET/POST /v1/admin/moe, which shows / changes the MoE\n" \
     "approximations while serving (default: MOERUN_ADMIN_KEY, else the API\nkey; with neither the endpoint answers 403)", \
     .kind = MR_OPT_STR, .dst = &(a)->sp.admin_key}, \
    {.names = "-cram, --cache-ram", .arg = "SIZE", .help = "prompt cache shared by all slots: RAM for snapshots of the evaluation\n" \
     "state (e.g. 2G; a number is MiB; 0 = off; default: 1/8 of the memory\navailable once the model is loaded, at most 8G); a prompt restores the\n" \
     "longest cached prefix and reads only the rest", \
     .kind = MR_OPT_FN, .dst = &(a)->sp.cache_ram, .fn = opt_cache_size}, \
    {.names = "--cache-dir", .arg = "DIR", .help = "prompt cache files in DIR (created if missing): they survive a restart;\n" \
     "POST /slots/N?action=save|restore keeps its files there too", .kind = MR_OPT_STR, .dst = &(a)->sp.cache_dir}, \
    {.names = "--cache-disk", .arg = "SIZE", .help = "bound of the prompt cache files in --cache-dir, least recently used\n" \
     "removed first (default 0 = unbounded)", .kind = MR_OPT_FN, .dst = &(a)->sp.cache_disk, .fn = opt_cache_size}, \
    {.names = "--cache-every", .arg = "N", .help = "prompt cache: a snapshot every N tokens of a long prompt, besides the\n" \
     "message boundaries (default 1024)", .kind = MR_OPT_INT, .dst = &(a)->sp.cache_every, .lo = 1, .hi = 0x7fffffff}, \
    MR_CLI_OPT_OFFICIAL(&(a)->c), \
    MR_CLI_OPTS_SPEC_NGRAM(&(a)->spec), MR_CLI_OPT_SPEC_MTP(&(a)->spec), \
    MR_CLI_OPTS_APPROX(&(a)->c), \
    MR_CLI_OPT_APPROX_FILE(&(a)->c), \
    MR_CLI_OPTS_IGNORED

static void server_usage(FILE *f) {
    server_args a;
    const mr_opt opts[] = {SERVER_OPTS(&a)};
    fprintf(f, "usage: moerun server -m MODEL [options] [--ep]\n\n"
               "Serves the OpenAI API (POST /v1/chat/completions, /v1/completions, /v1/responses, GET /v1/models)\n"
               "and the Anthropic Messages API (POST /v1/messages), streamed with \"stream\": true; tools /\n"
               "tool_calls in the template's format (chatml, deepseek4 DSML, kimi-k2), forced calls (tool_choice\n"
               "required / named / any) constrained to the tool's JSON schema; thinking where the template has it\n"
               "(reasoning_effort, chat_template_kwargs, Anthropic thinking; reasoning returned apart); logprobs,\n"
               "n, seed (random when absent), presence_penalty, frequency_penalty, logit_bias,\n"
               "speculative.n_max. Also GET /health, /props, /slots, /metrics (Prometheus), POST /tokenize,\n"
               "/detokenize, /apply-template; response_format json_object / json_schema by constrained\n"
               "sampling. Fields the server cannot honour (schema keywords outside the subset, images) are\n"
               "refused with 400.\n"
               "Each connection has its own thread (keep-alive, Expect: 100-continue, read deadlines); requests\n"
               "that generate take one of --parallel slots in arrival order. A prompt that shares a prefix with\n"
               "a slot re-uses its evaluated tokens (deepseek4 only when the prompt extends the whole sequence);\n"
               "A prompt cache in RAM (on by default, --cache-ram 0 turns it off; with --cache-dir also on disk):\n"
               "snapshots taken at message boundaries, every --cache-every tokens, at the prompt's end and after\n"
               "each reply serve any slot, diverging prompts and restarts (POST /slots/N?action=save|restore too).\n"
               "The address is bound before the model loads. See docs/SERVER.md.\n"
               "Responses name the active MoE approximation: \"moerun\":{\"approx\":SPEC} and an X-Moerun-Approx\n"
               "header; --moe-approx-file is checked before every evaluation (docs/APPROX.md).\n"
               "With --ep (expert parallelism: an MPI build under mpirun; docs/MULTIHOST.md) rank 0 serves HTTP,\n"
               "the other ranks compute their share of the routed experts.\n"
               "With --spec, every request decodes speculatively unless it sends \"speculative.n_max\": 0; without\n"
               "it, a request may ask for it with \"speculative.n_max\": N (docs/SPECULATIVE.md).\n\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int cmd_server(int argc, char **argv) {
    server_args a;
    memset(&a, 0, sizeof a);
    mr_cli_common_init(&a.c);
    mr_cli_spec_default(&a.spec);
    mr_server_params_default(&a.sp);
    a.sp.cache_ram = CACHE_RAM_DEFAULT;
    a.sp.stop = &server_stop;
    a.sp.api_key = getenv("MOERUN_API_KEY");
    a.sp.admin_key = getenv("MOERUN_ADMIN_KEY");
    const mr_opt opts[] = {SERVER_OPTS(&a)};
    int pr_rc = mr_cli_parse("server", opts, MR_NOPTS(opts), server_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    if (!a.c.model) { fprintf(stderr, "error: -m MODEL is required (see moerun server --help)\n"); return 1; }
    a.sp.n_ctx = a.c.mp.n_ctx;
    a.sp.spec_max = a.spec.max;
    a.sp.spec_ngram = a.spec.ngram;
    a.sp.spec_mtp = a.spec.mtp;
    a.c.mp.mtp |= a.spec.mtp;
    /* the server polls its control file itself (before every evaluation, for all slots) */
    a.sp.approx_file = a.c.approx_path;
    a.c.approx_path = NULL;
    /* bind first: a taken port fails at once, not after loading the model. With --ep only rank 0
     * serves HTTP; the other ranks load the model and serve their experts to it (in mr_cli_load) */
    if (mr_ep_rank() == 0) {
        a.sp.listen_fd = mr_server_listen(a.sp.host, a.sp.port);
        if (a.sp.listen_fd < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    }
    mr_cli_catch_sigint(); /* Ctrl-C stops the load; then the server's handler takes over */
    int intr;
    mr_model *m = mr_cli_load(&a.c, a.sp.chat_template, &intr);
    if (!m) {
        if (a.sp.listen_fd >= 0) close(a.sp.listen_fd);
        return intr ? 130 : 1;
    }
    if (mr_approx_params_enabled(&a.c.ap)) mr_cli_approx_report(m, stderr);
    if (a.sp.cache_ram == CACHE_RAM_DEFAULT) {
        /* measured once the model (and its expert arena) holds its memory, so the cache's bound comes
         * out of what is left, never out of what --ram-budget auto gave the experts */
        const uint64_t eighth = mr_mem_available() / 8;
        a.sp.cache_ram = eighth < CACHE_RAM_MAX ? eighth : CACHE_RAM_MAX;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = mr_server_run(m, &a.sp);
    if (rc != 0) fprintf(stderr, "error: %s\n", mr_last_error());
    if (a.c.budget) mr_pager_print_summary(stderr, m, 0, 0, 0, 0); /* rates: /metrics */
    mr_model_free(m);
    return rc ? 1 : 0;
}

MR_COMMAND(server, "OpenAI-compatible HTTP server (chat/completions, streaming, prompt cache)", cmd_server)
