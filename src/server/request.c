#include "server/request.h"
#include "base/base.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_req_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}
#define fail srv_req_fail

/* A field that is absent or null keeps its default; any other type than the expected is an error. */
static const mr_json *field(const mr_json *j, const char *key) {
    const mr_json *v = mr_json_get(j, key);
    return v && v->type != MR_JSON_NULL ? v : NULL;
}

static int get_num(const mr_json *j, const char *key, double lo, double hi, double *out, char *err, size_t el) {
    const mr_json *v = field(j, key);
    if (!v) return 0;
    if (v->type != MR_JSON_NUM) return fail(err, el, "'%s' must be a number", key);
    if (!(v->num >= lo && v->num <= hi)) return fail(err, el, "'%s' must be between %g and %g", key, lo, hi);
    *out = v->num;
    return 0;
}

/* integers are range-checked as doubles first: converting an out-of-range double is undefined */
static int get_int(const mr_json *j, const char *key, double lo, double hi, int *out, char *err, size_t el) {
    const mr_json *v = field(j, key);
    if (!v) return 0;
    if (v->type != MR_JSON_NUM || v->num != floor(v->num)) return fail(err, el, "'%s' must be an integer", key);
    if (!(v->num >= lo && v->num <= hi)) return fail(err, el, "'%s' must be between %.0f and %.0f", key, lo, hi);
    *out = (int)v->num;
    return 0;
}

static int get_bool(const mr_json *j, const char *key, int *out, char *err, size_t el) {
    const mr_json *v = field(j, key);
    if (!v) return 0;
    if (v->type != MR_JSON_BOOL) return fail(err, el, "'%s' must be true or false", key);
    *out = (int)v->num;
    return 0;
}

static int get_str(const mr_json *j, const char *key, const char **out, char *err, size_t el) {
    const mr_json *v = field(j, key);
    if (!v) return 0;
    if (v->type != MR_JSON_STR) return fail(err, el, "'%s' must be a string", key);
    *out = v->str;
    return 0;
}

char *srv_req_own(srv_req *r, char *p) {
    if (!p) return NULL;
    if (r->n_owned == r->cap_owned) {
        int cap = r->cap_owned ? 2 * r->cap_owned : 16;
        char **o = mr_realloc(r->owned, sizeof *o * (size_t)cap);
        if (!o) { free(p); return NULL; }
        r->owned = o;
        r->cap_owned = cap;
    }
    r->owned[r->n_owned++] = p;
    return p;
}

#define own srv_req_own

void srv_req_free(srv_req *r) {
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->msgs);
    free(r->calls);
    free(r->tools);
    free(r->tool_names);
    free(r->tool_params);
    free(r->prompt_ids);
    free(r->bias_ids);
    free(r->bias_vals);
    memset(r, 0, sizeof *r);
}

/* content: a string, null, or an array of parts ({"type":"text","text":..}); Anthropic blocks of type
 * "text" and the Responses API's input_text / output_text parts are the same. Joined text is owned
 * by r. */
int srv_req_content(srv_req *r, const mr_json *c, const char *where, const char **out, char *err, size_t el) {
    if (!c || c->type == MR_JSON_NULL) { *out = NULL; return 0; }
    if (c->type == MR_JSON_STR) { *out = c->str; return 0; }
    if (c->type != MR_JSON_ARR) return fail(err, el, "%s.content must be a string or an array of parts", where);
    mr_sbuf b = {0};
    int k = 0;
    for (const mr_json *p = c->child; p; p = p->next, k++) {
        const char *type = mr_json_get_str(p, "type", NULL), *text = mr_json_get_str(p, "text", NULL);
        if (p->type != MR_JSON_OBJ || !type) { mr_sbuf_free(&b); return fail(err, el, "%s.content[%d] needs a \"type\"", where, k); }
        if (strcmp(type, "text") && strcmp(type, "input_text") && strcmp(type, "output_text")) {
            mr_sbuf_free(&b);
            return fail(err, el, "%s.content[%d]: parts of type '%s' are not supported (text only)", where, k, type);
        }
        if (!text) { mr_sbuf_free(&b); return fail(err, el, "%s.content[%d].text must be a string", where, k); }
        if (k) mr_sbuf_puts(&b, "\n");
        mr_sbuf_puts(&b, text);
    }
    if (b.oom) { mr_sbuf_free(&b); return fail(err, el, "out of memory"); }
    *out = own(r, b.p ? b.p : mr_strdup(""));
    return *out ? 0 : fail(err, el, "out of memory");
}

static int add_msg(srv_req *r, int cap, mr_chat_msg m, char *err, size_t el) {
    if (r->n_msgs >= cap) return fail(err, el, "too many messages");
    r->msgs[r->n_msgs++] = m;
    return 0;
}

