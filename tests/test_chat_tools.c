/* Tool calls in chat templates: tools and earlier calls rendered in each format, the model's call
 * syntax parsed back to the same name and arguments (render -> parse -> render is byte-exact, so a
 * re-sent history hits the prompt cache), malformed calls refused, and the API request checks. */
#include "test.h"
#include "moerun.h"
#include "json/json.h"
#include "server/request.h"

#define DSML "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"

static char *render(const char *tmpl, const mr_chat_msg *m, int n, const char *const *tools, int nt) {
    int len = mr_chat_render_tools(NULL, tmpl, m, n, tools, nt, 1, NULL, 0);
    if (len < 0) return NULL;
    char *s = malloc((size_t)len + 1);
    if (s) mr_chat_render_tools(NULL, tmpl, m, n, tools, nt, 1, s, len + 1);
    return s;
}

/* the assistant turn of one call rendered, parsed back: same name, same arguments text */
static void round_trip(const char *tmpl, const char *open, const char *close) {
    const char *args = "{\"book\": \"Gen\\\"esis\", \"chapter\": 1, \"verses\": [1, 2.5], \"deep\": {\"a\": null, \"b\": true}}";
    mr_chat_tool_call call = {"call_1", "get_verse", args};
    mr_chat_msg msgs[2] = {{.role = "user", .content = "Where?"},
                           {.role = "assistant", .content = "Looking.", .tool_calls = &call, .n_tool_calls = 1}};
    char *s = render(tmpl, msgs, 2, NULL, 0);
    CHECK(s != NULL, "%s: render: %s", tmpl, mr_last_error());
    if (!s) return;
    char *a = strstr(s, open), *e = a ? strstr(a, close) : NULL;
    CHECK(a && e, "%s: no assistant turn in %s", tmpl, s);
    if (a && e) {
        a += strlen(open);
        mr_chat_tool_call got[4];
        size_t content_len = 0;
        int n = mr_chat_parse_tool_calls(NULL, tmpl, a, (size_t)(e - a), &content_len, got, 4);
        CHECK(n == 1, "%s: %d calls parsed from '%.*s'", tmpl, n, (int)(e - a), a);
        if (n == 1) {
            CHECK(!strcmp(got[0].name, "get_verse"), "%s: name %s", tmpl, got[0].name);
            CHECK(!strcmp(got[0].arguments, args), "%s: arguments\n  %s\n  %s", tmpl, got[0].arguments, args);
            CHECK(content_len == 8 && !memcmp(a, "Looking.", 8), "%s: content '%.*s'", tmpl, (int)content_len, a);
            /* rendering the parsed call again gives the same bytes */
            mr_chat_msg again[2] = {msgs[0], {.role = "assistant", .content = "Looking.", .tool_calls = got, .n_tool_calls = 1}};
            char *s2 = render(tmpl, again, 2, NULL, 0);
            CHECK(s2 && !strcmp(s, s2), "%s: re-render differs", tmpl);
            free(s2);
            mr_chat_tool_calls_free(got, n);
        }
    }
    free(s);
}

