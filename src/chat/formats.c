/* Templates rendered as their reference Jinja templates (tests/golden/chat): Kimi-K2, GLM-4.5/4.6,
 * gpt-oss harmony.
 *
 * Kimi-K2: the conversation as its reference templates render it (mainline's
 * models/templates/Kimi-K2-Instruct.jinja, and Kimi-K2-Thinking.jinja with thinking), and its tool
 * calls: <|tool_calls_section_begin|> then per call
 * <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>{JSON}<|tool_call_end|>, then
 * <|tool_calls_section_end|>; INDEX counts the calls of the conversation, and a tool result names the
 * call it answers ("## Return of functions.NAME:INDEX"). */
#include "chat/chat_impl.h"
#include "base/base.h"
#include "json/json.h"

#include <stdlib.h>
#include <string.h>

#define KIMI_SECTION "<|tool_calls_section_begin|>"
#define KIMI_SECTION_END "<|tool_calls_section_end|>"
#define KIMI_CALL "<|tool_call_begin|>"
#define KIMI_ARGS "<|tool_call_argument_begin|>"
#define KIMI_CALL_END "<|tool_call_end|>"
#define KIMI_QUEUE 64

typedef struct { const char *name; int index; } kimi_id;

static void kimi_tools(mr_chat_buf *b, const char *const *tools, int n_tools) {
    mr_chat_put(b, "<|im_system|>tool_declare<|im_middle|>[");
    for (int i = 0; i < n_tools; i++) mr_chat_put(b, "%s{\"type\": \"function\", \"function\": %s}", i ? ", " : "", tools[i]);
    mr_chat_put(b, "]<|im_end|>");
}

/* an assistant turn's calls; their ids queued for the results that follow */
static void kimi_calls(mr_chat_buf *b, const mr_chat_msg *m, int *counter, kimi_id *q, int *nq) {
    mr_chat_put(b, KIMI_SECTION);
    for (int k = 0; k < m->n_tool_calls; k++) {
        const mr_chat_tool_call *c = &m->tool_calls[k];
        mr_chat_put(b, KIMI_CALL "functions.%s:%d" KIMI_ARGS "%s" KIMI_CALL_END, c->name, *counter, c->arguments ? c->arguments : "{}");
        if (*nq < KIMI_QUEUE) q[(*nq)++] = (kimi_id){c->name, *counter};
        (*counter)++;
    }
    mr_chat_put(b, KIMI_SECTION_END);
}

void mr_chat_render_kimi(mr_chat_buf *b, const mr_chat_msg *msgs, int n, const char *const *tools, int n_tools, int thinking,
                         int add_assistant) {
    if (n_tools) kimi_tools(b, tools, n_tools);
    if (n == 0 || strcmp(msgs[0].role, "system")) /* the Instruct template leaves a newline after it */
        mr_chat_put(b, "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>%s", thinking ? "" : "\n");
    /* Thinking: reasoning is rendered after the first assistant turn without calls (the reference
     * looks for the last one but keeps overwriting its find going backwards: the first one), "<think></think>"
     * up to it */
    int hist_end = -1;
    for (int i = n - 1; i >= 0; i--)
        if (!strcmp(msgs[i].role, "assistant") && !msgs[i].n_tool_calls) hist_end = i;
    kimi_id q[KIMI_QUEUE];
    int counter = 0, nq = 0, head = 0;
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content;
        if (!strcmp(role, "user")) mr_chat_put(b, "<|im_user|>user<|im_middle|>");
        else if (!strcmp(role, "assistant")) mr_chat_put(b, "<|im_assistant|>assistant<|im_middle|>");
        else mr_chat_put(b, "<|im_system|>%s<|im_middle|>", role);
        if (!strcmp(role, "assistant")) {
            if (thinking) mr_chat_put(b, "<think>%s</think>", i > hist_end && msgs[i].reasoning ? msgs[i].reasoning : "");
            mr_chat_put(b, "%s", c ? c : "");
            if (msgs[i].n_tool_calls) kimi_calls(b, &msgs[i], &counter, q, &nq);
        } else if (!strcmp(role, "tool")) {
            if (head < nq) { mr_chat_put(b, "## Return of functions.%s:%d\n", q[head].name, q[head].index); head++; }
            else mr_chat_put(b, "## Return of functions.unknown:%d\n", counter);
            mr_chat_put(b, "%s", c ? c : "");
        } else if (c) mr_chat_put(b, "%s", c);
        mr_chat_put(b, "<|im_end|>");
    }
    if (add_assistant) mr_chat_put(b, "<|im_assistant|>assistant<|im_middle|>");
}