/* OpenAI: tool_calls [{id, type:"function", function:{name, arguments: JSON text}}] */
static int oai_tool_calls(srv_req *r, const mr_json *tc, const char *where, mr_chat_msg *m, char *err, size_t el) {
    if (tc->type != MR_JSON_ARR) return fail(err, el, "%s.tool_calls must be an array", where);
    m->tool_calls = r->calls + r->n_calls;
    int k = 0;
    for (const mr_json *c = tc->child; c; c = c->next, k++) {
        const mr_json *fn = mr_json_get(c, "function");
        const char *name = mr_json_get_str(fn, "name", NULL);
        const mr_json *args = mr_json_get(fn, "arguments");
        if (!name) return fail(err, el, "%s.tool_calls[%d].function.name must be a string", where, k);
        mr_chat_tool_call *call = &r->calls[r->n_calls++];
        call->id = mr_json_get_str(c, "id", NULL);
        call->name = name;
        if (!args || args->type == MR_JSON_NULL) call->arguments = "{}";
        else if (args->type == MR_JSON_STR) call->arguments = args->str;
        else if (args->type == MR_JSON_OBJ) { if (!(call->arguments = own(r, mr_json_dump(args)))) return fail(err, el, "out of memory"); }
        else return fail(err, el, "%s.tool_calls[%d].function.arguments must be a JSON string", where, k);
    }
    m->n_tool_calls = k;
    return 0;
}

static size_t count_calls(const mr_json *msgs) {
    size_t n = 0;
    for (const mr_json *c = msgs ? msgs->child : NULL; c; c = c->next) {
        const mr_json *tc = mr_json_get(c, "tool_calls");
        if (tc && tc->type == MR_JSON_ARR) n += tc->len;
        const mr_json *ct = mr_json_get(c, "content");
        if (ct && ct->type == MR_JSON_ARR) n += ct->len; /* Anthropic tool_use blocks */
    }
    return n;
}

static int oai_messages(srv_req *r, const mr_json *msgs, char *err, size_t el) {
    if (!msgs || msgs->type != MR_JSON_ARR || msgs->len == 0) return fail(err, el, "'messages' must be a non-empty array");
    if (msgs->len > SRV_MAX_MESSAGES) return fail(err, el, "at most %d messages", SRV_MAX_MESSAGES);
    int cap = (int)msgs->len;
    r->msgs = mr_calloc((size_t)cap, sizeof *r->msgs);
    r->calls = mr_calloc(count_calls(msgs) + 1, sizeof *r->calls);
    if (!r->msgs || !r->calls) return fail(err, el, "out of memory");
    int i = 0;
    for (const mr_json *c = msgs->child; c; c = c->next, i++) {
        char where[32];
        snprintf(where, sizeof where, "messages[%d]", i);
        if (c->type != MR_JSON_OBJ) return fail(err, el, "%s must be an object", where);
        const char *role = NULL;
        if (get_str(c, "role", &role, err, el)) return -1;
        if (!role) return fail(err, el, "%s.role must be a string", where);
        mr_chat_msg m = {0};
        if (srv_req_content(r, mr_json_get(c, "content"), where, &m.content, err, el)) return -1;
        if (!strcmp(role, "system") || !strcmp(role, "developer")) m.role = "system";
        else if (!strcmp(role, "user")) m.role = "user";
        else if (!strcmp(role, "assistant")) {
            m.role = "assistant";
            const mr_json *tc = field(c, "tool_calls");
            if (tc && oai_tool_calls(r, tc, where, &m, err, el)) return -1;
            if (get_str(c, "reasoning_content", &m.reasoning, err, el)) return -1;
        } else if (!strcmp(role, "tool")) {
            m.role = "tool";
            if (get_str(c, "tool_call_id", &m.tool_call_id, err, el)) return -1;
        } else if (!strcmp(role, "function")) {
            return fail(err, el, "%s: role 'function' is deprecated; send tool results with role 'tool'", where);
        } else return fail(err, el, "%s.role '%s' is not one of system, developer, user, assistant, tool", where, role);
        if (!m.content && strcmp(m.role, "assistant"))
            return fail(err, el, "%s.content must be a string or an array of text parts", where);
        if (add_msg(r, cap, m, err, el)) return -1;
    }
    return 0;
}

/* tools: [{"type":"function","function":{"name":..,"description":..,"parameters":{..}}}] (OpenAI chat),
 * [{"type":"function","name":..,"description":..,"parameters":{..}}] (OpenAI Responses) or
 * [{"name":..,"description":..,"input_schema":{..}}] (Anthropic) */
