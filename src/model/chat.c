/* Chat templates: the formats of the common model families, picked by recognising the GGUF's
 * embedded tokenizer.chat_template (substring checks, like llama.cpp's template detection) or,
 * without one, a built-in per architecture. Output is text; tokenize it with parse_special = 1. */
#include "model/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *tmpl_names[] = {"chatml", "llama2", "llama3", "phi3", "gemma", "deepseek3", "deepseek4", NULL};

const char *mr_chat_template_detect(const mr_model *m) {
    const char *t = mr_model_meta_str(m, "tokenizer.chat_template");
    const char *arch = mr_model_arch(m);
    if (t) {
        if (strstr(t, "<|im_start|>")) return "chatml";
        if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>")) return "llama3";
        if (strstr(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && strstr(t, "<\xef\xbd\x9c" "User\xef\xbd\x9c>"))
            return strcmp(arch, "deepseek4") ? "deepseek3" : "deepseek4";
        if (strstr(t, "<|assistant|>") && strstr(t, "<|end|>")) return "phi3";
        if (strstr(t, "<start_of_turn>")) return "gemma";
        if (strstr(t, "[INST]")) return "llama2";
    }
    if (!strcmp(arch, "deepseek4")) return "deepseek4";
    return "chatml"; /* llama.cpp's default when a model has no template */
}

int mr_chat_template_known(const char *name) {
    for (int i = 0; tmpl_names[i]; i++) if (!strcmp(name, tmpl_names[i])) return 1;
    return 0;
}

typedef struct { char *buf; int size, len; } sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int room = b->len < b->size ? b->size - b->len : 0;
    int k = vsnprintf(room ? b->buf + b->len : NULL, (size_t)room, fmt, ap);
    va_end(ap);
    if (k > 0) b->len += k;
}

#define DS_USER "<\xef\xbd\x9c" "User\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>"

int mr_chat_render(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, int add_assistant,
                   char *out, int size) {
    if (!tmpl) tmpl = mr_chat_template_detect(m);
    if (!mr_chat_template_known(tmpl)) { mr_set_error("chat: unknown template '%s'", tmpl); return -1; }
    sbuf b = {out, size, 0};
    if (size > 0) out[0] = 0;
    const char *pending_sys = NULL; /* formats without a system role fold it into the first user turn */
    int ds4 = !strcmp(tmpl, "deepseek4"), ds4_pending = 0;
    if (ds4) /* DeepSeek V4 (its jinja template): every system message first, joined by blank lines */
        for (int i = 0, first = 1; i < n; i++)
            if (!strcmp(msgs[i].role, "system")) { put(&b, "%s%s", first ? "" : "\n\n", msgs[i].content); first = 0; }
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content;
        int sys = !strcmp(role, "system"), user = !strcmp(role, "user"), ass = !strcmp(role, "assistant");
        if (!sys && !user && !ass) { mr_set_error("chat: unknown role '%s'", role); return -1; }
        if (!strcmp(tmpl, "chatml")) {
            put(&b, "<|im_start|>%s\n%s<|im_end|>\n", role, c);
        } else if (!strcmp(tmpl, "llama3")) {
            put(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", role, c);
        } else if (!strcmp(tmpl, "phi3")) {
            put(&b, "<|%s|>\n%s<|end|>\n", role, c);
        } else if (!strcmp(tmpl, "gemma")) {
            if (sys) { pending_sys = c; continue; }
            put(&b, "<start_of_turn>%s\n", user ? "user" : "model");
            if (user && pending_sys) { put(&b, "%s\n\n", pending_sys); pending_sys = NULL; }
            put(&b, "%s<end_of_turn>\n", c);
        } else if (!strcmp(tmpl, "llama2")) {
            if (sys) { pending_sys = c; continue; }
            if (user) {
                put(&b, "[INST] ");
                if (pending_sys) { put(&b, "<<SYS>>\n%s\n<</SYS>>\n\n", pending_sys); pending_sys = NULL; }
                put(&b, "%s [/INST]", c);
            } else put(&b, " %s</s>", c);
        } else if (ds4) {
            /* the assistant prefix (non-thinking: "</think>") only opens a turn that follows a user turn */
            if (user) { put(&b, DS_USER "%s", c); ds4_pending = 1; }
            else if (ass) { put(&b, "%s%s" DS_EOS, ds4_pending ? DS_ASSISTANT "</think>" : "", c); ds4_pending = 0; }
        } else { /* deepseek3 */
            if (sys) put(&b, "%s\n\n", c);
            else if (user) put(&b, DS_USER "%s", c);
            else put(&b, DS_ASSISTANT "%s" DS_EOS, c);
        }
    }
    if (add_assistant) {
        if (!strcmp(tmpl, "chatml")) put(&b, "<|im_start|>assistant\n");
        else if (!strcmp(tmpl, "llama3")) put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        else if (!strcmp(tmpl, "phi3")) put(&b, "<|assistant|>\n");
        else if (!strcmp(tmpl, "gemma")) put(&b, "<start_of_turn>model\n");
        else if (!strcmp(tmpl, "deepseek3")) put(&b, DS_ASSISTANT);
        else if (ds4 && ds4_pending) put(&b, DS_ASSISTANT "</think>"); /* non-thinking generation prompt */
        /* llama2: the model answers right after [/INST] */
    }
    return b.len;
}