static int starts(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(end - p) >= n && !memcmp(p, lit, n);
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* the calls of a section (from its begin marker); -1 malformed, -2 out of memory */
int mr_chat_parse_kimi(const char *p, const char *end, mr_chat_tool_call *calls, int max) {
    int n = 0;
    p += strlen(KIMI_SECTION);
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end || starts(p, end, KIMI_SECTION_END)) break; /* the reply may end before the section's end */
        if (!starts(p, end, KIMI_CALL "functions.") || n == max) goto bad;
        p += strlen(KIMI_CALL "functions.");
        const char *a = memmem(p, (size_t)(end - p), KIMI_ARGS, strlen(KIMI_ARGS)), *colon = a;
        if (!a) goto bad;
        while (colon > p && colon[-1] != ':') colon--;
        if (colon == p) goto bad; /* no ":INDEX" */
        const char *args = a + strlen(KIMI_ARGS), *ae = memmem(args, (size_t)(end - args), KIMI_CALL_END, strlen(KIMI_CALL_END));
        mr_json *j = mr_json_parse(args, (size_t)((ae ? ae : end) - args));
        if (!j || j->type != MR_JSON_OBJ) { mr_json_free(j); goto bad; }
        calls[n].id = NULL;
        calls[n].name = mr_malloc((size_t)(colon - 1 - p) + 1);
        calls[n].arguments = mr_json_dump(j);
        mr_json_free(j);
        if (calls[n].name) { memcpy((char *)calls[n].name, p, (size_t)(colon - 1 - p)); ((char *)calls[n].name)[colon - 1 - p] = 0; }
        n++;
        if (!calls[n - 1].name || !calls[n - 1].arguments) { mr_chat_tool_calls_free(calls, n); mr_set_error("chat: out of memory"); return -2; }
        if (!ae) { p = end; break; }
        p = ae + strlen(KIMI_CALL_END);
    }
    if (skip_ws(p, end) < end && !starts(skip_ws(p, end), end, KIMI_SECTION_END)) goto bad;
    return n;
bad:
    mr_chat_tool_calls_free(calls, n);
    return -1;
}

/* gpt-oss (harmony) as its reference template renders it (mainline's
 * models/templates/openai-gpt-oss-120b.jinja, without tools): the system message with the model's
 * identity, the date and the reasoning effort (default "medium"), the first system message as the
 * developer's instructions (later ones are not rendered), assistant turns in the final channel (the
 * last one, when it ends the prompt, with its reasoning in the analysis channel first and
 * <|return|>). */
void mr_chat_render_harmony(mr_chat_buf *b, const mr_chat_msg *msgs, int n, const mr_chat_opts *o, int add_assistant) {
    mr_chat_put(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
                   "Current date: %s\n\nReasoning: %s\n\n# Valid channels: analysis, commentary, final. Channel must be included for "
                   "every message.<|end|>", o->date && *o->date ? o->date : "", o->effort ? o->effort : "medium");
    int first = 0;
    if (n > 0 && !strcmp(msgs[0].role, "system")) {
        first = 1;
        if (msgs[0].content && *msgs[0].content)
            mr_chat_put(b, "<|start|>developer<|message|># Instructions\n\n%s\n\n<|end|>", msgs[0].content);
    }
    for (int i = first; i < n; i++) {
        const char *c = msgs[i].content ? msgs[i].content : "";
        if (!strcmp(msgs[i].role, "user")) mr_chat_put(b, "<|start|>user<|message|>%s<|end|>", c);
        else if (!strcmp(msgs[i].role, "assistant")) {
            const int last = i == n - 1 && !add_assistant;
            if (last && msgs[i].reasoning) mr_chat_put(b, "<|start|>assistant<|channel|>analysis<|message|>%s<|end|>", msgs[i].reasoning);
            mr_chat_put(b, "<|start|>assistant<|channel|>final<|message|>%s%s", c, last ? "<|return|>" : "<|end|>");
        }
    }
    if (add_assistant) mr_chat_put(b, "<|start|>assistant");
}

