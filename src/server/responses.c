/* The Responses API's conversation and store (responses.h). */
#include "server/responses.h"
#include "base/base.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fail srv_req_fail

/* ---- the store: a FIFO of (id, items text), bounded in entries and bytes ---- */

typedef struct {
    char id[48];
    char *items;                 /* "[item,item" as srv_resp.items_text holds them */
    size_t n;
} store_entry;

struct srv_store {
    pthread_mutex_t mu;
    store_entry *e;              /* ring of max entries, oldest at head */
    int max, head, count;
    size_t bytes, max_bytes;
    unsigned long long tag;      /* random per store: part of every response id */
};

srv_store *srv_store_new(int max_entries, size_t max_bytes) {
    srv_store *st = mr_calloc(1, sizeof *st);
    if (!st) return NULL;
    st->e = mr_calloc((size_t)max_entries, sizeof *st->e);
    if (!st->e) { free(st); return NULL; }
    pthread_mutex_init(&st->mu, NULL);
    if (getrandom(&st->tag, sizeof st->tag, 0) != (ssize_t)sizeof st->tag) st->tag = (unsigned long long)time(NULL) * 2654435761u;
    st->max = max_entries;
    st->max_bytes = max_bytes;
    return st;
}

void srv_store_free(srv_store *st) {
    if (!st) return;
    for (int i = 0; i < st->max; i++) free(st->e[i].items);
    pthread_mutex_destroy(&st->mu);
    free(st->e);
    free(st);
}

static void drop_oldest(srv_store *st) {
    store_entry *o = &st->e[st->head];
    st->bytes -= o->n;
    free(o->items);
    memset(o, 0, sizeof *o);
    st->head = (st->head + 1) % st->max;
    st->count--;
}

/* takes items (malloc'd); a conversation larger than the whole store is not kept */
static void store_put(srv_store *st, const char *id, char *items, size_t n) {
    if (n > st->max_bytes || strlen(id) >= sizeof st->e[0].id) { free(items); return; }
    pthread_mutex_lock(&st->mu);
    while (st->count && (st->count == st->max || st->bytes + n > st->max_bytes)) drop_oldest(st);
    store_entry *e = &st->e[(st->head + st->count) % st->max];
    snprintf(e->id, sizeof e->id, "%s", id);
    e->items = items;
    e->n = n;
    st->bytes += n;
    st->count++;
    pthread_mutex_unlock(&st->mu);
}

/* appends the stored items of id to b: 1 found, 0 not, -1 out of memory */
static int store_get(srv_store *st, const char *id, mr_sbuf *b) {
    int found = 0;
    pthread_mutex_lock(&st->mu);
    for (int i = st->count - 1; i >= 0 && !found; i--) { /* newest first: a follow-up usually names the last one */
        store_entry *e = &st->e[(st->head + i) % st->max];
        if (strcmp(e->id, id)) continue;
        mr_sbuf_add(b, e->items, e->n);
        found = 1;
    }
    pthread_mutex_unlock(&st->mu);
    return b->oom ? -1 : found;
}

void srv_resp_id(const srv_resp *rs, unsigned long n, char *out, size_t size) {
    snprintf(out, size, "resp_%lu_%012llx", n, rs->tag & 0xffffffffffffull);
}

void srv_resp_save(srv_resp *rs, const char *id, const char *out, size_t n) {
    if (!rs->store_it || !rs->store) return;
    mr_sbuf b = {0};
    mr_sbuf_add(&b, rs->items_text.p, rs->items_text.n);
    if (n) {
        if (rs->items_text.n > 1) mr_sbuf_puts(&b, ",");
        mr_sbuf_add(&b, out, n);
    }
    if (b.oom) { mr_sbuf_free(&b); return; } /* not stored: a follow-up naming it gets the 404 */
    store_put(rs->store, id, b.p, b.n);
}

void srv_resp_free(srv_resp *rs) {
    mr_json_free(rs->items);
    mr_sbuf_free(&rs->items_text);
    free(rs->tools);
    free(rs->tool_choice);
    free(rs->format);
    free(rs->metadata);
    memset(rs, 0, sizeof *rs);
}

/* ---- the request's own fields ---- */