static int parse_tools(srv_req *r, const mr_json *j, char *err, size_t el) {
    const mr_json *tools = field(j, "tools"), *choice = field(j, "tool_choice");
    if (!tools) {
        if (choice && !(choice->type == MR_JSON_STR && (!strcmp(choice->str, "none") || !strcmp(choice->str, "auto"))))
            return fail(err, el, "'tool_choice' needs 'tools'");
        return 0;
    }
    if (tools->type != MR_JSON_ARR) return fail(err, el, "'tools' must be an array");
    if (tools->len > SRV_MAX_TOOLS) return fail(err, el, "at most %d tools", SRV_MAX_TOOLS);
    r->tools = mr_calloc(tools->len + 1, sizeof *r->tools);
    r->tool_names = mr_calloc(tools->len + 1, sizeof *r->tool_names);
    r->tool_params = mr_calloc(tools->len + 1, sizeof *r->tool_params);
    if (!r->tools || !r->tool_names || !r->tool_params) return fail(err, el, "out of memory");
    int k = 0;
    for (const mr_json *t = tools->child; t; t = t->next, k++) {
        const mr_json *fn = t;
        if (r->api != SRV_API_ANTHROPIC) {
            const char *type = mr_json_get_str(t, "type", NULL);
            if (!type || strcmp(type, "function")) return fail(err, el, "tools[%d].type must be \"function\"", k);
            if (r->api == SRV_API_CHAT) fn = mr_json_get(t, "function");
        }
        const char *name = mr_json_get_str(fn, "name", NULL);
        if (!fn || fn->type != MR_JSON_OBJ || !name || !*name) return fail(err, el, "tools[%d] needs a function name", k);
        /* the definition as the templates expect it: name, description, parameters */
        mr_sbuf b = {0};
        mr_sbuf_puts(&b, "{\"name\": ");
        mr_sbuf_json_str(&b, name, strlen(name));
        const mr_json *d = field(fn, "description");
        if (d) {
            if (d->type != MR_JSON_STR) { mr_sbuf_free(&b); return fail(err, el, "tools[%d].description must be a string", k); }
            mr_sbuf_puts(&b, ", \"description\": ");
            mr_sbuf_json_str(&b, d->str, d->len);
        }
        const mr_json *p = field(fn, r->api == SRV_API_ANTHROPIC ? "input_schema" : "parameters");
        if (p) {
            if (p->type != MR_JSON_OBJ) { mr_sbuf_free(&b); return fail(err, el, "tools[%d] parameters must be an object", k); }
            char *ps = own(r, mr_json_dump(p)); /* also the schema of a forced call's arguments */
            if (!ps) { mr_sbuf_free(&b); return fail(err, el, "out of memory"); }
            mr_sbuf_puts(&b, ", \"parameters\": ");
            mr_sbuf_puts(&b, ps);
            r->tool_params[k] = ps;
        }
        mr_sbuf_puts(&b, "}");
        if (b.oom) { mr_sbuf_free(&b); return fail(err, el, "out of memory"); }
        if (!own(r, b.p)) return fail(err, el, "out of memory"); /* own freed it */
        r->tools[k] = b.p;
        r->tool_names[k] = (char *)name;
    }
    r->n_tools = k;
    r->tool_choice = k ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
    const mr_json *tc = field(j, "tool_choice");
    if (!tc) return 0;
    const char *mode = tc->type == MR_JSON_STR ? tc->str : mr_json_get_str(tc, "type", NULL);
    if (!mode) return fail(err, el, "'tool_choice' must be \"none\", \"auto\", \"required\" or name a function");
    if (r->api == SRV_API_ANTHROPIC && tc->type == MR_JSON_OBJ) {
        int one = 0;
        if (get_bool(tc, "disable_parallel_tool_use", &one, err, el)) return -1;
        if (one) r->parallel_calls = 0;
    }
    if (!strcmp(mode, "none")) r->tool_choice = SRV_TOOLS_NONE;
    else if (!strcmp(mode, "auto")) r->tool_choice = k ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
    else if (!strcmp(mode, "required") || !strcmp(mode, "any")) r->tool_choice = SRV_TOOLS_REQUIRED;
    else if (!strcmp(mode, "function") || !strcmp(mode, "tool")) {
        const mr_json *fn = r->api == SRV_API_CHAT ? mr_json_get(tc, "function") : tc;
        r->tool_choice_name = mr_json_get_str(fn, "name", NULL);
        if (!r->tool_choice_name) return fail(err, el, "'tool_choice' names no function");
        r->tool_choice = SRV_TOOLS_NAMED;
    } else return fail(err, el, "'tool_choice' \"%s\" is not none, auto, required or a function", mode);
    if (r->tool_choice != SRV_TOOLS_NONE && !k) return fail(err, el, "'tool_choice' needs 'tools'");
    if (r->tool_choice == SRV_TOOLS_NAMED) {
        int found = 0;
        for (int i = 0; i < k; i++) found |= !strcmp(r->tool_names[i], r->tool_choice_name);
        if (!found) return fail(err, el, "'tool_choice' names '%s', which is not in 'tools'", r->tool_choice_name);
    }
    return 0;
}

