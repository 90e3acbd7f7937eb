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

#define HARMONY_TO "to=functions."

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

/* a call's name and its arguments, which must be a JSON object (written back as mr_json_dump
 * writes it): -1 if they are not; name NULL when out of memory */
static int harmony_required(const mr_json *req, const char *key) {
    for (const mr_json *r = req && req->type == MR_JSON_ARR ? req->child : NULL; r; r = r->next)
        if (r->type == MR_JSON_STR && !strcmp(r->str, key)) return 1;
    return 0;
}

static int call_take(mr_chat_tool_call *c, const char *name, size_t nl, const char *args, size_t al) {
    mr_json *j = mr_json_parse(args, al);
    if (!j || j->type != MR_JSON_OBJ) { mr_json_free(j); return -1; }
    c->id = NULL;
    c->arguments = mr_json_dump(j);
    mr_json_free(j);
    c->name = c->arguments ? mr_malloc(nl + 1) : NULL;
    if (c->name) { memcpy((char *)c->name, name, nl); ((char *)c->name)[nl] = 0; }
    else { free((char *)c->arguments); c->arguments = NULL; }
    return 0;
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
        if (call_take(&calls[n], p, (size_t)(colon - 1 - p), args, (size_t)((ae ? ae : end) - args))) goto bad;
        if (!calls[n++].name) { mr_chat_tool_calls_free(calls, n); mr_set_error("chat: out of memory"); return -2; }
        if (!ae) { p = end; break; }
        p = ae + strlen(KIMI_CALL_END);
    }
    if (skip_ws(p, end) < end && !starts(skip_ws(p, end), end, KIMI_SECTION_END)) goto bad;
    return n;
bad:
    mr_chat_tool_calls_free(calls, n);
    return -1;
}

/* gpt-oss's TypeScript for a parameter's JSON Schema, as the reference template's
 * render_typescript_type writes it (its whitespace too: a nested object's members put a newline and
 * 16 spaces before their type; a oneOf puts " | " and a newline between its variants; anyOf and
 * the rest are "any") */
static void ts_type(mr_chat_buf *b, const mr_json *s, int depth) {
    const mr_json *type = mr_json_get(s, "type"), *items = mr_json_get(s, "items"), *one = mr_json_get(s, "oneOf");
    const char *t = type && type->type == MR_JSON_STR ? type->str : "";
    const mr_json *nullable = mr_json_get(s, "nullable");
    const int null = nullable && nullable->type == MR_JSON_BOOL && nullable->num;
    if (depth > 16) { mr_chat_put(b, "any"); return; }
    if (!strcmp(t, "array")) {
        const char *it = items ? mr_json_get_str(items, "type", "") : "";
        if (!items || items->type != MR_JSON_OBJ || !items->len) mr_chat_put(b, "any[]");
        else if (!strcmp(it, "string") || !strcmp(it, "boolean")) mr_chat_put(b, "%s[]", it);
        else if (!strcmp(it, "number") || !strcmp(it, "integer")) mr_chat_put(b, "number[]");
        else {
            const int at = b->len;
            ts_type(b, items, depth + 1);
            const int il = b->len - at;
            if (il > 50 || (b->len <= b->size && il == 15 && !memcmp(b->buf + at, "object | object", 15))) {
                b->len = at;
                mr_chat_put(b, "any[]");
            } else mr_chat_put(b, "[]");
        }
        if (null) mr_chat_put(b, " | null");
    } else if (type && type->type == MR_JSON_ARR && type->len) {
        for (const mr_json *x = type->child; x; x = x->next) mr_chat_put(b, "%s%s", x == type->child ? "" : " | ", x->type == MR_JSON_STR ? x->str : "");
    } else if (one && one->type == MR_JSON_ARR && one->len) {
        for (const mr_json *v = one->child; v; v = v->next) {
            ts_type(b, v, depth + 1);
            const char *d = mr_json_get_str(v, "description", NULL);
            if (d) mr_chat_put(b, "// %s", d);
            if (v->next) mr_chat_put(b, " | \n");
        }
    } else if (!strcmp(t, "string")) {
        const mr_json *en = mr_json_get(s, "enum");
        if (en && en->type == MR_JSON_ARR && en->len) {
            for (const mr_json *e = en->child; e; e = e->next) mr_chat_put(b, "%s%s", e == en->child ? "\"" : "\" | \"", e->type == MR_JSON_STR ? e->str : "");
            mr_chat_put(b, "\"");
        } else mr_chat_put(b, "string%s", null ? " | null" : "");
    } else if (!strcmp(t, "number") || !strcmp(t, "integer") || !strcmp(t, "boolean")) {
        mr_chat_put(b, "%s", strcmp(t, "boolean") ? "number" : "boolean");
    } else if (!strcmp(t, "object")) {
        const mr_json *props = mr_json_get(s, "properties"), *req = mr_json_get(s, "required");
        if (!props || props->type != MR_JSON_OBJ || !props->len) { mr_chat_put(b, "object"); return; }
        mr_chat_put(b, "{\n");
        for (const mr_json *p = props->child; p; p = p->next) {
            mr_chat_put(b, "%s%s: \n                ", p->key, harmony_required(req, p->key) ? "" : "?");
            ts_type(b, p, depth + 1);
            if (p->next) mr_chat_put(b, ", ");
        }
        mr_chat_put(b, "}");
    } else {
        mr_chat_put(b, "any");
    }
}