static const mr_json *field(const mr_json *j, const char *key) {
    const mr_json *v = mr_json_get(j, key);
    return v && v->type != MR_JSON_NULL ? v : NULL;
}

static int opt_str(const mr_json *j, const char *key, const char **out, char *err, size_t el) {
    const mr_json *v = field(j, key);
    if (v && v->type != MR_JSON_STR) return fail(err, el, "'%s' must be a string", key);
    *out = v ? v->str : NULL;
    return 0;
}

static int echo(const mr_json *v, char **out, char *err, size_t el) {
    if (!v) return 0;
    *out = mr_json_dump(v);
    return *out ? 0 : fail(err, el, "out of memory");
}

/* The fields only the Responses API has: what the server cannot do is refused. (reasoning.effort is
 * srv_req_parse's, as reasoning_effort.) */
static int parse_fields(srv_resp *rs, const mr_json *j, char *err, size_t el) {
    const mr_json *v;
    if (opt_str(j, "instructions", &rs->instructions, err, el) || opt_str(j, "previous_response_id", &rs->prev_id, err, el))
        return -1;
    rs->store_it = 1;
    if ((v = field(j, "store"))) {
        if (v->type != MR_JSON_BOOL) return fail(err, el, "'store' must be true or false");
        rs->store_it = (int)v->num;
    }
    if ((v = field(j, "background")) && !(v->type == MR_JSON_BOOL && v->num == 0))
        return fail(err, el, "'background' responses are not supported");
    if (field(j, "conversation")) return fail(err, el, "'conversation' is not supported (use previous_response_id)");
    if (field(j, "prompt")) return fail(err, el, "'prompt' (a stored prompt template) is not supported");
    if ((v = field(j, "truncation")) && !(v->type == MR_JSON_STR && !strcmp(v->str, "disabled")))
        return fail(err, el, "'truncation' must be \"disabled\" (a conversation longer than the context is refused)");
    if ((v = field(j, "top_logprobs")) && !(v->type == MR_JSON_NUM && v->num == 0))
        return fail(err, el, "'top_logprobs' is not supported by /v1/responses (use /v1/chat/completions)");
    if ((v = field(j, "include"))) {
        if (v->type != MR_JSON_ARR) return fail(err, el, "'include' must be an array of strings");
        for (const mr_json *c = v->child; c; c = c->next) {
            if (c->type != MR_JSON_STR) return fail(err, el, "'include' must be an array of strings");
            if (!strcmp(c->str, "message.output_text.logprobs")) return fail(err, el, "'include': logprobs are not supported by /v1/responses");
        }
    }
    const mr_json *text = field(j, "text");
    if ((v = field(text, "verbosity")) && !(v->type == MR_JSON_STR && !strcmp(v->str, "medium")))
        return fail(err, el, "'text.verbosity' other than \"medium\" is not supported");
    if ((v = field(j, "metadata")) && v->type != MR_JSON_OBJ) return fail(err, el, "'metadata' must be an object");
    const char *summary = NULL;
    if (opt_str(field(j, "reasoning"), "summary", &summary, err, el)) return -1;
    return echo(field(j, "tools"), &rs->tools, err, el) || echo(field(j, "tool_choice"), &rs->tool_choice, err, el) ||
           echo(field(text, "format"), &rs->format, err, el) || echo(field(j, "metadata"), &rs->metadata, err, el);
}

/* rs->items_text: the stored items of previous_response_id, then the input (a string is one user
 * message); rs->items: its tree; *n_prev: the stored items. 0, or -1 with *status. */