/* Anthropic: system (string or text blocks); messages of role user/assistant whose content is a
 * string or blocks: text, tool_use (assistant), tool_result (user) */
static int anthropic_messages(srv_req *r, const mr_json *j, char *err, size_t el) {
    const mr_json *msgs = mr_json_get(j, "messages");
    if (!msgs || msgs->type != MR_JSON_ARR || msgs->len == 0) return fail(err, el, "'messages' must be a non-empty array");
    if (msgs->len > SRV_MAX_MESSAGES) return fail(err, el, "at most %d messages", SRV_MAX_MESSAGES);
    size_t blocks = 0;
    for (const mr_json *c = msgs->child; c; c = c->next) {
        const mr_json *ct = mr_json_get(c, "content");
        blocks += ct && ct->type == MR_JSON_ARR ? ct->len + 1 : 1;
    }
    int cap = (int)blocks + 1;
    r->msgs = mr_calloc((size_t)cap, sizeof *r->msgs);
    r->calls = mr_calloc(count_calls(msgs) + 1, sizeof *r->calls);
    if (!r->msgs || !r->calls) return fail(err, el, "out of memory");
    const mr_json *sys = field(j, "system");
    if (sys) {
        mr_chat_msg m = {.role = "system"};
        if (srv_req_content(r, sys, "system", &m.content, err, el)) return -1;
        if (add_msg(r, cap, m, err, el)) return -1;
    }
    int i = 0;
    for (const mr_json *c = msgs->child; c; c = c->next, i++) {
        char where[32];
        snprintf(where, sizeof where, "messages[%d]", i);
        const char *role = mr_json_get_str(c, "role", NULL);
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
            return fail(err, el, "%s.role must be \"user\" or \"assistant\"", where);
        const mr_json *ct = mr_json_get(c, "content");
        if (ct && ct->type == MR_JSON_STR) {
            if (add_msg(r, cap, (mr_chat_msg){.role = role, .content = ct->str}, err, el)) return -1;
            continue;
        }
        if (!ct || ct->type != MR_JSON_ARR) return fail(err, el, "%s.content must be a string or an array of blocks", where);
        /* text blocks of a turn are joined; tool_result blocks become tool messages before the user's text */
        mr_sbuf text = {0};
        mr_chat_msg m = {.role = role};
        m.tool_calls = r->calls + r->n_calls;
        int k = 0, has_text = 0;
        for (const mr_json *b = ct->child; b; b = b->next, k++) {
            const char *type = mr_json_get_str(b, "type", NULL);
            if (!type) { mr_sbuf_free(&text); return fail(err, el, "%s.content[%d] needs a \"type\"", where, k); }
            if (!strcmp(type, "text")) {
                const char *t = mr_json_get_str(b, "text", NULL);
                if (!t) { mr_sbuf_free(&text); return fail(err, el, "%s.content[%d].text must be a string", where, k); }
                if (has_text) mr_sbuf_puts(&text, "\n");
                mr_sbuf_puts(&text, t);
                has_text = 1;
            } else if (!strcmp(type, "tool_use") && !strcmp(role, "assistant")) {
                const char *name = mr_json_get_str(b, "name", NULL);
                const mr_json *input = mr_json_get(b, "input");
                if (!name) { mr_sbuf_free(&text); return fail(err, el, "%s.content[%d].name must be a string", where, k); }
                mr_chat_tool_call *call = &r->calls[r->n_calls++];
                call->id = mr_json_get_str(b, "id", NULL);
                call->name = name;
                call->arguments = input && input->type == MR_JSON_OBJ ? own(r, mr_json_dump(input)) : "{}";
                if (!call->arguments) { mr_sbuf_free(&text); return fail(err, el, "out of memory"); }
                m.n_tool_calls++;
            } else if (!strcmp(type, "tool_result") && !strcmp(role, "user")) {
                mr_chat_msg t = {.role = "tool", .tool_call_id = mr_json_get_str(b, "tool_use_id", NULL)};
                char w2[48];
                snprintf(w2, sizeof w2, "messages[%d].content[%d]", i % 100000, k % 100000);
                if (srv_req_content(r, mr_json_get(b, "content"), w2, &t.content, err, el)) { mr_sbuf_free(&text); return -1; }
                if (!t.content) t.content = "";
                if (add_msg(r, cap, t, err, el)) { mr_sbuf_free(&text); return -1; }
            } else if (!strcmp(type, "thinking") && !strcmp(role, "assistant")) {
                const char *t = mr_json_get_str(b, "thinking", NULL);
                if (!t) { mr_sbuf_free(&text); return fail(err, el, "%s.content[%d].thinking must be a string", where, k); }
                m.reasoning = t; /* the template keeps or drops it */
            } else if (!strcmp(type, "redacted_thinking")) {
                /* encrypted reasoning of another service: nothing to render */
            } else {
                mr_sbuf_free(&text);
                return fail(err, el, "%s.content[%d]: blocks of type '%s' are not supported here", where, k, type);
            }
        }
        if (text.oom) { mr_sbuf_free(&text); return fail(err, el, "out of memory"); }
        if (has_text) { m.content = own(r, text.p ? text.p : mr_strdup("")); if (!m.content) return fail(err, el, "out of memory"); }
        else mr_sbuf_free(&text);
        if (!m.n_tool_calls) m.tool_calls = NULL;
        if ((has_text || m.n_tool_calls) && add_msg(r, cap, m, err, el)) return -1;
    }
    return 0;
}

