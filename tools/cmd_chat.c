/* moerun chat: interactive multi-turn conversation using the model's chat template.
 * Each turn only the new text (end of the previous reply, the user's message, the assistant prefix)
 * is evaluated; the KV cache keeps the conversation. When a message no longer fits the context, the
 * oldest turns are dropped (the system prompt stays) until the conversation fills at most half of
 * it, and the rest is evaluated again (like llama.cpp's context shift): the typed message is kept.
 * Ctrl-C stops a prompt or a reply, not the program; at the prompt, Ctrl-C or end of input (Ctrl-D)
 * or /exit ends the chat. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mr_cli_common c;
    const char *sys, *tmpl;
    int n_max, show_prompt;
    mr_cli_spec spec;
} chat_args;

#define CHAT_OPTS(a) \
    MR_CLI_OPT_MODEL(&(a)->c), \
    {.names = "-sys, --system-prompt, --system", .arg = "TEXT", .help = "system prompt", .kind = MR_OPT_STR, .dst = &(a)->sys}, \
    {.names = "--chat-template", .arg = "NAME", .help = "chatml, llama2, llama3, phi3, gemma, deepseek3, deepseek4, chatglm4,\n" \
     "gpt-oss, kimi-k2 (default: " \
     "recognised from the model, else a built-in per architecture)", .kind = MR_OPT_STR, .dst = &(a)->tmpl}, \
    {.names = "-n, --n-predict, --predict", .arg = "N", .help = "max tokens per reply (default 1024; -1 = until the context is full)", \
     .kind = MR_OPT_FN, .dst = &(a)->n_max, .fn = chat_opt_n}, \
    MR_CLI_OPTS_SAMPLER(&(a)->c), \
    MR_CLI_OPT_THREADS(&(a)->c), \
    MR_CLI_OPT_CTX(&(a)->c), \
    MR_CLI_OPT_BUDGET(&(a)->c), \
    {.names = "--show-prompt", .help = "print the formatted text sent to the model (stderr)", .kind = MR_OPT_FLAG, \
     .dst = &(a)->show_prompt, .ival = 1}, \
    MR_CLI_OPT_OFFICIAL(&(a)->c), \
    MR_CLI_OPTS_APPROX(&(a)->c), \
    MR_CLI_OPT_APPROX_FILE(&(a)->c), \
    MR_CLI_OPTS_SPEC(&(a)->spec), \
    MR_CLI_OPTS_IGNORED, \
    {.names = "--jinja", .help = "templates are built in, see --chat-template", .kind = MR_OPT_NOTICE}, \
    {.names = "-cnv, --conversation, -i, --interactive", .help = "chat always converses", .kind = MR_OPT_NOTICE}

/* -1, or at least one token per reply */
static int chat_opt_n(const char *opt, const char *v, void *dst) {
    if (mr_cli_int(opt, v, -1, INT_MAX, dst)) return -1;
    if (*(int *)dst == 0) { fprintf(stderr, "error: bad value '%s' for %s (want -1 or a whole number >= 1)\n", v, opt); return -1; }
    return 0;
}

static const char chat_commands[] =
    "  /help                this list\n"
    "  /clear               forget the conversation (the system prompt stays)\n"
    "  /save FILE           write the conversation to FILE\n"
    "  /load FILE           continue the conversation saved in FILE\n"
    "  /approx [SPEC]       show or change the MoE approximations, e.g. /approx prune=0.9 skip=0.05,\n"
    "                       /approx off (applies from the next token)\n"
    "  /exit, /quit         end the chat (also Ctrl-D, or Ctrl-C at the prompt)\n";