static int gather_items(srv_store *st, const mr_json *j, srv_resp *rs, int *n_prev, int *status, char *err, size_t el) {
    mr_sbuf *b = &rs->items_text;
    mr_sbuf_puts(b, "[");
    if (rs->prev_id) {
        int found = st ? store_get(st, rs->prev_id, b) : 0;
        if (found < 0) return fail(err, el, "out of memory");
        if (!found) {
            *status = 404;
            return fail(err, el, "'previous_response_id': no stored response '%.64s' (unknown, not stored, or dropped from the "
                        "store of the last %d)", rs->prev_id, SRV_STORE_MAX);
        }
        /* the stored text is "[item,item": drop its bracket */
        memmove(b->p + 1, b->p + 2, b->n - 2);
        b->n--;
    }
    const mr_json *in = field(j, "input");
    if (!in) return fail(err, el, "'input' is required");
    *n_prev = in->type == MR_JSON_ARR ? -(int)in->len : -1; /* + the items' count below */
    if (in->type == MR_JSON_STR) {
        mr_sbuf_puts(b, b->n > 1 ? ",{\"type\": \"message\", \"role\": \"user\", \"content\": " : "{\"type\": \"message\", \"role\": \"user\", \"content\": ");
        mr_sbuf_json_str(b, in->str, in->len);
        mr_sbuf_puts(b, "}");
    } else if (in->type == MR_JSON_ARR) {
        for (const mr_json *c = in->child; c; c = c->next) {
            char *t = mr_json_dump(c);
            if (!t) return fail(err, el, "out of memory");
            if (b->n > 1) mr_sbuf_puts(b, ",");
            mr_sbuf_puts(b, t);
            free(t);
        }
    } else return fail(err, el, "'input' must be a string or an array of items");
    if (b->oom) return fail(err, el, "out of memory");
    mr_sbuf_puts(b, "]");
    rs->items = b->oom ? NULL : mr_json_parse(b->p, b->n);
    b->n--; /* kept without the bracket: the output items follow it in the store */
    if (!rs->items) return fail(err, el, "'input': %s", b->oom ? "out of memory" : mr_last_error());
    if (rs->items->len > SRV_MAX_MESSAGES) return fail(err, el, "at most %d items (stored and input)", SRV_MAX_MESSAGES);
    if (!rs->items->len) return fail(err, el, "'input' must not be empty");
    *n_prev += (int)rs->items->len;
    return 0;
}

/* ---- items -> messages ---- */

/* the reasoning item's text (its reasoning_text parts joined; NULL: none), for the assistant turn after it */
static int reasoning_text(srv_req *q, const mr_json *it, const char **out, const char *where, char *err, size_t el) {
    const mr_json *c = field(it, "content");
    *out = NULL;
    if (!c) return 0; /* only a summary (or encrypted content): nothing to render */
    if (c->type != MR_JSON_ARR) return fail(err, el, "%s.content must be an array of reasoning_text parts", where);
    mr_sbuf b = {0};
    for (const mr_json *p = c->child; p; p = p->next) {
        const char *t = mr_json_get_str(p, "text", NULL);
        if (!t || strcmp(mr_json_get_str(p, "type", ""), "reasoning_text")) { mr_sbuf_free(&b); return fail(err, el, "%s.content: parts must be reasoning_text", where); }
        mr_sbuf_puts(&b, t);
    }
    if (b.oom) { mr_sbuf_free(&b); return fail(err, el, "out of memory"); }
    *out = b.p ? srv_req_own(q, b.p) : NULL;
    return b.p && !*out ? fail(err, el, "out of memory") : 0;
}

/* a function_call item: a call of the assistant message before it, or of a new one */
static int add_call(srv_req *q, const mr_json *it, const char *where, char *err, size_t el) {
    const char *name = mr_json_get_str(it, "name", NULL), *cid = mr_json_get_str(it, "call_id", NULL);
    const mr_json *args = field(it, "arguments");
    if (!name) return fail(err, el, "%s.name must be a string", where);
    if (!cid) return fail(err, el, "%s.call_id must be a string", where);
    if (args && args->type != MR_JSON_STR) return fail(err, el, "%s.arguments must be a string (JSON text)", where);
    mr_chat_msg *last = q->n_msgs ? &q->msgs[q->n_msgs - 1] : NULL;
    mr_chat_tool_call *call = &q->calls[q->n_calls];
    if (!last || strcmp(last->role, "assistant") || last->tool_calls + last->n_tool_calls != call) {
        last = &q->msgs[q->n_msgs++];
        *last = (mr_chat_msg){.role = "assistant", .tool_calls = call};
    }
    *call = (mr_chat_tool_call){.id = cid, .name = name, .arguments = args ? args->str : "{}"};
    q->n_calls++;
    last->n_tool_calls++;
    return 0;
}