/* Thinking: OpenAI reasoning_effort ("none" off, the others on; the Responses API's reasoning.effort),
 * llama-server's chat_template_kwargs (thinking / enable_thinking, drop_thinking, reasoning_effort) and
 * reasoning_budget (tokens), Anthropic thinking {"type": "enabled", "budget_tokens": N} /
 * {"type": "disabled"} / {"type": "adaptive"}. */
static int parse_thinking(srv_req *r, const mr_json *j, char *err, size_t el) {
    static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max", NULL};
    r->thinking = r->think_budget = -1;
    const mr_json *kw = field(j, "chat_template_kwargs"), *th = r->api == SRV_API_ANTHROPIC ? field(j, "thinking") : NULL;
    if (get_str(j, "reasoning_effort", &r->effort, err, el) || get_int(j, "reasoning_budget", -1, 1e7, &r->think_budget, err, el)) return -1;
    const mr_json *re = r->api == SRV_API_RESPONSES ? field(j, "reasoning") : NULL;
    if (re && re->type != MR_JSON_OBJ) return fail(err, el, "'reasoning' must be an object");
    if (re && get_str(re, "effort", &r->effort, err, el)) return -1;
    if (kw && kw->type != MR_JSON_OBJ) return fail(err, el, "'chat_template_kwargs' must be an object");
    for (const mr_json *k = kw ? kw->child : NULL; k; k = k->next)
        if (strcmp(k->key, "thinking") && strcmp(k->key, "enable_thinking") && strcmp(k->key, "drop_thinking") && strcmp(k->key, "reasoning_effort"))
            return fail(err, el, "'chat_template_kwargs.%s' is not supported (thinking, enable_thinking, drop_thinking, reasoning_effort are)", k->key);
    int on = -1, drop = -1;
    if (kw && (get_str(kw, "reasoning_effort", &r->effort, err, el) || get_bool(kw, "enable_thinking", &on, err, el) ||
               get_bool(kw, "thinking", &on, err, el) || get_bool(kw, "drop_thinking", &drop, err, el)))
        return -1;
    if (r->effort) {
        int i = 0;
        while (efforts[i] && strcmp(efforts[i], r->effort)) i++;
        if (!efforts[i])
            return fail(err, el, "'%s' must be one of none, minimal, low, medium, high, xhigh, max", re ? "reasoning.effort" : "reasoning_effort");
        r->thinking = i > 0;
    }
    if (on >= 0) r->thinking = on;
    r->keep_reasoning = drop == 0;
    if (th) {
        const char *type = th->type == MR_JSON_OBJ ? mr_json_get_str(th, "type", NULL) : NULL;
        if (!type || (strcmp(type, "enabled") && strcmp(type, "disabled") && strcmp(type, "adaptive")))
            return fail(err, el, "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": \"disabled\"} or {\"type\": \"adaptive\"}");
        r->thinking = strcmp(type, "disabled") != 0;
        if (!strcmp(type, "enabled")) {
            if (!field(th, "budget_tokens")) return fail(err, el, "'thinking.budget_tokens' is required with \"type\": \"enabled\"");
            if (get_int(th, "budget_tokens", 0, 1e7, &r->think_budget, err, el)) return -1;
        }
    }
    return 0;
}

