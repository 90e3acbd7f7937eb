/* Chat templates: the formats of the common model families, picked by recognising the GGUF's
 * embedded tokenizer.chat_template (substring checks, like llama.cpp's template detection) or,
 * without one, a built-in per architecture. Output is text; tokenize it with parse_special = 1. */
#include "moerun.h"
#include "base/base.h"
#include "json/json.h"
#include "chat/chat_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *tmpl_names[] = {"chatml", "llama2", "llama3", "phi3", "gemma", "deepseek3", "deepseek4",
                                   "chatglm4", "gpt-oss", "kimi-k2", NULL};

const char *mr_chat_template_detect(const mr_model *m) {
    const char *t = mr_model_meta_str(m, "tokenizer.chat_template");
    const char *arch = mr_model_arch(m);
    if (t) {
        if (strstr(t, "<|im_start|>")) return "chatml";
        if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>")) return "llama3";
        if (strstr(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && strstr(t, "<\xef\xbd\x9c" "User\xef\xbd\x9c>"))
            return strcmp(arch, "deepseek4") ? "deepseek3" : "deepseek4";
        if (strstr(t, "<|assistant|>") && strstr(t, "<|end|>")) return "phi3";
        if (strstr(t, "[gMASK]<sop>")) return "chatglm4";           /* GLM-4.5 / 4.6 */
        if (strstr(t, "<|start|>") && strstr(t, "<|channel|>")) return "gpt-oss"; /* harmony */
        if (strstr(t, "<|im_assistant|>assistant<|im_middle|>")) return "kimi-k2";
        if (strstr(t, "<start_of_turn>")) return "gemma";
        if (strstr(t, "[INST]")) return "llama2";
    }
    if (!strcmp(arch, "deepseek4")) return "deepseek4";
    /* without an embedded template: the family's own format (llama.cpp would use chatml) */
    if (!strcmp(arch, "gpt-oss")) return "gpt-oss";
    if (!strcmp(arch, "glm4moe")) return "chatglm4";
    return "chatml"; /* llama.cpp's default when a model has no template */
}

int mr_chat_template_known(const char *name) {
    for (int i = 0; tmpl_names[i]; i++) if (!strcmp(name, tmpl_names[i])) return 1;
    return 0;
}

typedef mr_chat_buf sbuf;
#define put mr_chat_put

void mr_chat_put(sbuf *b, const char *fmt, ...) {
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

#define DSML "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"
#define DS4_CALLS_OPEN "<" DSML "tool_calls>"
#define DS4_CALLS_CLOSE "</" DSML "tool_calls>"

/* chatml (the Qwen / Hermes convention, Qwen2.5 / Qwen3's templates): the tools in the system turn,
 * calls as <tool_call> JSON */
static void chatml_tools(sbuf *b, const char *sys, const char *const *tools, int n_tools) {
    put(b, "<|im_start|>system\n");
    if (sys) put(b, "%s\n\n", sys);
    put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (int i = 0; i < n_tools; i++) put(b, "\n{\"type\": \"function\", \"function\": %s}", tools[i]); /* the request's tool objects */
    put(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n");
}

static void chatml_calls(sbuf *b, const mr_chat_msg *m) {
    for (int k = 0; k < m->n_tool_calls; k++) {
        if (k || (m->content && *m->content)) put(b, "\n");
        put(b, "<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>", m->tool_calls[k].name,
            m->tool_calls[k].arguments ? m->tool_calls[k].arguments : "{}");
    }
}

/* DeepSeek V4 (DSML): each argument a parameter, strings as they are (string="true"), other values as
 * JSON (string="false") */
static void ds4_calls(sbuf *b, const mr_chat_msg *m) {
    put(b, "\n\n" DS4_CALLS_OPEN "\n");
    for (int k = 0; k < m->n_tool_calls; k++) {
        const mr_chat_tool_call *c = &m->tool_calls[k];
        put(b, "%s<" DSML "invoke name=\"%s\">\n", k ? "\n" : "", c->name);
        const char *a = c->arguments ? c->arguments : "{}";
        mr_json *j = mr_json_parse(a, strlen(a));
        if (j && j->type == MR_JSON_OBJ) {
            for (const mr_json *p = j->child; p; p = p->next) {
                put(b, "%s<" DSML "parameter name=\"%s\" string=\"%s\">", p != j->child ? "\n" : "", p->key,
                    p->type == MR_JSON_STR ? "true" : "false");
                if (p->type == MR_JSON_STR) put(b, "%s", p->str);
                else {
                    char *v = mr_json_dump(p);
                    put(b, "%s", v ? v : "null");
                    free(v);
                }
                put(b, "</" DSML "parameter>");
            }
        } else if (*a) /* not an object: the reference passes it as one string parameter */
            put(b, "<" DSML "parameter name=\"arguments\" string=\"true\">%s</" DSML "parameter>", a);
        mr_json_free(j);
        put(b, "\n</" DSML "invoke>");
    }
    put(b, "\n" DS4_CALLS_CLOSE);
}

static void ds4_tools(sbuf *b, const char *const *tools, int n_tools) {
    put(b, "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by "
           "writing a \"<" DSML "tool_calls>\" block like the following:\n\n<" DSML "tool_calls>\n<" DSML
           "invoke name=\"$TOOL_NAME\">\n<" DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">"
           "$PARAMETER_VALUE</" DSML "parameter>\n...\n</" DSML "invoke>\n<" DSML "invoke name=\"$TOOL_NAME2\">\n...\n</"
           DSML "invoke>\n</" DSML "tool_calls>\n\nString parameters should be specified as is and set `string=\"true\"`. "
           "For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
           "`string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST output your complete "
           "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\nOtherwise, output directly "
           "after </think> with tool calls or final response.\n\n### Available Tool Schemas\n\n");
    for (int i = 0; i < n_tools; i++) put(b, "%s%s", i ? "\n" : "", tools[i]);
    put(b, "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n");
}

int mr_chat_render(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, int add_assistant,
                   char *out, int size) {
    return mr_chat_render_opts(m, tmpl, msgs, n, NULL, 0, NULL, add_assistant, out, size);
}

int mr_chat_render_tools(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, const char *const *tools,
                         int n_tools, int add_assistant, char *out, int size) {
    return mr_chat_render_opts(m, tmpl, msgs, n, tools, n_tools, NULL, add_assistant, out, size);
}

static int known_role(const char *role) {
    return !strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "tool");
}

/* a string's bytes without the given leading / trailing newlines */
static void trim_nl(const char **p, size_t *n, int lead, int trail) {
    while (lead && *n && **p == '\n') (*p)++, (*n)--;
    while (trail && *n && (*p)[*n - 1] == '\n') (*n)--;
}

/* A Qwen3 assistant turn (models/templates/Qwen-Qwen3-0.6B.jinja): reasoning from reasoning_content,
 * or split from a content that holds "</think>"; after the last user turn, when it has reasoning or
 * is the last message, "<think>\nREASONING\n</think>\n\n" before the content. */
static void qwen_assistant(sbuf *b, const mr_chat_msg *m, int after_query, int last) {
    const char *c = m->content ? m->content : "", *r = m->reasoning, *close = strstr(c, "</think>");
    size_t cn = strlen(c), rn = r ? strlen(r) : 0;
    if (!r && close) {
        const char *after = c, *q;
        while ((q = strstr(after, "</think>"))) after = q + 8;
        r = c;
        rn = (size_t)(close - c);
        trim_nl(&r, &rn, 0, 1);
        for (const char *o; (o = memmem(r, rn, "<think>", 7));) rn -= (size_t)(o + 7 - r), r = o + 7; /* after the last one */
        trim_nl(&r, &rn, 1, 0);
        cn = strlen(after);
        c = after;
        trim_nl(&c, &cn, 1, 0);
    }
    put(b, "<|im_start|>assistant\n");
    if (after_query && (last || rn)) {
        trim_nl(&r, &rn, 1, 1);
        trim_nl(&c, &cn, 1, 0);
        put(b, "<think>\n%.*s\n</think>\n\n", (int)rn, r ? r : "");
    }
    put(b, "%.*s", (int)cn, c);
}

/* chatml: the tools and the first system message in one system turn, consecutive tool results in one
 * user turn; Qwen3's thinking (qwen_assistant, the generation prompt's empty reasoning when thinking
 * is off, Qwen3.5's "<think>\n" when on) when the request sets thinking or the model thinks */
static void render_chatml(sbuf *b, const mr_model *mdl, const mr_chat_msg *msgs, int n, const char *const *tools, int n_tools,
                          const mr_chat_opts *o, int add_assistant) {
    const int qwen = o->thinking >= 0 || mr_chat_qwen_thinks(mdl);
    int first_sys = 0, last_user = n - 1;
    if (n_tools) {
        first_sys = n > 0 && !strcmp(msgs[0].role, "system");
        chatml_tools(b, first_sys ? msgs[0].content : NULL, tools, n_tools);
    }
    for (int i = n - 1; i >= 0; i--)
        if (!strcmp(msgs[i].role, "user")) { last_user = i; break; }
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content ? msgs[i].content : "";
        if (i == 0 && first_sys) continue;
        if (!strcmp(role, "tool")) { /* consecutive results share one user turn */
            int prev = i > 0 && !strcmp(msgs[i - 1].role, "tool"), next = i + 1 < n && !strcmp(msgs[i + 1].role, "tool");
            if (!prev) put(b, "<|im_start|>user");
            put(b, "\n<tool_response>\n%s\n</tool_response>", c);
            if (!next) put(b, "<|im_end|>\n");
            continue;
        }
        const int ass = !strcmp(role, "assistant");
        if (ass && qwen) qwen_assistant(b, &msgs[i], i > last_user, i == n - 1);
        else put(b, "<|im_start|>%s\n%s", role, c);
        if (ass) chatml_calls(b, &msgs[i]);
        put(b, "<|im_end|>\n");
    }
    if (!add_assistant) return;
    put(b, "<|im_start|>assistant\n");
    if (o->thinking == 0) put(b, "<think>\n\n</think>\n\n");
    else if (mr_chat_qwen_opens_think(mdl)) put(b, "<think>\n");
}

/* DeepSeek V4 (its jinja template, models/templates/deepseek-ai-DeepSeek-V4.jinja): every system
 * message first, joined by blank lines, then the tools; user turns and tool results are blocks of one
 * user turn; each assistant turn opens with <｜Assistant｜> and "</think>", or in thinking mode
 * "<think>REASONING</think>" where the reasoning is kept (turns after the last user turn, or any turn
 * when tools are given, the conversation has tool results, or keep_reasoning); the generation prompt
 * is <｜Assistant｜> and "<think>" (thinking) or "</think>". */
static void render_ds4(sbuf *b, const mr_chat_msg *msgs, int n, const char *const *tools, int n_tools, const mr_chat_opts *o,
                       int add_assistant) {
    const int thinking = o->thinking > 0;
    if (n > 0 && thinking && o->effort && !strcmp(o->effort, "max"))
        put(b, "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your thinking and "
               "comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all "
               "potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation process, "
               "documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no "
               "assumption is left unchecked.\n\n");
    int first = 1, last_user = -1, has_results = 0;
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (!strcmp(role, "system")) { put(b, "%s%s", first ? "" : "\n\n", msgs[i].content ? msgs[i].content : ""); first = 0; }
        if (!strcmp(role, "user") || !strcmp(role, "tool")) last_user = i;
        has_results |= !strcmp(role, "tool");
    }
    if (n_tools) { if (!first) put(b, "\n\n"); ds4_tools(b, tools, n_tools); }
    int in_user = 0;
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content ? msgs[i].content : "";
        if (!strcmp(role, "user") || !strcmp(role, "tool")) {
            put(b, "%s", in_user ? "\n\n" : DS_USER);
            in_user = 1;
            if (!strcmp(role, "tool")) put(b, "<tool_result>%s</tool_result>", c);
            else put(b, "%s", c);
        } else if (!strcmp(role, "assistant")) {
            in_user = 0;
            put(b, DS_ASSISTANT);
            if (thinking && (o->keep_reasoning || n_tools || i > last_user || has_results))
                put(b, "<think>%s</think>", msgs[i].reasoning ? msgs[i].reasoning : "");
            else put(b, "</think>");
            put(b, "%s", c);
            if (msgs[i].n_tool_calls) ds4_calls(b, &msgs[i]);
            put(b, DS_EOS);
        }
    }
    if (add_assistant) put(b, DS_ASSISTANT "%s", thinking ? "<think>" : "</think>");
}