/* a message item: {"type": "message" (may be absent), "role", "content": string or parts} */
static int add_message(srv_req *q, const mr_json *it, const char *where, char *err, size_t el) {
    const char *role = mr_json_get_str(it, "role", NULL);
    mr_chat_msg m = {0};
    if (!role) return fail(err, el, "%s.role must be a string", where);
    if (srv_req_content(q, mr_json_get(it, "content"), where, &m.content, err, el)) return -1;
    if (!strcmp(role, "system") || !strcmp(role, "developer")) m.role = "system";
    else if (!strcmp(role, "user")) m.role = "user";
    else if (!strcmp(role, "assistant")) m.role = "assistant";
    else return fail(err, el, "%s.role '%s' is not one of system, developer, user, assistant", where, role);
    if (!m.content) return fail(err, el, "%s.content must be a string or an array of text parts", where);
    m.tool_calls = q->calls + q->n_calls; /* function_call items right after it are its calls */
    q->msgs[q->n_msgs++] = m;
    return 0;
}

/* *reasoning: the text of a reasoning item not yet given to the assistant turn after it */
static int add_item(srv_req *q, const mr_json *it, const char *where, const char **reasoning, char *err, size_t el) {
    if (it->type != MR_JSON_OBJ) return fail(err, el, "%s must be an object", where);
    const char *type = mr_json_get_str(it, "type", "message");
    if (!strcmp(type, "reasoning")) return reasoning_text(q, it, reasoning, where, err, el);
    const int n = q->n_msgs;
    int rc = !strcmp(type, "message") ? add_message(q, it, where, err, el) : !strcmp(type, "function_call") ? add_call(q, it, where, err, el) : 1;
    if (rc <= 0) {
        if (!rc && q->n_msgs > n && !strcmp(q->msgs[n].role, "assistant")) { q->msgs[n].reasoning = *reasoning; *reasoning = NULL; }
        return rc;
    }
    if (!strcmp(type, "function_call_output")) {
        mr_chat_msg t = {.role = "tool", .tool_call_id = mr_json_get_str(it, "call_id", NULL)};
        if (!t.tool_call_id) return fail(err, el, "%s.call_id must be a string", where);
        const mr_json *out = mr_json_get(it, "output");
        if (!out || (out->type != MR_JSON_STR && out->type != MR_JSON_ARR)) return fail(err, el, "%s.output must be a string or text parts", where);
        if (srv_req_content(q, out, where, &t.content, err, el)) return -1;
        q->msgs[q->n_msgs++] = t;
        return 0;
    }
    return fail(err, el, "%s: items of type '%s' are not supported (message, function_call, function_call_output)", where, type);
}

int srv_resp_input(srv_store *st, const mr_json *j, srv_req *q, srv_resp *rs, int *status, char *err, size_t el) {
    memset(rs, 0, sizeof *rs);
    rs->store = st;
    rs->tag = st ? st->tag : 0;
    *status = 400;
    int n_prev = 0;
    if (parse_fields(rs, j, err, el) || gather_items(st, j, rs, &n_prev, status, err, el)) return -1;
    size_t n = rs->items->len + 1, n_calls = 1;
    for (const mr_json *c = rs->items->child; c; c = c->next) n_calls += !strcmp(mr_json_get_str(c, "type", ""), "function_call");
    q->msgs = mr_calloc(n, sizeof *q->msgs);
    q->calls = mr_calloc(n_calls, sizeof *q->calls);
    if (!q->msgs || !q->calls) return fail(err, el, "out of memory");
    if (rs->instructions) q->msgs[q->n_msgs++] = (mr_chat_msg){.role = "system", .content = rs->instructions};
    int i = 0;
    const char *reasoning = NULL;
    for (const mr_json *c = rs->items->child; c; c = c->next, i++) {
        char where[64];
        if (i < n_prev) snprintf(where, sizeof where, "item %d of previous_response_id", i);
        else snprintf(where, sizeof where, "input[%d]", i - n_prev);
        if (add_item(q, c, where, &reasoning, err, el)) return -1;
    }
    for (int k = 0; k < q->n_msgs; k++)
        if (!q->msgs[k].n_tool_calls) q->msgs[k].tool_calls = NULL;
    if (!q->n_msgs) return fail(err, el, "'input' has no message");
    return 0;
}