static int parse_stop(srv_req *r, const mr_json *st, const char *key, char *err, size_t el) {
    if (!st) return 0;
    if (st->type == MR_JSON_STR) {
        if (st->len) r->stop[r->n_stop++] = st->str;
        return 0;
    }
    if (st->type != MR_JSON_ARR) return fail(err, el, "'%s' must be a string or an array of strings", key);
    for (const mr_json *c = st->child; c; c = c->next) {
        if (c->type != MR_JSON_STR) return fail(err, el, "'%s' must be a string or an array of strings", key);
        if (c->len > 256) return fail(err, el, "'%s': stop strings are at most 256 bytes", key);
        if (r->n_stop == SRV_MAX_STOP) return fail(err, el, "'%s': at most %d stop strings", key, SRV_MAX_STOP);
        if (c->len) r->stop[r->n_stop++] = c->str;
    }
    return 0;
}

/* completions: prompt is a string, an array of one string, or token ids (an array of integers) */
static int parse_prompt(srv_req *r, const mr_json *p, char *err, size_t el) {
    if (!p) return fail(err, el, "'prompt' is required");
    if (p->type == MR_JSON_STR) { r->prompt = p->str; return 0; }
    if (p->type != MR_JSON_ARR || p->len == 0) return fail(err, el, "'prompt' must be a string, an array of strings or an array of token ids");
    if (p->child->type == MR_JSON_STR || p->child->type == MR_JSON_ARR) {
        if (p->len > 1) return fail(err, el, "'prompt': one prompt per request (send several requests, or use 'n')");
        return parse_prompt(r, p->child, err, el);
    }
    r->prompt_ids = mr_malloc(sizeof(int32_t) * p->len);
    if (!r->prompt_ids) return fail(err, el, "out of memory");
    for (const mr_json *c = p->child; c; c = c->next) {
        if (c->type != MR_JSON_NUM || c->num != floor(c->num) || c->num < 0 || c->num > 2147483647.0)
            return fail(err, el, "'prompt' token ids must be non-negative integers");
        r->prompt_ids[r->n_prompt_ids++] = (int32_t)c->num;
    }
    return 0;
}

/* logit_bias: OpenAI's object {"token id": bias} or llama-server's array [[id, bias], ...]; a bias is
 * a number (clamped to [-100, 100] by the sampler; -100 bans) or false (bans). Ids are checked
 * against the vocabulary when the request runs (srv_complete); repeats are refused here. */
static int parse_logit_bias(srv_req *r, const mr_json *lb, char *err, size_t el) {
    if (!lb) return 0;
    if (lb->type != MR_JSON_OBJ && lb->type != MR_JSON_ARR)
        return fail(err, el, "'logit_bias' must be an object mapping token ids to numbers");
    if (lb->len > SRV_MAX_LOGIT_BIAS) return fail(err, el, "'logit_bias': at most %d entries", SRV_MAX_LOGIT_BIAS);
    if (!lb->len) return 0;
    r->bias_ids = mr_malloc(sizeof *r->bias_ids * lb->len);
    r->bias_vals = mr_malloc(sizeof *r->bias_vals * lb->len);
    if (!r->bias_ids || !r->bias_vals) return fail(err, el, "out of memory");
    int k = 0;
    for (const mr_json *c = lb->child; c; c = c->next, k++) {
        const mr_json *v = c;
        double id = -1;
        if (lb->type == MR_JSON_OBJ) { /* a decimal token id, nothing else */
            const char *s = c->key;
            size_t n = strlen(s);
            if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
                return fail(err, el, "'logit_bias' keys must be token ids (decimal integers), not '%.40s'", s);
            id = strtod(s, NULL);
        } else {
            if (c->type != MR_JSON_ARR || c->len != 2 || c->child->type != MR_JSON_NUM)
                return fail(err, el, "'logit_bias'[%d] must be a pair [token id, bias]", k);
            id = c->child->num;
            v = c->child->next;
        }
        if (!(id >= 0 && id <= 2147483647.0) || id != floor(id)) return fail(err, el, "'logit_bias': token ids must be non-negative integers");
        if (v->type == MR_JSON_BOOL && v->num == 0) r->bias_vals[k] = -MR_SAMPLER_BIAS_MAX;
        else if (v->type == MR_JSON_NUM) r->bias_vals[k] = (float)(v->num < -1e3 ? -1e3 : v->num > 1e3 ? 1e3 : v->num);
        else return fail(err, el, "'logit_bias' values must be numbers (or false to ban the token)");
        r->bias_ids[k] = (int32_t)id;
        for (int i = 0; i < k; i++) /* (at most a few hundred in practice: quadratic is fine up to the cap) */
            if (r->bias_ids[i] == r->bias_ids[k]) return fail(err, el, "'logit_bias' gives token %d twice", r->bias_ids[k]);
    }
    r->n_bias = k;
    r->sp.bias_ids = r->bias_ids;
    r->sp.bias_vals = r->bias_vals;
    r->sp.n_bias = k;
    return 0;
}