/* the functions as the reference's render_tool_namespace writes them (tools: each function's JSON) */
static void harmony_tools(mr_chat_buf *b, const char *const *tools, int n_tools) {
    mr_chat_put(b, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
    for (int i = 0; i < n_tools; i++) {
        mr_json *f = mr_json_parse(tools[i], strlen(tools[i]));
        const mr_json *pa = mr_json_get(f, "parameters"), *props = mr_json_get(pa, "properties"), *req = mr_json_get(pa, "required");
        mr_chat_put(b, "// %s\ntype %s = ", mr_json_get_str(f, "description", ""), mr_json_get_str(f, "name", ""));
        if (!props || props->type != MR_JSON_OBJ || !props->len) mr_chat_put(b, "() => any;\n\n");
        else {
            mr_chat_put(b, "(_: {\n");
            for (const mr_json *p = props->child; p; p = p->next) {
                const char *d = mr_json_get_str(p, "description", NULL);
                if (d) mr_chat_put(b, "// %s\n", d);
                mr_chat_put(b, "%s%s: ", p->key, harmony_required(req, p->key) ? "" : "?");
                ts_type(b, p, 0);
                const mr_json *def = mr_json_get(p, "default");
                if (def) { /* the reference concatenates an enum's or a oneOf's default as it is, the rest as JSON */
                    char *v = def->type == MR_JSON_STR && (mr_json_get(p, "enum") || mr_json_get(p, "oneOf")) ? NULL : mr_json_dump(def);
                    mr_chat_put(b, "%s// default: %s", mr_json_get(p, "oneOf") ? "" : ", ", v ? v : def->type == MR_JSON_STR ? def->str : "");
                    free(v);
                }
                mr_chat_put(b, ",\n");
            }
            mr_chat_put(b, "}) => any;\n\n");
        }
        mr_json_free(f);
    }
    mr_chat_put(b, "} // namespace functions");
}

/* an assistant turn with calls: its content (or else its reasoning) in the analysis channel unless a
 * later assistant turn answers without calls, then the first call (the reference renders one) */
static void harmony_call(mr_chat_buf *b, const mr_chat_msg *msgs, int i, int n) {
    int answered = 0;
    for (int k = i + 1; k < n; k++) answered |= !strcmp(msgs[k].role, "assistant") && !msgs[k].n_tool_calls;
    const char *c = msgs[i].content && *msgs[i].content ? msgs[i].content : msgs[i].reasoning;
    if (c && *c && !answered) mr_chat_put(b, "<|start|>assistant<|channel|>analysis<|message|>%s<|end|>", c);
    const mr_chat_tool_call *t = &msgs[i].tool_calls[0];
    mr_chat_put(b, "<|start|>assistant to=functions.%s<|channel|>commentary json<|message|>%s<|call|>", t->name,
                t->arguments ? t->arguments : "{}");
}

/* gpt-oss (harmony) as its reference template renders it (mainline's
 * models/templates/openai-gpt-oss-120b.jinja): the system message with the model's identity, the
 * date and the reasoning effort (default "medium"), the first system message as the developer's
 * instructions with the tools as TypeScript (later system messages are not rendered), assistant
 * turns in the final channel (the last one, when it ends the prompt, with its reasoning in the
 * analysis channel first and <|return|>), calls as
 * <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGUMENTS<|call|>, each
 * result as a message of functions.NAME (the last call's) holding the result as a JSON string. */
void mr_chat_render_harmony(mr_chat_buf *b, const mr_chat_msg *msgs, int n, const char *const *tools, int n_tools, const mr_chat_opts *o,
                            int add_assistant) {
    mr_chat_put(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
                   "Current date: %s\n\nReasoning: %s\n\n# Valid channels: analysis, commentary, final. Channel must be included for "
                   "every message.%s<|end|>", o->date && *o->date ? o->date : "", o->effort ? o->effort : "medium",
                n_tools ? "\nCalls to these tools must go to the commentary channel: 'functions'." : "");
    int first = 0;
    const char *dev = NULL, *last_call = NULL;
    if (n > 0 && !strcmp(msgs[0].role, "system")) {
        first = 1;
        dev = msgs[0].content && *msgs[0].content ? msgs[0].content : NULL;
    }
    if (dev || n_tools) {
        mr_chat_put(b, "<|start|>developer<|message|>");
        if (dev) mr_chat_put(b, "# Instructions\n\n%s\n\n", dev);
        if (n_tools) harmony_tools(b, tools, n_tools);
        mr_chat_put(b, "<|end|>");
    }
    for (int i = first; i < n; i++) {
        const char *c = msgs[i].content ? msgs[i].content : "";
        if (!strcmp(msgs[i].role, "user")) mr_chat_put(b, "<|start|>user<|message|>%s<|end|>", c);
        else if (!strcmp(msgs[i].role, "assistant") && msgs[i].n_tool_calls) {
            harmony_call(b, msgs, i, n);
            last_call = msgs[i].tool_calls[0].name;
        } else if (!strcmp(msgs[i].role, "assistant")) {
            const int last = i == n - 1 && !add_assistant;
            if (last && msgs[i].reasoning) mr_chat_put(b, "<|start|>assistant<|channel|>analysis<|message|>%s<|end|>", msgs[i].reasoning);
            mr_chat_put(b, "<|start|>assistant<|channel|>final<|message|>%s%s", c, last ? "<|return|>" : "<|end|>");
            last_call = NULL;
        } else if (!strcmp(msgs[i].role, "tool")) {
            mr_sbuf j = {0};
            mr_sbuf_json_str(&j, c, strlen(c));
            mr_chat_put(b, "<|start|>functions.%s to=assistant<|channel|>commentary<|message|>%s<|end|>", last_call ? last_call : "unknown",
                        j.p ? j.p : "\"\"");
            mr_sbuf_free(&j);
        }
    }
    if (add_assistant) mr_chat_put(b, "<|start|>assistant");
}

/* gpt-oss's calls (from HARMONY_TO): "to=functions.NAME", the header up to <|message|> (the
 * template's "<|channel|>commentary json", or the model's " <|constrain|>json"), JSON arguments, then
 * <|call|> (the reply may end before it); more calls as new assistant messages. -1 malformed, -2 out
 * of memory */
int mr_chat_parse_harmony(const char *p, const char *end, mr_chat_tool_call *calls, int max) {
    int n = 0;
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end) break;
        if (n && starts(p, end, "<|start|>assistant")) p = skip_ws(p + 18, end);
        if (n && starts(p, end, "<|channel|>commentary ")) p += 22;
        if (!starts(p, end, HARMONY_TO) || n == max) goto bad;
        p += strlen(HARMONY_TO);
        const char *ne = p;
        while (ne < end && *ne != '<' && *ne != ' ') ne++;
        const char *msg = memmem(ne, (size_t)(end - ne), "<|message|>", 11);
        if (ne == p || !msg) goto bad;
        const char *args = msg + 11, *ae = memmem(args, (size_t)(end - args), "<|call|>", 8);
        if (call_take(&calls[n], p, (size_t)(ne - p), args, (size_t)((ae ? ae : end) - args))) goto bad;
        if (!calls[n++].name) { mr_chat_tool_calls_free(calls, n); mr_set_error("chat: out of memory"); return -2; }
        if (!ae) break;
        p = ae + 8;
    }
    return n;