static void chat_usage(FILE *f) {
    chat_args a;
    const mr_opt opts[] = {CHAT_OPTS(&a)};
    fprintf(f, "usage: moerun chat -m MODEL [options]\n\n"
               "Type a message and Enter; the reply streams on stdout, speeds on stderr. Ctrl-C stops a reply.\n"
               "When the context is full the oldest turns are dropped (the system prompt stays).\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
    fprintf(f, "commands while chatting:\n%s", chat_commands);
}

/* ---- the conversation ---- */
typedef struct { mr_chat_msg *v; int n, cap; } chat_hist;

static const char *role_name(const char *r) {
    return !strcmp(r, "system") ? "system" : !strcmp(r, "user") ? "user" : !strcmp(r, "assistant") ? "assistant" : NULL;
}

static int hist_add(chat_hist *h, const char *role, const char *text, size_t len) {
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        mr_chat_msg *v = realloc(h->v, sizeof *v * (size_t)cap);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, text, len);
    c[len] = 0;
    h->v[h->n++] = (mr_chat_msg){.role = role_name(role), .content = c};
    return 0;
}

static void hist_drop(chat_hist *h, int from, int count) {
    for (int i = from; i < from + count; i++) free((char *)h->v[i].content);
    memmove(h->v + from, h->v + from + count, sizeof *h->v * (size_t)(h->n - from - count));
    h->n -= count;
}

/* one message per line: role, a tab, the content with \, newline and CR escaped */
static int hist_save(const chat_hist *h, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < h->n; i++) {
        fprintf(f, "%s\t", h->v[i].role);
        for (const char *p = h->v[i].content; *p; p++) {
            if (*p == '\\') fputs("\\\\", f);
            else if (*p == '\n') fputs("\\n", f);
            else if (*p == '\r') fputs("\\r", f);
            else fputc(*p, f);
        }
        fputc('\n', f);
    }
    return fclose(f) ? -1 : 0;
}

static int hist_load(chat_hist *h, const char *path) {
    char *data = mr_cli_read_file(path, NULL);
    if (!data) { fprintf(stderr, "error: cannot read %s\n", path); return -1; }
    chat_hist nh = {0};
    int rc = 0, line = 0;
    for (char *p = data; *p && !rc; line++) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        char *tab = strchr(p, '\t');
        if (tab) *tab = 0;
        if (!tab || !role_name(p)) { fprintf(stderr, "error: %s:%d: not a saved conversation line\n", path, line + 1); rc = -1; break; }
        char *w = tab + 1;
        for (char *r = tab + 1; *r; r++) {
            if (*r == '\\' && r[1]) { r++; *w++ = *r == 'n' ? '\n' : *r == 'r' ? '\r' : *r; }
            else *w++ = *r;
        }
        if (hist_add(&nh, p, tab + 1, (size_t)(w - (tab + 1)))) { fprintf(stderr, "error: out of memory\n"); rc = -1; }
        p = e ? e + 1 : p + strlen(p);
    }
    free(data);
    if (rc) { hist_drop(&nh, 0, nh.n); free(nh.v); return -1; }
    hist_drop(h, 0, h->n);
    free(h->v);
    *h = nh;
    return 0;
}