int mr_chat_render_opts(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, const char *const *tools,
                        int n_tools, const mr_chat_opts *opts, int add_assistant, char *out, int size) {
    if (!tmpl) tmpl = mr_chat_template_detect(m);
    if (!mr_chat_template_known(tmpl)) { mr_set_error("chat: unknown template '%s'", tmpl); return -1; }
    const mr_chat_opts none = {.thinking = -1};
    const mr_chat_opts *o = opts ? opts : &none;
    sbuf b = {out, size, 0};
    if (size > 0) out[0] = 0;
    const char *pending_sys = NULL; /* formats without a system role fold it into the first user turn */
    int ds4 = !strcmp(tmpl, "deepseek4"), chatml = !strcmp(tmpl, "chatml");
    int uses_tools = n_tools > 0;
    for (int i = 0; i < n; i++) {
        if (!known_role(msgs[i].role)) { mr_set_error("chat: unknown role '%s'", msgs[i].role); return -1; }
        uses_tools |= msgs[i].n_tool_calls > 0 || !strcmp(msgs[i].role, "tool");
    }
    const int kimi = !strcmp(tmpl, "kimi-k2");
    if (!strcmp(tmpl, "deepseek3") && (uses_tools || o->thinking >= 0 || mr_chat_template_has(m, "thinking"))) {
        mr_chat_render_ds31(&b, msgs, n, o->thinking, add_assistant);
        return b.len;
    }
    if (!strcmp(tmpl, "chatglm4") && (o->thinking >= 0 || mr_chat_template_has(m, "<think>"))) {
        if (uses_tools) { mr_set_error("chat: template chatglm4 has no tool calls here"); return -1; }
        mr_chat_render_glm(&b, msgs, n, o->thinking, add_assistant);
        return b.len;
    }
    if (!strcmp(tmpl, "gpt-oss") && (uses_tools || o->thinking >= 0 || o->effort || mr_chat_template_has(m, "Reasoning: "))) {
        mr_chat_opts h = *o;
        char date[32];
        if (!h.date) { /* the reference's strftime_now: today */
            time_t now = time(NULL);
            struct tm tm;
            strftime(date, sizeof date, "%Y-%m-%d", gmtime_r(&now, &tm));
            h.date = date;
        }
        mr_chat_render_harmony(&b, msgs, n, tools, n_tools, &h, add_assistant);
        return b.len;
    }
    if (uses_tools && !ds4 && !chatml && !kimi) {
        mr_set_error("chat: template %s has no tool calls here (chatml, deepseek4, kimi-k2, deepseek3 and gpt-oss do)", tmpl);
        return -1;
    }
    if (ds4 || chatml || kimi) {
        if (ds4) render_ds4(&b, msgs, n, tools, n_tools, o, add_assistant);
        else if (chatml) render_chatml(&b, m, msgs, n, tools, n_tools, o, add_assistant);
        else mr_chat_render_kimi(&b, msgs, n, tools, n_tools, o->thinking > 0 || mr_chat_template_has(m, "<think>"), add_assistant);
        return b.len;
    }
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role, *c = msgs[i].content ? msgs[i].content : "";
        int sys = !strcmp(role, "system"), user = !strcmp(role, "user"), ass = !strcmp(role, "assistant");
        if (!strcmp(tmpl, "llama3")) {
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
        } else if (!strcmp(tmpl, "chatglm4")) {
            if (i == 0) put(&b, "[gMASK]<sop>");
            put(&b, "<|%s|>\n%s", role, c);
        } else if (!strcmp(tmpl, "gpt-oss")) {
            put(&b, "<|start|>%s<|message|>%s%s", role, c, ass ? "<|return|>" : "<|end|>");
        } else { /* deepseek3 */
            if (sys) put(&b, "%s\n\n", c);
            else if (user) put(&b, DS_USER "%s", c);
            else put(&b, DS_ASSISTANT "%s" DS_EOS, c);
        }
    }
    if (add_assistant) {
        if (!strcmp(tmpl, "llama3")) put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        else if (!strcmp(tmpl, "phi3")) put(&b, "<|assistant|>\n");
        else if (!strcmp(tmpl, "gemma")) put(&b, "<start_of_turn>model\n");
        else if (!strcmp(tmpl, "deepseek3")) put(&b, DS_ASSISTANT);
        else if (!strcmp(tmpl, "chatglm4")) put(&b, "%s<|assistant|>\n", n == 0 ? "[gMASK]<sop>" : "");
        else if (!strcmp(tmpl, "gpt-oss")) put(&b, "<|start|>assistant");
        /* llama2: the model answers right after [/INST] */
    }
    return b.len;
}

