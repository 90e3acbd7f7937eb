/* moerun chat: interactive multi-turn conversation using the model's chat template.
 * Each turn only the new text (end of the previous reply, the user's message, the assistant prefix)
 * is evaluated; the KV cache keeps the conversation. Ctrl-C stops a reply, not the program;
 * at the prompt, Ctrl-C or end of input (Ctrl-D) or /exit ends the chat. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void chat_usage(FILE *f) {
    fprintf(f, "usage: moerun chat -m MODEL [options]\n"
               "  -s, --system TEXT    system prompt\n"
               "  --chat-template NAME chatml, llama2, llama3, phi3, gemma, deepseek3, deepseek4\n"
               "                       (default: recognised from the model, else a built-in per architecture)\n"
               "  -n N                 max tokens per reply (default 1024)\n"
               MR_CLI_SAMPLER_HELP
               "  -t THREADS           worker threads (default 0 = physical cores)\n"
               "  -c CTX               context length (default 0 = min(training context, 4096))\n"
               "  --ram-budget SIZE    RAM for routed experts (e.g. 8G, 512M, auto; default: no paging)\n"
               "  --show-prompt        print the formatted text sent to the model (stderr)\n"
               "  --official           deepseek4: the official model's graph (indexer QAT, shared-expert clamp)\n"
               "                       instead of the reference llama.cpp fork (docs/DEEPSEEK4.md)\n"
               MR_CLI_APPROX_HELP
               "  Type a message and Enter. Ctrl-C stops a reply; /exit, Ctrl-D or Ctrl-C at the prompt quit.\n"
               "  /approx [SPEC]       show or change the MoE approximations while chatting, e.g.\n"
               "                       /approx prune=0.9 skip=0.05   /approx off   (applies from the next token)\n");
}

typedef struct { char *s; size_t len, cap; } chat_str;
static int cs_append(chat_str *b, const char *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *q = realloc(b->s, cap);
        if (!q) return -1;
        b->s = q; b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

/* render msgs into a malloc'd string */
static char *chat_render(mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, int add_ass) {
    int need = mr_chat_render(m, tmpl, msgs, n, add_ass, NULL, 0);
    if (need < 0) return NULL;
    char *buf = malloc((size_t)need + 1);
    if (buf) mr_chat_render(m, tmpl, msgs, n, add_ass, buf, need + 1);
    return buf;
}

