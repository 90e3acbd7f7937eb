/* Chat templates against their reference Jinja templates: every case of tests/golden/chat/cases.json
 * (a conversation, tools, the template's kwargs: thinking / enable_thinking, reasoning_effort,
 * drop_thinking) rendered by moerun must be byte for byte the reference's rendering, NAME.txt (made
 * by render.py with python3 jinja2: tests/golden/chat/README.md). */
#include "test.h"
#include "moerun.h"
#include "json/json.h"

#define DIR "tests/golden/chat/"
#define MAX_MSGS 32
#define MAX_CALLS 64

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return s;
}

/* the case's kwargs as moerun's options: a template keyword it does not map fails the case */
static int case_opts(const mr_json *kw, mr_chat_opts *o, const char *name) {
    *o = (mr_chat_opts){.thinking = -1};
    for (const mr_json *k = kw ? kw->child : NULL; k; k = k->next) {
        if (!strcmp(k->key, "thinking") || !strcmp(k->key, "enable_thinking")) o->thinking = k->type == MR_JSON_BOOL && k->num;
        else if (!strcmp(k->key, "reasoning_effort") && k->type == MR_JSON_STR) o->effort = k->str;
        else if (!strcmp(k->key, "drop_thinking") && k->type == MR_JSON_BOOL) o->keep_reasoning = !k->num;
        else { CHECK(0, "%s: kwarg %s not mapped", name, k->key); return -1; }
    }
    return 0;
}

/* one case: messages (with reasoning_content and tool_calls), tools as the server passes them
 * (each function's JSON), rendered and compared */
static void run_case(const mr_json *c) {
    const char *name = mr_json_get_str(c, "name", "?"), *tmpl = mr_json_get_str(c, "template", NULL);
    mr_chat_msg msgs[MAX_MSGS];
    mr_chat_tool_call calls[MAX_CALLS];
    char *owned[MAX_CALLS + 16];
    const char *tools[16];
    int n = 0, nc = 0, no = 0, nt = 0;
    mr_chat_opts o;
    if (case_opts(mr_json_get(c, "kwargs"), &o, name)) return;
    o.date = mr_json_get_str(c, "date", "2026-01-01"); /* the reference's strftime_now in render.py */
    const mr_json *ms = mr_json_get(c, "messages"), *ts = mr_json_get(c, "tools");
    for (const mr_json *m = ms ? ms->child : NULL; m && n < MAX_MSGS; m = m->next, n++) {
        msgs[n] = (mr_chat_msg){.role = mr_json_get_str(m, "role", ""), .content = mr_json_get_str(m, "content", NULL),
                                .reasoning = mr_json_get_str(m, "reasoning_content", NULL),
                                .tool_call_id = mr_json_get_str(m, "tool_call_id", NULL)};
        const mr_json *tc = mr_json_get(m, "tool_calls");
        msgs[n].tool_calls = calls + nc;
        for (const mr_json *t = tc ? tc->child : NULL; t && nc < MAX_CALLS; t = t->next) {
            const mr_json *f = mr_json_get(t, "function"), *a = mr_json_get(f, "arguments");
            /* arguments given as an object (the templates that write them with tojson): their JSON
             * text, as a client sends it */
            const char *args = a && a->type == MR_JSON_OBJ && no < MAX_CALLS + 16 ? (owned[no++] = mr_json_dump(a)) : mr_json_get_str(f, "arguments", "{}");
            calls[nc++] = (mr_chat_tool_call){mr_json_get_str(t, "id", NULL), mr_json_get_str(f, "name", ""), args};
            msgs[n].n_tool_calls++;
        }
    }
    for (const mr_json *t = ts ? ts->child : NULL; t && nt < 16; t = t->next) tools[nt++] = owned[no++] = mr_json_dump(t);
    const int gen = mr_json_get(c, "add_generation_prompt") ? (int)mr_json_get(c, "add_generation_prompt")->num : 1;
    char path[512];
    snprintf(path, sizeof path, DIR "%s.txt", name);
    size_t want_len = 0;
    char *want = slurp(path, &want_len);
    CHECK(want != NULL, "%s: no %s", name, path);
    int len = mr_chat_render_opts(NULL, tmpl, msgs, n, tools, nt, &o, gen, NULL, 0);
    char *got = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (got) mr_chat_render_opts(NULL, tmpl, msgs, n, tools, nt, &o, gen, got, len + 1);
    CHECK(got, "%s: render: %s", name, mr_last_error());
    if (want && got) {
        size_t d = 0;
        while (d < want_len && d < (size_t)len && want[d] == got[d]) d++;
        CHECK((size_t)len == want_len && d == want_len, "%s: differs at byte %zu (%d vs %zu bytes)\n got: ...%.60s\nwant: ...%.60s", name, d,
              len, want_len, got + (d > 20 ? d - 20 : 0), want + (d > 20 ? d - 20 : 0));
    }
    free(got);
    free(want);
    for (int i = 0; i < no; i++) free(owned[i]);
}

static void test_goldens(void) {
    size_t len;
    char *s = slurp(DIR "cases.json", &len);
    CHECK(s != NULL, "no " DIR "cases.json");
    if (!s) return;
    mr_json *j = mr_json_parse(s, len);
    CHECK(j && j->type == MR_JSON_ARR && j->len > 0, "cases.json: %s", mr_last_error());
    int k = 0;
    for (const mr_json *c = j ? j->child : NULL; c; c = c->next, k++) run_case(c);
    printf("# %d reference renderings compared\n", k);
    mr_json_free(j);
    free(s);
}

int main(void) {
    RUN(test_goldens);
    return t_finish();
}