bad:
    mr_chat_tool_calls_free(calls, n);
    return -1;
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
 * models/templates/deepseek-ai-DeepSeek-V3.1.jinja): the system messages first, joined by blank
 * lines (the template does not render the tools); an assistant turn after a user turn opens
 * "<｜Assistant｜><think></think>" (earlier reasoning is never rendered, a content's
 * "<think>...</think>" is cut unless the turn calls tools), its calls
 * <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGUMENTS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 * after its content; tool results are <｜tool▁output▁begin｜> blocks; the generation prompt after a
 * user turn is "<｜Assistant｜>" and "<think>" (thinking) or "<think></think>" (after a tool result:
 * none, the model goes on). */
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
        } else if (!strcmp(role, "assistant") && msgs[i].n_tool_calls) {
            if (last_user) mr_chat_put(b, "%s<think></think>", ass);
            last_user = is_tool = 0;
            mr_chat_put(b, "%s" DS31_CALLS, c);
            for (int k = 0; k < msgs[i].n_tool_calls; k++) {
                const mr_chat_tool_call *t = &msgs[i].tool_calls[k];
                mr_chat_put(b, DS31_CALL "%s" DS31_SEP "%s" DS31_CALL_END, t->name, t->arguments ? t->arguments : "{}");
            }
            mr_chat_put(b, DS31_CALLS_END "%s", eos);
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

/* DeepSeek-V3.1's calls (from the DS31_CALLS marker): DS31_CALL NAME DS31_SEP JSON DS31_CALL_END,
 * repeated, then DS31_CALLS_END (the reply may end before the ends); -1 malformed, -2 out of memory */
int mr_chat_parse_ds31(const char *p, const char *end, mr_chat_tool_call *calls, int max) {
    int n = 0;
    p += strlen(DS31_CALLS);
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end || starts(p, end, DS31_CALLS_END)) break;
        if (!starts(p, end, DS31_CALL) || n == max) goto bad;
        p += strlen(DS31_CALL);
        const char *sep = memmem(p, (size_t)(end - p), DS31_SEP, strlen(DS31_SEP));
        if (!sep || sep == p) goto bad;
        const char *args = sep + strlen(DS31_SEP), *ae = memmem(args, (size_t)(end - args), DS31_CALL_END, strlen(DS31_CALL_END));
        if (call_take(&calls[n], p, (size_t)(sep - p), args, (size_t)((ae ? ae : end) - args))) goto bad;
        if (!calls[n++].name) { mr_chat_tool_calls_free(calls, n); mr_set_error("chat: out of memory"); return -2; }
        if (!ae) { p = end; break; }
        p = ae + strlen(DS31_CALL_END);
    }
    if (skip_ws(p, end) < end && !starts(skip_ws(p, end), end, DS31_CALLS_END)) goto bad;
    return n;
bad:
    mr_chat_tool_calls_free(calls, n);
    return -1;
}