/* render the conversation (plus the assistant prefix) into a malloc'd string */
static char *chat_render(mr_model *m, const char *tmpl, const chat_hist *h) {
    int need = mr_chat_render(m, tmpl, h->v, h->n, 1, NULL, 0);
    if (need < 0) return NULL;
    char *buf = malloc((size_t)need + 1);
    if (buf) mr_chat_render(m, tmpl, h->v, h->n, 1, buf, need + 1);
    return buf;
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

static int cmd_chat(int argc, char **argv) {
    chat_args a;
    memset(&a, 0, sizeof a);
    mr_cli_common_init(&a.c);
    mr_cli_spec_default(&a.spec);
    a.n_max = 1024;
    const mr_opt opts[] = {CHAT_OPTS(&a)};
    int pr_rc = mr_cli_parse("chat", opts, MR_NOPTS(opts), chat_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    if (!a.c.model) { fprintf(stderr, "error: -m MODEL is required\n"); return 1; }
    if (a.tmpl && !mr_chat_template_known(a.tmpl)) { fprintf(stderr, "error: unknown chat template '%s'\n", a.tmpl); return 1; }

    int rc = 1;
    chat_hist h = {0};
    chat_str kv_text = {0};        /* the text whose tokens are in the session (or pending in g) */
    int32_t *ids = NULL;
    char *full = NULL;
    mr_session *s = NULL;
    mr_gen *g = NULL;
    mr_cli_progress pr;
    mr_cli_catch_sigint();
    mr_cli_pick_seed(&a.c);
    int intr;
    a.c.mp.mtp |= a.spec.mtp || a.spec.draft_path; /* an MTP sidecar as -md reads the trunk's states */
    mr_model *m = mr_cli_load(&a.c, NULL, &intr);
    if (!m) { if (intr) rc = 130; goto done; }
    const char *tmpl_name = a.tmpl ? a.tmpl : mr_chat_template_detect(m);
    mr_tokenizer *tok = mr_model_tokenizer(m);
    if (!tok) { fprintf(stderr, "error: %s has no usable tokenizer\n", a.c.model); goto done; }
    s = mr_session_new(m, 0);
    mr_gen_params gp;
    mr_gen_params_default(&gp);
    gp.sampler = a.c.sp;
    gp.max_tokens = a.n_max;
    gp.ignore_eos = a.c.ignore_eos;
    gp.n_batch = a.c.n_batch;
    gp.progress = mr_cli_progress_gen;
    gp.user = &pr;
    if (s && mr_cli_spec_setup(&a.spec, mr_model_n_threads(m), mr_session_n_ctx(s), &gp)) goto done;
    g = s ? mr_gen_new(s, &gp) : NULL;
    if (!s || !g) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
    const int n_ctx = mr_session_n_ctx(s);
    fprintf(stderr, "chat template %s; /help for commands, /exit or Ctrl-D to quit\n", tmpl_name);
    if (a.sys && hist_add(&h, "system", a.sys, strlen(a.sys))) { fprintf(stderr, "error: out of memory\n"); goto done; }
    const int n_keep = a.sys ? 1 : 0; /* messages never dropped */

    char line[8192];
    for (;;) {
        fprintf(stdout, "> ");
        fflush(stdout);
        mr_cli_interrupted = 0;
        if (!fgets(line, sizeof line, stdin)) { printf("\n"); break; } /* EOF or Ctrl-C */
        size_t ll = strlen(line);
        while (ll && (line[ll - 1] == '\n' || line[ll - 1] == '\r')) line[--ll] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/help")) { fputs(chat_commands, stderr); continue; }
        if (!strcmp(line, "/clear")) {
            hist_drop(&h, n_keep, h.n - n_keep);
            fprintf(stderr, "(conversation cleared)\n");
            continue; /* the next turn no longer extends the session's text: it starts over */
        }
        if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
            const char *path = line + 6;
            if (line[1] == 's') {
                if (hist_save(&h, path)) fprintf(stderr, "error: cannot write %s\n", path);
                else fprintf(stderr, "(saved %d messages to %s)\n", h.n, path);
            } else if (hist_load(&h, path) == 0) fprintf(stderr, "(loaded %d messages from %s)\n", h.n, path);
            continue;
        }
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
        if (line[0] == '/' && line[1] && !strchr(line, ' ') && strcmp(line, "//")) {
            fprintf(stderr, "unknown command %s (/help lists them; start a message with // to send a /)\n", line);
            continue;
        }
        if (!ll) continue;
        const char *msg = line[0] == '/' && line[1] == '/' ? line + 1 : line; /* "//x" sends "/x" */
        if (hist_add(&h, "user", msg, strlen(msg))) {
            fprintf(stderr, "error: out of memory\n");
            goto done;
        }
        /* what the session lacks; on overflow, drop the oldest turns and start over */
        int n = 0, first = 1, dropped = 0, shifting = 0;
        const char *delta;
        for (;;) {
            free(full);
            full = chat_render(m, a.tmpl, &h);
            if (!full) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
            delta = full;
            first = 1;
            if (kv_text.len && !strncmp(full, kv_text.s, kv_text.len)) { delta = full + kv_text.len; first = 0; }
            else if (kv_text.len || mr_session_n_past(s)) { mr_session_reset(s); mr_gen_reset(g); kv_text.len = 0; }
            free(ids);
            n = mr_cli_tokenize(tok, delta, strlen(delta), first, 1, &ids);
            if (n < 0) goto done;
            const int used = mr_session_n_past(s) + mr_gen_n_pending(g) + n;
            const int droppable = h.n - 1 - n_keep; /* messages before the new one */
            if (used + 1 < n_ctx && (!shifting || used <= n_ctx / 2 || droppable <= 0)) break;
            if (droppable <= 0) break;
            /* a turn is the oldest user message and the reply that followed it */
            int k = droppable >= 2 && !strcmp(h.v[n_keep + 1].role, "assistant") ? 2 : 1;
            hist_drop(&h, n_keep, k);
            dropped += k;
            shifting = 1;
            mr_session_reset(s);
            mr_gen_reset(g);
            kv_text.len = 0;
        }
        if (mr_session_n_past(s) + mr_gen_n_pending(g) + n + 1 >= n_ctx) {
            fprintf(stderr, "error: the message (%d tokens with the template) does not fit the context (%d tokens)\n", n, n_ctx);
            hist_drop(&h, h.n - 1, 1);
            continue;
        }
        if (dropped) fprintf(stderr, "(context full: dropped the %d oldest messages)\n", dropped);
        if (a.show_prompt) fprintf(stderr, "[prompt] %s\n", delta);
        mr_gen_stats before, after;
        mr_gen_get_stats(g, &before);
        mr_cli_approx_poll(&a.c, m);
        mr_cli_progress_init(&pr, "prefill");
        int pf = mr_gen_prefill(g, ids, n);
        mr_cli_progress_clear(&pr);
        if (pf < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); goto done; }
        if (pf > 0) {
            /* Ctrl-C during the prompt: the message is not sent; the session restarts next turn */
            fprintf(stderr, "(stopped)\n");
            mr_session_reset(s);
            mr_gen_reset(g);
            kv_text.len = 0;
            hist_drop(&h, h.n - 1, 1);
            continue;
        }
        if (cs_append(&kv_text, delta, strlen(delta))) { fprintf(stderr, "error: out of memory\n"); goto done; }
        mr_gen_step st = {0};
        while (!st.finish) {
            mr_cli_approx_poll(&a.c, m); /* a token boundary: the control file's changes apply here */
            if (mr_cli_interrupted) mr_gen_stop(g, &st);
            else if (mr_gen_next(g, &st)) { fprintf(stderr, "\nerror: %s\n", mr_last_error()); goto done; }
            if (st.len) { fwrite(st.text, 1, st.len, stdout); fflush(stdout); }
        }
        mr_gen_get_stats(g, &after);
        printf("\n");
        if (st.finish == MR_GEN_ABORTED) fprintf(stderr, "(stopped)\n");
        if (st.finish == MR_GEN_CONTEXT) fprintf(stderr, "(the context is full: the next message drops the oldest turns)\n");
        int n_gen = after.n_gen - before.n_gen;
        double tp = after.prefill_s - before.prefill_s, td = after.decode_s - before.decode_s;
        fprintf(stderr, "[%d prompt tokens %.1f tok/s, %d generated %.1f tok/s]\n", n, tp > 0 ? n / tp : 0.0,
                n_gen, td > 0 ? n_gen / td : 0.0);
        /* the reply's tokens are in the session (the last one pending in g): so is its text */
        size_t rl;
        const char *reply = mr_gen_text(g, &rl);
        if (cs_append(&kv_text, reply, rl) || hist_add(&h, "assistant", reply, rl)) { fprintf(stderr, "error: out of memory\n"); goto done; }
    }
    mr_cli_spec_report(&a.spec, g, stderr);
    if (a.c.budget) {
        mr_gen_stats gs;
        mr_gen_get_stats(g, &gs);
        mr_pager_print_summary(stderr, m, gs.n_prompt, gs.prefill_s, gs.n_decode, gs.decode_s);
    }
    rc = 0;
done:
    hist_drop(&h, 0, h.n);
    free(h.v); free(kv_text.s); free(ids); free(full);
    mr_gen_free(g);
    mr_cli_spec_free(&a.spec);
    mr_session_free(s);
    mr_model_free(m);
    mr_approx_file_free(a.c.approx_file);
    return rc;
}

MR_COMMAND(chat, "interactive chat with the model's chat template", cmd_chat)