static void test_round_trip(void) {
    round_trip("chatml", "<|im_start|>assistant\n", "<|im_end|>");
    round_trip("kimi-k2", "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>");
    round_trip("deepseek4", "</think>", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>");
    round_trip("deepseek3", "<think></think>", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>");
    round_trip("gpt-oss", "<|channel|>analysis<|message|>", "<|call|>");
}

static void test_render_tools(void) {
    const char *tools[] = {"{\"name\": \"get_verse\", \"parameters\": {}}"};
    mr_chat_tool_call call = {"c1", "get_verse", "{\"book\": \"Genesis\"}"};
    mr_chat_msg msgs[] = {{.role = "system", .content = "Be terse."}, {.role = "user", .content = "Q"},
                          {.role = "assistant", .tool_calls = &call, .n_tool_calls = 1},
                          {.role = "tool", .content = "R1", .tool_call_id = "c1"}, {.role = "tool", .content = "R2"}};
    char *s = render("chatml", msgs, 5, tools, 1);
    CHECK(s && !strncmp(s, "<|im_start|>system\nBe terse.\n\n# Tools", 36) && strstr(s, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_verse\"") &&
          strstr(s, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_verse\", \"arguments\": {\"book\": \"Genesis\"}}\n</tool_call><|im_end|>") &&
          strstr(s, "<|im_start|>user\n<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
          "chatml tools:\n%s", s ? s : mr_last_error());
    free(s);
    s = render("deepseek4", msgs, 5, tools, 1);
    CHECK(s && !strncmp(s, "Be terse.\n\n## Tools\n\n", 21) && strstr(s, "### Available Tool Schemas\n\n{\"name\": \"get_verse\"") &&
          strstr(s, "</think>\n\n<" DSML "tool_calls>\n<" DSML "invoke name=\"get_verse\">\n<" DSML
                    "parameter name=\"book\" string=\"true\">Genesis</" DSML "parameter>\n</" DSML "invoke>\n</" DSML "tool_calls>") &&
          strstr(s, "<tool_result>R1</tool_result>\n\n<tool_result>R2</tool_result><\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>"),
          "deepseek4 tools:\n%s", s ? s : mr_last_error());
    free(s);
    CHECK(render("gemma", msgs, 5, tools, 1) == NULL, "gemma has no tool format: must refuse");
}

static void test_parse_bad(void) {
    mr_chat_tool_call got[4];
    size_t cl;
    const char *plain = "no calls here";
    CHECK(mr_chat_parse_tool_calls(NULL, "chatml", plain, strlen(plain), &cl, got, 4) == 0 && cl == strlen(plain), "plain text");
    const char *bad[] = {"x <tool_call>\n{\"name\": ", "<tool_call>\n[1]\n</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
                         "<tool_call>{\"name\":\"a\"}</tool_call> trailing"};
    for (int i = 0; i < 4; i++)
        CHECK(mr_chat_parse_tool_calls(NULL, "chatml", bad[i], strlen(bad[i]), &cl, got, 4) == -1, "chatml bad #%d accepted", i);
    const char *d1 = "\n\n<" DSML "tool_calls>\n<" DSML "invoke name=\"f\">\n<" DSML "parameter name=\"x\" string=\"false\">[1, 2]</" DSML
                     "parameter>\n<" DSML "parameter name=\"y\" string=\"false\">not json</" DSML "parameter>\n</" DSML "invoke>\n</" DSML "tool_calls>";
    int n = mr_chat_parse_tool_calls(NULL, "deepseek4", d1, strlen(d1), &cl, got, 4);
    CHECK(n == 1 && cl == 0 && !strcmp(got[0].arguments, "{\"x\": [1, 2], \"y\": \"not json\"}"), "ds4: n %d args %s", n,
          n == 1 ? got[0].arguments : "");
    if (n > 0) mr_chat_tool_calls_free(got, n);
    const char *d2 = "<" DSML "tool_calls>\n<" DSML "invoke name=\"f\">\n<" DSML "parameter name=\"x\">1</" DSML "parameter>";
    CHECK(mr_chat_parse_tool_calls(NULL, "deepseek4", d2, strlen(d2), &cl, got, 4) == -1, "ds4 malformed accepted");
}

#define DS31(x) "<\xef\xbd\x9ctool\xe2\x96\x81" x "\xef\xbd\x9c>"
/* the DeepSeek-V3.1 and gpt-oss call syntaxes as models write them: several calls, a reply cut
 * before the closing markers, gpt-oss's own header order (channel first, <|constrain|>) */
static void test_parse_formats(void) {
    static const struct { const char *tmpl, *text; int n; size_t content; const char *name2, *args2; } cases[] = {
        {"deepseek3", "Hm." DS31("calls\xe2\x96\x81" "begin") DS31("call\xe2\x96\x81" "begin") "f" DS31("sep") "{\"a\":1}"
         DS31("call\xe2\x96\x81" "end") DS31("call\xe2\x96\x81" "begin") "g_2" DS31("sep") "{}" DS31("call\xe2\x96\x81" "end")
         DS31("calls\xe2\x96\x81" "end"), 2, 3, "g_2", "{}"},
        {"deepseek3", DS31("calls\xe2\x96\x81" "begin") DS31("call\xe2\x96\x81" "begin") "f" DS31("sep") "{\"a\": [true]}", 1, 0, NULL, NULL},
        {"deepseek3", DS31("calls\xe2\x96\x81" "begin") DS31("call\xe2\x96\x81" "begin") "f" DS31("sep") "[1]", -1, 0, NULL, NULL},
        {"deepseek3", DS31("calls\xe2\x96\x81" "begin") "f" DS31("sep") "{}", -1, 0, NULL, NULL},
        {"gpt-oss", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>", 1, 0, NULL, NULL},
        {"gpt-oss", " to=functions.f<|channel|>commentary json<|message|>{\"a\":1}<|call|><|start|>assistant to=functions.h"
         "<|channel|>commentary json<|message|>{\"b\": null}", 2, 0, "h", "{\"b\": null}"},
        {"gpt-oss", "Sure.<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}", 1, 5, NULL, NULL},
        {"gpt-oss", " to=functions.f<|channel|>commentary json<|message|>nope", -1, 0, NULL, NULL},
        {"gpt-oss", " to=functions.<|channel|>commentary json<|message|>{}", -1, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_chat_tool_call got[4];
        size_t cl = 0;
        const int n = mr_chat_parse_tool_calls(NULL, cases[i].tmpl, cases[i].text, strlen(cases[i].text), &cl, got, 4);
        CHECK(n == cases[i].n && (n < 0 || cl == cases[i].content), "case %zu (%s): %d calls, content %zu", i, cases[i].tmpl, n, cl);
        if (n > 0) CHECK(!strcmp(got[0].name, "f") && (!strncmp(got[0].arguments, "{\"a\": ", 6) || !strcmp(got[0].arguments, "{}")),
                         "case %zu: %s(%s)", i, got[0].name, got[0].arguments);
        if (n == 2 && cases[i].name2)
            CHECK(!strcmp(got[1].name, cases[i].name2) && !strcmp(got[1].arguments, cases[i].args2), "case %zu: %s(%s)", i, got[1].name, got[1].arguments);
        if (n > 0) mr_chat_tool_calls_free(got, n);
    }
}

/* request checks: wrong types and unsupported features are refused naming the field */
static void test_request(void) {
    static const struct { int api; const char *body, *want; } cases[] = {
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"5\"}", "max_tokens"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", "temperature"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", "stream"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "image_url"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "function"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\"}}", "response_format"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":99}", "'n'"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "tool_choice"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"presence_penalty\":2.5}", "presence_penalty"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":1,\"01\":2}}", "twice"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":true}}", "stream_options"},
        {SRV_API_COMPLETIONS, "{\"prompt\":[\"a\",\"b\"]}", "prompt"},
        {SRV_API_COMPLETIONS, "{\"prompt\":[1,-2]}", "prompt"},
        {SRV_API_ANTHROPIC, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}",
         "'response_format.json_schema.schema' is required"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"name\":\"n\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"email\"}}}}}}",
         "keyword 'format' is not supported (at #/properties/a)"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"schema\":{},\"strict\":\"yes\"}}}", "'strict'"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\",\"schema\":{\"oneOf\":[]}}}",
         "'oneOf'"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}", "'xml'"},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"parallel_tool_calls\":1}", "parallel_tool_calls"},
        {SRV_API_ANTHROPIC, "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"f\"}],"
         "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":\"y\"}}", "disable_parallel_tool_use"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_json *j = mr_json_parse(cases[i].body, strlen(cases[i].body));
        srv_req r;
        char err[256] = "";
        int rc = srv_req_parse(j, cases[i].api, &r, err, sizeof err);
        CHECK(rc == -1 && strstr(err, cases[i].want), "case %zu: rc %d err '%s' (want '%s')", i, rc, err, cases[i].want);
        srv_req_free(&r);
        mr_json_free(j);
    }
    const char *ok = "{\"messages\":[{\"role\":\"developer\",\"content\":\"d\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                     "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
                     "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"r\"}],"
                     "\"max_completion_tokens\":3,\"max_tokens\":9,\"stop\":null,\"seed\":7,\"n\":2,\"logprobs\":true,\"top_logprobs\":3}";
    mr_json *j = mr_json_parse(ok, strlen(ok));
    srv_req r;
    char err[256] = "";
    int rc = srv_req_parse(j, SRV_API_CHAT, &r, err, sizeof err);
    CHECK(rc == 0, "valid request refused: %s", err);
    if (rc == 0) {
        CHECK(r.n_msgs == 4 && !strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[1].content, "a\nb") && r.msgs[2].content == NULL &&
              r.msgs[2].n_tool_calls == 1 && !strcmp(r.msgs[3].role, "tool"), "messages");
        CHECK(r.max_tokens == 3 && r.seed_given && r.sp.seed == 7 && r.n == 2 && r.logprobs && r.top_logprobs == 3, "options");
    }
    srv_req_free(&r);
    mr_json_free(j);
    /* json_schema, forced and named calls, parallel_tool_calls; Anthropic's tool_choice objects */
    static const struct { int api; const char *body; int choice; const char *name; int parallel; int schema; } good[] = {
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}}",
         SRV_TOOLS_NONE, NULL, 1, 1},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
         "\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", SRV_TOOLS_REQUIRED, NULL, 0, 0},
        {SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
         "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
         SRV_TOOLS_NAMED, "g", 1, 0},
        {SRV_API_ANTHROPIC, "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"f\"}],"
         "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":true}}", SRV_TOOLS_REQUIRED, NULL, 0, 0},
        {SRV_API_ANTHROPIC, "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"f\","
         "\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\"}}", SRV_TOOLS_NAMED, "f", 1, 0},
        {SRV_API_ANTHROPIC, "{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"f\"}],"
         "\"tool_choice\":{\"type\":\"none\"}}", SRV_TOOLS_NONE, NULL, 1, 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        j = mr_json_parse(good[i].body, strlen(good[i].body));
        rc = srv_req_parse(j, good[i].api, &r, err, sizeof err);
        CHECK(rc == 0, "good %zu refused: %s", i, err);
        if (rc == 0) {
            CHECK(r.tool_choice == good[i].choice && r.parallel_calls == good[i].parallel && !!r.json_schema == good[i].schema &&
                  (!good[i].name || (r.tool_choice_name && !strcmp(r.tool_choice_name, good[i].name))), "good %zu: choice %d parallel %d",
                  i, r.tool_choice, r.parallel_calls);
            CHECK(!r.n_tools || !r.tool_params[0] == !strstr(good[i].body, "\"type\":\"object\"}}"), "good %zu: parameters", i);
        }
        srv_req_free(&r);
        mr_json_free(j);
    }
}

int main(void) {
    RUN(test_round_trip);
    RUN(test_render_tools);
    RUN(test_parse_bad);
    RUN(test_parse_formats);
    RUN(test_request);
    return t_finish();
}