const char *mr_chat_tool_marker(const mr_model *m, const char *tmpl) {
    if (!tmpl) tmpl = mr_chat_template_detect(m);
    if (!strcmp(tmpl, "chatml")) return "<tool_call>";
    if (!strcmp(tmpl, "deepseek4")) return DS4_CALLS_OPEN;
    if (!strcmp(tmpl, "kimi-k2")) return "<|tool_calls_section_begin|>";
    if (!strcmp(tmpl, "deepseek3")) return DS31_CALLS;
    if (!strcmp(tmpl, "gpt-oss")) return "to=functions.";
    return NULL;
}

int mr_chat_special_markers(const char *tmpl) { return tmpl && (!strcmp(tmpl, "kimi-k2") || !strcmp(tmpl, "gpt-oss")); }

int mr_chat_tool_call_format(const mr_model *m, const char *tmpl, mr_chat_call_format *f) {
    if (!tmpl) tmpl = mr_chat_template_detect(m);
    memset(f, 0, sizeof *f);
    if (!strcmp(tmpl, "chatml")) {
        /* the parser takes the call without its closing tag: the reply ends with the JSON */
        *f = (mr_chat_call_format){"<tool_call>\n", "{\"name\": \"", "\", \"arguments\": ", "}", 0};
    } else if (!strcmp(tmpl, "deepseek4")) {
        *f = (mr_chat_call_format){"\n\n" DS4_CALLS_OPEN "\n", "<" DSML "invoke name=\"", "\">\n", "\n" DS4_CALLS_CLOSE, 1};
    } else if (!strcmp(tmpl, "kimi-k2")) { /* the call's index: 0 (the first of the reply's calls in a fresh conversation) */
        *f = (mr_chat_call_format){"<|tool_calls_section_begin|>", "<|tool_call_begin|>functions.", ":0<|tool_call_argument_begin|>",
                                   "<|tool_call_end|>", 0};
    } else if (!strcmp(tmpl, "deepseek3")) {
        *f = (mr_chat_call_format){DS31_CALLS, DS31_CALL, DS31_SEP, DS31_CALL_END DS31_CALLS_END, 0};
    } else if (!strcmp(tmpl, "gpt-oss")) {
        /* after the generation prompt's "<|start|>assistant"; the reply ends with the arguments (its
         * <|call|> is an end-of-generation token) */
        *f = (mr_chat_call_format){" to=functions.", "", "<|channel|>commentary json<|message|>", "", 0};
    } else {
        mr_set_error("chat: template %s has no tool calls here", tmpl);
        return -1;
    }
    return 0;
}