/* response_format: {"type": "text"}, {"type": "json_object"} (llama-server: with "schema"), or
 * {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}; the Responses API's
 * text.format has the json_schema's fields beside "type". A schema outside the subset of
 * docs/SERVER.md is refused naming the keyword. */
static int parse_response_format(srv_req *r, const mr_json *rf, char *err, size_t el) {
    if (!rf) return 0;
    const int flat = r->api == SRV_API_RESPONSES;
    const char *t = mr_json_get_str(rf, "type", NULL), *key = flat ? "text.format" : "response_format";
    if (rf->type != MR_JSON_OBJ || !t) return fail(err, el, "'%s' must be an object with a \"type\"", key);
    const mr_json *schema = NULL;
    const char *where = flat ? "text.format.schema" : "response_format.schema";
    if (!strcmp(t, "text")) return 0;
    if (!strcmp(t, "json_object")) {
        schema = field(rf, "schema");
        if (!schema) { r->json_object = 1; return 0; }
    } else if (!strcmp(t, "json_schema")) {
        const mr_json *js = flat ? rf : field(rf, "json_schema");
        const char *name = NULL;
        int strict = 0;
        if (!js || js->type != MR_JSON_OBJ) return fail(err, el, "'response_format.json_schema' must be an object");
        if (get_str(js, "name", &name, err, el) || get_bool(js, "strict", &strict, err, el)) return -1;
        schema = field(js, "schema");
        if (!flat) where = "response_format.json_schema.schema";
        if (!schema) return fail(err, el, "'%s' is required", where);
    } else {
        return fail(err, el, "'%s' type '%s' is not supported (\"text\", \"json_object\" or \"json_schema\")", key, t);
    }
    if (schema->type != MR_JSON_OBJ && schema->type != MR_JSON_BOOL) return fail(err, el, "'%s' must be a JSON Schema object", where);
    char *text = own(r, mr_json_dump(schema));
    if (!text) return fail(err, el, "out of memory");
    if (mr_json_schema_check(text, strlen(text))) return fail(err, el, "'%s': %s", where, mr_last_error());
    r->json_schema = text;
    return 0;
}