/* text without leading and trailing whitespace (Python's strip()) */
static void strip_ws(const char **p, size_t *n) {
    while (*n && strchr(" \t\n\r\f\v", **p)) (*p)++, (*n)--;
    while (*n && strchr(" \t\n\r\f\v", (*p)[*n - 1])) (*n)--;
}

/* GLM-4.5 / 4.6 as its reference template renders it (mainline's models/templates/GLM-4.6.jinja,
 * without tools): every assistant turn opens "<think></think>", or "<think>REASONING</think>" after
 * the last user turn (reasoning_content, or split from a content holding "</think>"); thinking off:
 * user turns end "/nothink" and the generation prompt with an empty think block. */
void mr_chat_render_glm(mr_chat_buf *b, const mr_chat_msg *msgs, int n, int thinking, int add_assistant) {
    int last_user = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(msgs[i].role, "user")) last_user = i;
    mr_chat_put(b, "[gMASK]<sop>");
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (!strcmp(role, "user")) {
            const int nothink = thinking == 0 && !(cn >= 8 && !memcmp(c + cn - 8, "/nothink", 8));
            mr_chat_put(b, "<|user|>\n%s%s", c, nothink ? "/nothink" : "");
        } else if (!strcmp(role, "system")) {
            mr_chat_put(b, "<|system|>\n%s", c);
        } else if (!strcmp(role, "assistant")) {
            const char *r = msgs[i].reasoning, *close = strstr(c, "</think>");
            size_t rn = r ? strlen(r) : 0;
            if (!r && close) {
                const char *after = c, *q, *o;
                while ((q = strstr(after, "</think>"))) after = q + 8;
                r = c;
                rn = (size_t)(close - c);
                while (rn && r[rn - 1] == '\n') rn--;
                while ((o = memmem(r, rn, "<think>", 7))) rn -= (size_t)(o + 7 - r), r = o + 7;
                while (rn && *r == '\n') r++, rn--;
                c = after;
                while (*c == '\n') c++;
                cn = strlen(c);
            }
            if (r) strip_ws(&r, &rn);
            mr_chat_put(b, "<|assistant|>");
            if (i > last_user && rn) mr_chat_put(b, "\n<think>%.*s</think>", (int)rn, r);
            else mr_chat_put(b, "\n<think></think>");
            strip_ws(&c, &cn);
            if (cn) mr_chat_put(b, "\n%.*s", (int)cn, c);
        }
    }
    if (add_assistant) mr_chat_put(b, "<|assistant|>%s", thinking == 0 ? "\n<think></think>" : "");
}

/* DeepSeek-V3.1 as its reference template renders it (mainline's
 * models/templates/deepseek-ai-DeepSeek-V3.1.jinja, without tools): the system messages first, joined
 * by blank lines; an assistant turn after a user turn opens "<｜Assistant｜><think></think>" (earlier
 * reasoning is never rendered, a content's "<think>...</think>" is cut), tool results are
 * <｜tool▁output▁begin｜> blocks; the generation prompt after a user turn is "<｜Assistant｜>" and
 * "<think>" (thinking) or "<think></think>". */
void mr_chat_render_ds31(mr_chat_buf *b, const mr_chat_msg *msgs, int n, int thinking, int add_assistant) {
    static const char user[] = "<\xef\xbd\x9c" "User\xef\xbd\x9c>", ass[] = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
                      eos[] = "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>";
    int first = 1, last_user = 0, is_tool = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(msgs[i].role, "system")) { mr_chat_put(b, "%s%s", first ? "" : "\n\n", msgs[i].content ? msgs[i].content : ""); first = 0; }
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content ? msgs[i].content : "";
        if (!strcmp(role, "user")) {
            mr_chat_put(b, "%s%s", user, c);
            last_user = 1;
            is_tool = 0;
        } else if (!strcmp(role, "assistant")) {
            if (last_user) mr_chat_put(b, "%s<think></think>", ass);
            last_user = 0;
            const char *cut = is_tool ? NULL : strstr(c, "</think>");
            mr_chat_put(b, "%s%s", cut ? cut + 8 : c, eos);
            is_tool = 0;
        } else if (!strcmp(role, "tool")) {
            mr_chat_put(b, "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "begin\xef\xbd\x9c>%s<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "end\xef\xbd\x9c>", c);
            last_user = 0;
            is_tool = 1;
        }
    }
    if (add_assistant && last_user && !is_tool) mr_chat_put(b, "%s%s", ass, thinking > 0 ? "<think>" : "<think></think>");
}