void mr_chat_tool_calls_free(mr_chat_tool_call *calls, int n) {
    for (int i = 0; i < n; i++) {
        free((char *)calls[i].name);
        free((char *)calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static int starts(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(end - p) >= n && !memcmp(p, lit, n);
}

/* chatml: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> (repeated) */
static int parse_chatml(const char *p, const char *end, mr_chat_tool_call *calls, int max) {
    int n = 0;
    while ((p = skip_ws(p, end)) < end) {
        if (!starts(p, end, "<tool_call>") || n == max) goto bad;
        p += 11;
        const char *close = memmem(p, (size_t)(end - p), "</tool_call>", 12);
        const char *jend = close ? close : end; /* the model may stop right after the JSON */
        mr_json *j = mr_json_parse(p, (size_t)(jend - p));
        const char *name = mr_json_get_str(j, "name", NULL);
        const mr_json *args = mr_json_get(j, "arguments");
        if (!args) args = mr_json_get(j, "parameters");
        if (!name || (args && args->type != MR_JSON_OBJ && args->type != MR_JSON_STR)) { mr_json_free(j); goto bad; }
        calls[n].id = NULL;
        calls[n].name = mr_strdup(name);
        calls[n].arguments = !args ? mr_strdup("{}") : args->type == MR_JSON_STR ? mr_strdup(args->str) : mr_json_dump(args);
        mr_json_free(j);
        if (!calls[n].name || !calls[n].arguments) { n++; goto oom; }
        n++;
        p = close ? close + 12 : end;
    }
    return n;
bad: /* calls parsed before the malformed part are freed too */
    mr_chat_tool_calls_free(calls, n);
    return -1;
oom:
    mr_chat_tool_calls_free(calls, n);
    mr_set_error("chat: out of memory");
    return -2;
}

/* deepseek4: DS4_CALLS_OPEN \n <invoke name="f">\n<parameter name="k" string="true|false">v</parameter>\n...
 * </invoke>\n ... DS4_CALLS_CLOSE; arguments rebuilt as a JSON object */
static int parse_ds4(const char *p, const char *end, mr_chat_tool_call *calls, int max) {
    static const char inv[] = "<" DSML "invoke name=\"", inv_end[] = "</" DSML "invoke>";
    static const char par[] = "<" DSML "parameter name=\"", par_end[] = "</" DSML "parameter>";
    int n = 0;
    p += strlen(DS4_CALLS_OPEN);
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end || starts(p, end, DS4_CALLS_CLOSE)) break;
        if (!starts(p, end, inv) || n == max) goto bad;
        p += sizeof inv - 1;
        const char *q = memchr(p, '"', (size_t)(end - p));
        if (!q || !starts(q, end, "\">")) goto bad;
        mr_sbuf args = {0};
        mr_sbuf_puts(&args, "{");
        char *name = mr_malloc((size_t)(q - p) + 1);
        if (name) { memcpy(name, p, (size_t)(q - p)); name[q - p] = 0; }
        p = q + 2;
        int k = 0;
        for (;; k++) {
            p = skip_ws(p, end);
            if (starts(p, end, inv_end)) { p += sizeof inv_end - 1; break; }
            const char *e, *v, *ve;
            if (!starts(p, end, par)) goto bad_call;
            p += sizeof par - 1;
            e = memchr(p, '"', (size_t)(end - p));
            if (!e) goto bad_call;
            int is_str;
            if (starts(e, end, "\" string=\"true\">")) { is_str = 1; v = e + 16; }
            else if (starts(e, end, "\" string=\"false\">")) { is_str = 0; v = e + 17; }
            else goto bad_call;
            ve = memmem(v, (size_t)(end - v), par_end, sizeof par_end - 1);
            if (!ve) goto bad_call;
            if (k) mr_sbuf_puts(&args, ", ");
            mr_sbuf_json_str(&args, p, (size_t)(e - p));
            mr_sbuf_puts(&args, ": ");
            mr_json *jv = is_str ? NULL : mr_json_parse(v, (size_t)(ve - v));
            if (jv) { char *d = mr_json_dump(jv); mr_sbuf_puts(&args, d ? d : "null"); free(d); }
            else mr_sbuf_json_str(&args, v, (size_t)(ve - v)); /* string="true", or a value that is not JSON */
            mr_json_free(jv);
            p = ve + sizeof par_end - 1;
        }
        mr_sbuf_puts(&args, "}");
        if (!name || args.oom) { free(name); mr_sbuf_free(&args); mr_chat_tool_calls_free(calls, n); mr_set_error("chat: out of memory"); return -2; }
        calls[n].id = NULL;
        calls[n].name = name;
        calls[n].arguments = args.p;
        n++;
        continue;
    bad_call:
        free(name);
        mr_sbuf_free(&args);
        goto bad;
    }
    if (skip_ws(p, end) < end && !starts(skip_ws(p, end), end, DS4_CALLS_CLOSE)) goto bad;
    return n;
bad:
    mr_chat_tool_calls_free(calls, n);
    return -1;
}

int mr_chat_parse_tool_calls(const mr_model *m, const char *tmpl, const char *text, size_t len, size_t *content_len,
                             mr_chat_tool_call *calls, int max) {
    const char *marker = mr_chat_tool_marker(m, tmpl);
    *content_len = len;
    if (!marker) return 0;
    const char *at = memmem(text, len, marker, strlen(marker));
    if (!at) return 0;
    const char *end = text + len;
    const int ds4 = !strcmp(marker, DS4_CALLS_OPEN), chatml = !strcmp(marker, "<tool_call>"), harmony = !strcmp(marker, "to=functions.");
    const int n = ds4 ? parse_ds4(at, end, calls, max) : chatml ? parse_chatml(at, end, calls, max)
                : harmony ? mr_chat_parse_harmony(at, end, calls, max) : !strcmp(marker, DS31_CALLS) ? mr_chat_parse_ds31(at, end, calls, max)
                : mr_chat_parse_kimi(at, end, calls, max);
    if (n == -2) return -1;
    if (n <= 0) return n < 0 ? -1 : 0;
    /* the separator the renderer puts before the calls is not part of the content; nor is a harmony
     * call's header before "to=" (a new assistant message, its channel) */
    size_t c = (size_t)(at - text);
    if (ds4 && c >= 2 && !memcmp(at - 2, "\n\n", 2)) c -= 2;
    else if (chatml && c >= 1 && at[-1] == '\n') c -= 1;
    else if (harmony) {
        static const char *const head[] = {" ", "<|channel|>commentary", "<|start|>assistant", "<|end|>"};
        for (int h = 0; h < 4; h++)
            if (c >= strlen(head[h]) && !memcmp(text + c - strlen(head[h]), head[h], strlen(head[h]))) c -= strlen(head[h]);
    }
    *content_len = c;
    return n;
}