static int cmd_chat(int argc, char **argv) {
    const char *ram_budget = NULL; /* SIZE or auto, parsed once the model path is known */
    const char *model = NULL, *sys = NULL, *tmpl = NULL;
    int n_max = 1024, show_prompt = 0;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_sampler_params sp;
    mr_sampler_default_params(&sp);
    mr_approx_params ap;
    mr_approx_params_default(&ap);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        int af = mr_cli_approx_flag(argc, argv, &i, &ap);
        if (!af) af = mr_cli_sampler_flag(argc, argv, &i, &sp);
        if (af < 0) return 1;
        if (af) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { chat_usage(stdout); return 0; }
        else if (!strcmp(a, "-m") && has) model = argv[++i];
        else if ((!strcmp(a, "-s") || !strcmp(a, "--system")) && has) sys = argv[++i];
        else if (!strcmp(a, "--chat-template") && has) tmpl = argv[++i];
        else if (!strcmp(a, "-n") && has) { if (mr_cli_int(a, argv[++i], 1, INT_MAX, &n_max)) return 1; }
        else if (!strcmp(a, "-t") && has) { if (mr_cli_int(a, argv[++i], 0, MR_CLI_MAX_THREADS, &mp.n_threads)) return 1; }
        else if (!strcmp(a, "-c") && has) { if (mr_cli_int(a, argv[++i], 0, INT_MAX, &mp.n_ctx)) return 1; }
        else if (!strcmp(a, "--official")) mp.reference = 0;
        else if (!strcmp(a, "--ram-budget") && has) ram_budget = argv[++i];
        else if (!strcmp(a, "--show-prompt")) show_prompt = 1;
        else { fprintf(stderr, "error: unknown or incomplete option '%s'\n", a); chat_usage(stderr); return 1; }
    }
    if (!model) { fprintf(stderr, "error: -m MODEL is required\n"); return 1; }
    if (tmpl && !mr_chat_template_known(tmpl)) { fprintf(stderr, "error: unknown chat template '%s'\n", tmpl); return 1; }

    int rc = 1, n_msgs = 0, cap_msgs = 16;
    mr_chat_msg *msgs = malloc(sizeof *msgs * (size_t)cap_msgs);
    chat_str kv_text = {0};        /* the text whose tokens are in the session (or pending in g) */
    int32_t *ids = NULL;
    mr_session *s = NULL;
    mr_gen *g = NULL;
    mr_cli_progress pr;
    double t0 = mr_cli_now();
    if (ram_budget && mr_ram_budget_parse(ram_budget, model, mp.n_ctx, &mp.ram_budget)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        free(msgs);
        return 1;
    }
    mr_model *m = mr_model_load(model, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    if (mr_model_set_approx(m, &ap)) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    mr_tokenizer *tok = mr_model_tokenizer(m);
    if (!tok) { fprintf(stderr, "error: %s has no usable tokenizer\n", model); goto done; }
    s = mr_session_new(m, 0);
    mr_gen_params gp;
    mr_gen_params_default(&gp);
    gp.sampler = sp;
    gp.max_tokens = n_max;
    gp.progress = mr_cli_progress_gen;
    gp.user = &pr;
    g = s ? mr_gen_new(s, &gp) : NULL;
    if (!msgs || !s || !g) { fprintf(stderr, "error: %s\n", msgs ? mr_last_error() : "out of memory"); goto done; }
    const int n_ctx = mr_session_n_ctx(s);
    fprintf(stderr, "loaded %s (%s, template %s) in %.2f s; /exit or Ctrl-D to quit\n", model, mr_model_arch(m),
            tmpl ? tmpl : mr_chat_template_detect(m), mr_cli_now() - t0);
    if (sys) msgs[n_msgs++] = (mr_chat_msg){"system", strdup(sys)};
    mr_cli_catch_sigint();

    char line[8192];
    for (;;) {
        fprintf(stdout, "> ");
        fflush(stdout);
        mr_cli_interrupted = 0;
        if (!fgets(line, sizeof line, stdin)) { printf("\n"); break; } /* EOF or Ctrl-C */
        size_t ll = strlen(line);
        while (ll && (line[ll - 1] == '\n' || line[ll - 1] == '\r')) line[--ll] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strncmp(line, "/approx", 7) && (line[7] == 0 || line[7] == ' ')) {
            /* MoE approximations, changed between turns (they apply from the next eval) */
            mr_approx_params cur;
            mr_model_get_approx(m, &cur);
            if (line[7] && (mr_approx_parse(line + 8, &cur) || mr_model_set_approx(m, &cur)))
                fprintf(stderr, "error: %s\n", mr_last_error());
            else mr_cli_approx_report(m, stderr);
            mr_model_approx_stats_reset(m);
            continue;
        }
        if (!ll) continue;
        if (n_msgs + 2 > cap_msgs) {
            cap_msgs *= 2;
            mr_chat_msg *nm = realloc(msgs, sizeof *msgs * (size_t)cap_msgs);
            if (!nm) { fprintf(stderr, "error: out of memory\n"); goto done; }
            msgs = nm;
        }
        char *user_text = strdup(line);
        if (!user_text) { fprintf(stderr, "error: out of memory\n"); goto done; }
        msgs[n_msgs++] = (mr_chat_msg){"user", user_text};
        char *full = chat_render(m, tmpl, msgs, n_msgs, 1);
        if (!full) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
        /* feed only what the session lacks; if the history does not extend it, start over */
        const char *delta = full;
        int first = 1;
        if (kv_text.len && !strncmp(full, kv_text.s, kv_text.len)) { delta = full + kv_text.len; first = 0; }
        else if (kv_text.len) { mr_session_reset(s); mr_gen_reset(g); kv_text.len = 0; }
        if (show_prompt) fprintf(stderr, "[prompt] %s\n", delta);
        size_t dl = strlen(delta);
        free(ids);
        int cap = (int)(dl + 16);
        ids = malloc(sizeof(int32_t) * (size_t)cap);
        int n = ids ? mr_tokenize(tok, delta, dl, first, 1, ids, cap) : INT_MIN;
        if (n < 0) { fprintf(stderr, "error: tokenize: %s\n", mr_last_error()); free(full); goto done; }
        if (mr_session_n_past(s) + mr_gen_n_pending(g) + n + 1 >= n_ctx) {
            fprintf(stderr, "error: the conversation no longer fits the context (%d tokens); starting over\n", n_ctx);
            mr_session_reset(s);
            mr_gen_reset(g);
            kv_text.len = 0;
            for (int i = 0; i < n_msgs; i++) free((char *)msgs[i].content);
            n_msgs = 0;
            if (sys) msgs[n_msgs++] = (mr_chat_msg){"system", strdup(sys)};
            free(full);
            continue;
        }
        mr_gen_stats before, after;
        mr_gen_get_stats(g, &before);
        mr_cli_progress_init(&pr, "prefill");
        int pf = mr_gen_prefill(g, ids, n);
        mr_cli_progress_clear(&pr);
        if (pf < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); free(full); goto done; }
        if (pf > 0) {
            /* Ctrl-C during the prompt: forget the message; the session restarts next turn */
            fprintf(stderr, "(stopped)\n");
            mr_session_reset(s);
            mr_gen_reset(g);
            kv_text.len = 0;
            free((char *)msgs[--n_msgs].content);
            free(full);
            continue;
        }
        int app = cs_append(&kv_text, delta, dl);
        free(full);
        if (app) { fprintf(stderr, "error: out of memory\n"); goto done; }
        mr_gen_step st = {0};
        while (!st.finish) {
            if (mr_cli_interrupted) mr_gen_stop(g, &st);
            else if (mr_gen_next(g, &st)) { fprintf(stderr, "\nerror: %s\n", mr_last_error()); goto done; }
            if (st.len) { fwrite(st.text, 1, st.len, stdout); fflush(stdout); }
        }
        mr_gen_get_stats(g, &after);
        printf("\n");
        if (st.finish == MR_GEN_ABORTED) fprintf(stderr, "(stopped)\n");
        int n_gen = after.n_gen - before.n_gen;
        double tp = after.prefill_s - before.prefill_s, td = after.decode_s - before.decode_s;
        fprintf(stderr, "[%d prompt tokens %.1f tok/s, %d generated %.1f tok/s]\n", n, tp > 0 ? n / tp : 0.0,
                n_gen, td > 0 ? n_gen / td : 0.0);
        /* the reply's tokens are in the session (the last one pending in g): so is its text */
        size_t rl;
        const char *reply = mr_gen_text(g, &rl);
        char *copy = malloc(rl + 1);
        if (!copy || cs_append(&kv_text, reply, rl)) { free(copy); fprintf(stderr, "error: out of memory\n"); goto done; }
        memcpy(copy, reply, rl + 1);
        msgs[n_msgs++] = (mr_chat_msg){"assistant", copy};
    }
    rc = 0;
done:
    for (int i = 0; msgs && i < n_msgs; i++) free((char *)msgs[i].content);
    free(msgs); free(kv_text.s); free(ids);
    mr_gen_free(g);
    mr_session_free(s);
    mr_model_free(m);
    return rc;
}

MR_COMMAND(chat, "interactive chat with the model's chat template", cmd_chat)
