/* Thinking (reasoning) in chat replies: where each template's reasoning starts and ends
 * (mr_chat_thinking), and a reply split into its reasoning and its answer, also while it streams
 * (mr_chat_split_reasoning). How the templates render thinking is in chat.c. */
#include "moerun.h"
#include "base/base.h"
#include "chat/chat_impl.h"

#include <string.h>

/* Qwen3.5 (qwen35moe) opens the reasoning in the generation prompt and thinks unless told not to;
 * Qwen3 and other chatml models write "<think>" themselves when they think */
int mr_chat_qwen_opens_think(const mr_model *m) {
    return m && mr_model_arch(m) && !strcmp(mr_model_arch(m), "qwen35moe");
}

int mr_chat_template_has(const mr_model *m, const char *s) {
    const char *t = m ? mr_model_meta_str(m, "tokenizer.chat_template") : NULL;
    return t && strstr(t, s);
}

int mr_chat_qwen_thinks(const mr_model *m) { return mr_chat_qwen_opens_think(m) || mr_chat_template_has(m, "<think>"); }

int mr_chat_thinking(const mr_model *m, const char *tmpl, const mr_chat_opts *o, mr_chat_think *t) {
    if (!tmpl) tmpl = mr_chat_template_detect(m);
    const int th = o ? o->thinking : -1;
    memset(t, 0, sizeof *t);
    t->open = "<think>";
    t->close = "</think>";
    if (!strcmp(tmpl, "deepseek4")) { /* thinking only when asked (the template's default is off) */
        t->in_prompt = 1;
        return th > 0;
    }
    if (!strcmp(tmpl, "gpt-oss")) { /* harmony: the analysis channel (always written), then the final one */
        t->open = "<|channel|>analysis<|message|>";
        t->close = "<|end|><|start|>assistant";
        t->answer_prefix = "<|channel|>final<|message|>";
        return 1;
    }
    if (th == 0) return 0;
    if (!strcmp(tmpl, "chatml")) t->in_prompt = mr_chat_qwen_opens_think(m);
    else if (!strcmp(tmpl, "deepseek3")) t->in_prompt = th > 0; /* V3.1: "<think>" in the prompt; R1 writes it */
    else if (strcmp(tmpl, "chatglm4") && strcmp(tmpl, "kimi-k2")) return 0;
    return 1;
}

/* the longest suffix of text[from, len) that is a proper prefix of lit */
static size_t partial_tail(const char *text, size_t from, size_t len, const char *lit) {
    const size_t ll = strlen(lit), avail = len - from;
    for (size_t l = ll - 1 < avail ? ll - 1 : avail; l > 0; l--)
        if (!memcmp(text + len - l, lit, l)) return l;
    return 0;
}

/* 1 if text[at, len) could still grow into lit (a proper prefix of it, or empty) */
static int may_become(const char *text, size_t at, size_t len, const char *lit) {
    const size_t n = len - at;
    return n < strlen(lit) && !memcmp(text + at, lit, n);
}

static size_t skip_space(const char *text, size_t at, size_t len) {
    while (at < len && (text[at] == '\n' || text[at] == ' ' || text[at] == '\r' || text[at] == '\t')) at++;
    return at;
}

/* The answer's start at or after at: whitespace and the template's answer prefix skipped; len while
 * what follows may still be part of them (the reply goes on). */
static size_t answer_start(const mr_chat_think *t, const char *text, size_t at, size_t len, int final) {
    at = skip_space(text, at, len);
    if (t->answer_prefix) {
        const size_t pl = strlen(t->answer_prefix);
        if (len - at >= pl && !memcmp(text + at, t->answer_prefix, pl)) at = skip_space(text, at + pl, len);
        else if (!final && may_become(text, at, len, t->answer_prefix)) return len;
    }
    return at;
}

void mr_chat_split_reasoning(const mr_chat_think *t, const char *text, size_t len, int final, mr_chat_split *s) {
    memset(s, 0, sizeof *s);
    size_t rs = 0;
    if (!t->in_prompt) {
        const size_t at = skip_space(text, 0, len), ol = strlen(t->open);
        if (len - at >= ol && !memcmp(text + at, t->open, ol)) rs = at + ol;
        else if (!final && may_become(text, at, len, t->open)) { /* not yet known */
            s->r_off = s->c_off = len;
            return;
        } else { /* no reasoning: all of it is the answer */
            s->r_off = 0;
            s->c_off = answer_start(t, text, 0, len, final);
            s->done = 1;
            return;
        }
    }
    s->r_off = rs;
    const size_t cl = strlen(t->close);
    const char *q = len - rs >= cl ? memmem(text + rs, len - rs, t->close, cl) : NULL;
    if (q) {
        s->r_len = (size_t)(q - text) - rs;
        s->c_off = answer_start(t, text, (size_t)(q - text) + cl, len, final);
        s->done = 1;
        return;
    }
    /* still reasoning: a tail that may become the close marker is held back while the reply goes on */
    s->r_len = len - rs - (final ? 0 : partial_tail(text, rs, len, t->close));
    s->c_off = len;
}
