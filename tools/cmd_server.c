/* moerun server: OpenAI-compatible HTTP API. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int server_stop;
static void on_signal(int sig) { (void)sig; server_stop = 1; }

static void server_usage(FILE *f) {
    fprintf(f, "usage: moerun server -m MODEL [--host H] [--port P] [-c CTX] [-t N] [--ram-budget SIZE] [--alias NAME]\n"
               "                    [--parallel N] [--chat-template NAME] [--api-key KEY] [--admin-key KEY]\n"
               "                    [--moe-approx SPEC] [--moe-approx-file PATH] [--ep]\n\n"
               "Serves the OpenAI API (POST /v1/chat/completions, /v1/completions, GET /v1/models) and the\n"
               "Anthropic Messages API (POST /v1/messages), streamed with \"stream\": true; tools / tool_calls\n"
               "for the chatml and deepseek4 templates; logprobs, n, seed (random when absent). Also GET /health,\n"
               "/props, /slots, /metrics (Prometheus), POST /tokenize, /detokenize, /apply-template. Fields the\n"
               "server cannot honour (response_format json_object, penalties, images) are refused with 400.\n"
               "Each connection has its own thread (keep-alive, Expect: 100-continue, read deadlines); requests\n"
               "that generate take one of --parallel slots in arrival order. A prompt that shares a prefix with\n"
               "a slot re-uses its evaluated tokens (prompt cache; deepseek4 only when the prompt extends the\n"
               "whole cached sequence). The address is bound before the model loads. See docs/SERVER.md.\n"
               "  --host H          address to listen on (default 127.0.0.1)\n"
               "  --port P          port (default 8080)\n"
               "  -c CTX            context length (default 0 = min(training context, 4096))\n"
               "  -t N              threads (default 0 = physical cores, at most the CPU quota and affinity mask)\n"
               "  --ram-budget S    RAM for routed experts, e.g. 8G, 512M, auto (default: no paging)\n"
               "  --alias NAME      model id to report (default: general.name)\n"
               "  --parallel N      N slots (sessions) served at once; for qwen3moe / llama their decode steps are\n"
               "                    one batched evaluation (experts read once per step for all; default 1)\n"
               "  --chat-template T chatml, llama2, llama3, phi3, gemma, deepseek3, deepseek4 (default: detected)\n"
               "  --api-key KEY     require \"Authorization: Bearer KEY\" or \"x-api-key: KEY\" (not on /health;\n"
               "                    default: the MOERUN_API_KEY environment variable, else no key)\n"
               "  --admin-key KEY   key for GET/POST /v1/admin/moe, which shows / changes the MoE approximations\n"
               "                    while serving (default: MOERUN_ADMIN_KEY, else the API key; with neither the\n"
               "                    endpoint answers 403)\n"
               MR_CLI_APPROX_HELP
               "  --moe-approx-file PATH  control file with a spec (e.g. \"k=5 layers=3-\"; empty or \"off\": exact),\n"
               "                    re-read when it changes, checked before every evaluation; it holds the whole\n"
               "                    setting and, when present at start, overrides --moe-approx (docs/APPROX.md)\n"
               "Responses name the active setting: \"moerun\":{\"approx\":SPEC} and an X-Moerun-Approx header.\n"
               "  --ep              expert parallelism (an MPI build under mpirun; docs/MULTIHOST.md): rank 0 serves\n"
               "                    HTTP, the other ranks compute their share of the routed experts\n");
}

static int cmd_server(int argc, char **argv) {
    const char *ram_budget = NULL; /* SIZE or auto, parsed once the model path is known */
    const char *model = NULL;
    mr_server_params sp;
    mr_server_params_default(&sp);
    sp.stop = &server_stop;
    sp.api_key = getenv("MOERUN_API_KEY");
    sp.admin_key = getenv("MOERUN_ADMIN_KEY");
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_approx_params ap;
    mr_approx_params_default(&ap);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { server_usage(stdout); return 0; }
        int af = mr_cli_approx_flag(argc, argv, &i, &ap);
        if (af < 0) return 1;
        if (af) continue;
        if (i + 1 >= argc) { fprintf(stderr, "error: unknown or incomplete option '%s' (see moerun server --help)\n", a); return 1; }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--host")) sp.host = v;
        else if (!strcmp(a, "--port")) bad = mr_cli_int(a, v, 1, 65535, &sp.port);
        else if (!strcmp(a, "-c")) bad = mr_cli_int(a, v, 0, INT_MAX, &sp.n_ctx);
        else if (!strcmp(a, "-t")) bad = mr_cli_int(a, v, 0, MR_CLI_MAX_THREADS, &mp.n_threads);
        else if (!strcmp(a, "--alias")) sp.alias = v;
        else if (!strcmp(a, "--api-key")) sp.api_key = v;
        else if (!strcmp(a, "--admin-key")) sp.admin_key = v;
        else if (!strcmp(a, "--moe-approx-file")) sp.approx_file = v;
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) bad = mr_cli_int(a, v, 1, 256, &sp.n_parallel);
        else if (!strcmp(a, "--chat-template")) {
            if (!mr_chat_template_known(v)) { fprintf(stderr, "error: unknown chat template '%s'\n", v); return 1; }
            sp.chat_template = v;
        }
        else if (!strcmp(a, "--ram-budget")) ram_budget = v;
        else { fprintf(stderr, "error: unknown option %s (see moerun server --help)\n", a); return 1; }
        if (bad) return 1;
    }
    if (!model) { fprintf(stderr, "error: -m MODEL is required (see moerun server --help)\n"); return 1; }
    mp.n_ctx = sp.n_ctx;
    if (ram_budget && mr_ram_budget_parse(ram_budget, model, mp.n_ctx, &mp.ram_budget)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        return 1;
    }
    /* bind first: a taken port fails at once, not after loading the model. With --ep only rank 0
     * serves HTTP; the other ranks load the model and serve their experts to it (mr_cli_ep_join) */
    if (mr_ep_rank() == 0) {
        sp.listen_fd = mr_server_listen(sp.host, sp.port);
        if (sp.listen_fd < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    }
    mr_model *m = mr_model_load(model, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); if (sp.listen_fd >= 0) close(sp.listen_fd); return 1; }
    mr_cli_ep_join(m);
    if (mr_model_set_approx(m, &ap)) { fprintf(stderr, "error: %s\n", mr_last_error()); mr_model_free(m); return 1; }
    if (mr_approx_params_enabled(&ap)) mr_cli_approx_report(m, stderr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = mr_server_run(m, &sp);
    if (rc != 0) fprintf(stderr, "error: %s\n", mr_last_error());
    mr_model_free(m);
    return rc ? 1 : 0;
}

MR_COMMAND(server, "OpenAI-compatible HTTP server (chat/completions, streaming, prompt cache)", cmd_server)