int srv_req_parse(const mr_json *j, int api, srv_req *r, char *err, size_t el) {
    memset(r, 0, sizeof *r);
    r->api = api;
    r->n = 1;
    r->parallel_calls = 1;
    r->max_tokens = -1;
    mr_sampler_default_params(&r->sp);
    if (!j || j->type != MR_JSON_OBJ) return fail(err, el, "the body must be a JSON object");
    double temp = api == SRV_API_ANTHROPIC ? 1.0 : 0.8, top_p = r->sp.top_p, min_p = r->sp.min_p, rp = r->sp.repeat_penalty;
    double seed = -1;
    int mt = -1, top_k = r->sp.top_k;
    if (get_num(j, "temperature", 0, 100, &temp, err, el) || get_num(j, "top_p", 0, 1, &top_p, err, el) ||
        get_num(j, "min_p", 0, 1, &min_p, err, el) || get_num(j, "repeat_penalty", 0, 100, &rp, err, el) ||
        get_int(j, "top_k", -1, 2147483647.0, &top_k, err, el) || get_num(j, "seed", 0, 18446744073709549568.0, &seed, err, el) ||
        get_bool(j, "stream", &r->stream, err, el))
        return -1;
    const mr_json *sv = field(j, "seed");
    if (sv) {
        if (sv->num != floor(sv->num)) return fail(err, el, "'seed' must be an integer");
        r->seed_given = 1;
        r->sp.seed = (uint64_t)seed;
    }
    /* max_completion_tokens (newer OpenAI name) wins over max_tokens; n_predict is llama.cpp's */
    if (get_int(j, "n_predict", -1, 1e6, &mt, err, el) || get_int(j, "max_tokens", 0, 1e6, &mt, err, el) ||
        get_int(j, "max_completion_tokens", 0, 1e6, &mt, err, el))
        return -1;
    if (api == SRV_API_RESPONSES && get_int(j, "max_output_tokens", 0, 1e6, &mt, err, el)) return -1;
    r->max_tokens = mt;
    r->sp.temperature = (float)temp;
    r->sp.top_p = (float)top_p;
    r->sp.min_p = (float)min_p;
    r->sp.repeat_penalty = (float)rp;
    r->sp.top_k = top_k;
    /* OpenAI's penalties (-2..2) and llama-server's repeat_last_n (-1: the context) */
    double pres = 0, freq = 0;
    if (get_num(j, "presence_penalty", -2, 2, &pres, err, el) || get_num(j, "frequency_penalty", -2, 2, &freq, err, el) ||
        get_int(j, "repeat_last_n", -1, MR_SAMPLER_MAX_LAST_N, &r->sp.repeat_last_n, err, el) ||
        parse_logit_bias(r, field(j, "logit_bias"), err, el))
        return -1;
    r->sp.presence_penalty = (float)pres;
    r->sp.frequency_penalty = (float)freq;
    const mr_json *rf = field(j, "response_format");
    if (api == SRV_API_RESPONSES) { /* text: {"format": {...}, "verbosity": ...} */
        const mr_json *text = field(j, "text");
        if (text && text->type != MR_JSON_OBJ) return fail(err, el, "'text' must be an object");
        rf = field(text, "format");
    }
    if (parse_response_format(r, rf, err, el) || parse_thinking(r, j, err, el)) return -1;
    /* speculative decoding, llama-server's names: n_max drafts per step (0 turns it off for this
     * request), n_min the shortest draft worth verifying; p_min (the draft model's confidence to keep
     * drafting) has no meaning for n-gram drafts: checked, no effect */
    double p_min = 0;
    r->spec_max = -1;
    if (get_int(j, "speculative.n_max", 0, 64, &r->spec_max, err, el) ||
        get_int(j, "speculative.n_min", 0, 64, &r->spec_min, err, el) || get_num(j, "speculative.p_min", 0, 1, &p_min, err, el))
        return -1;
    if (r->spec_max >= 0 && r->spec_min > r->spec_max)
        return fail(err, el, "'speculative.n_min' (%d) must not exceed 'speculative.n_max' (%d)", r->spec_min, r->spec_max);
    const mr_json *so = field(j, "stream_options");
    if (so) {
        if (so->type != MR_JSON_OBJ) return fail(err, el, "'stream_options' must be an object");
        if (!r->stream) return fail(err, el, "'stream_options' is only allowed with \"stream\": true");
        if (get_bool(so, "include_usage", &r->include_usage, err, el)) return -1;
    }
    if (api == SRV_API_ANTHROPIC) {
        if (!field(j, "max_tokens")) return fail(err, el, "'max_tokens' is required");
        if (parse_stop(r, field(j, "stop_sequences"), "stop_sequences", err, el)) return -1;
        if (get_int(j, "top_k", -1, 2147483647.0, &r->sp.top_k, err, el)) return -1;
        if (parse_tools(r, j, err, el)) return -1;
        return anthropic_messages(r, j, err, el);
    }
    if (api == SRV_API_RESPONSES) { /* the conversation: srv_resp_input (responses.c), with the stored one */
        if (get_bool(j, "parallel_tool_calls", &r->parallel_calls, err, el)) return -1;
        return parse_tools(r, j, err, el);
    }
    if (parse_stop(r, field(j, "stop"), "stop", err, el)) return -1;
    if (get_int(j, "n", 1, SRV_MAX_N, &r->n, err, el)) return -1;
    if (api == SRV_API_CHAT) {
        if (get_bool(j, "logprobs", &r->logprobs, err, el) ||
            get_int(j, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &r->top_logprobs, err, el))
            return -1;
        if (r->top_logprobs && !r->logprobs) return fail(err, el, "'top_logprobs' needs \"logprobs\": true");
        if (get_bool(j, "parallel_tool_calls", &r->parallel_calls, err, el)) return -1;
        if (parse_tools(r, j, err, el)) return -1;
        return oai_messages(r, mr_json_get(j, "messages"), err, el);
    }
    /* completions: logprobs is the number of alternatives (0..5) */
    const mr_json *lp = field(j, "logprobs");
    if (lp) {
        if (lp->type == MR_JSON_BOOL) r->logprobs = (int)lp->num;
        else if (get_int(j, "logprobs", 0, 5, &r->top_logprobs, err, el)) return -1;
        else r->logprobs = 1;
    }
    if (get_bool(j, "echo", &r->echo, err, el)) return -1;
    int best_of = 1;
    if (get_int(j, "best_of", 1, SRV_MAX_N, &best_of, err, el)) return -1;
    if (best_of != 1) return fail(err, el, "'best_of' is not supported (only 1)");
    const char *suffix = NULL;
    if (get_str(j, "suffix", &suffix, err, el)) return -1;
    if (suffix && *suffix) return fail(err, el, "'suffix' is not supported");
    return parse_prompt(r, field(j, "prompt"), err, el);
}
