/* Thinking in chat replies: each template's markers (mr_chat_thinking), a reply split into reasoning
 * and answer (mr_chat_split_reasoning), and the split of every prefix while streaming: never more
 * than the whole reply's split, and the same text. */
#include "test.h"
#include "moerun.h"

static void split_is(const mr_chat_think *t, const char *reply, const char *reason, const char *answer, int done) {
    mr_chat_split s;
    const size_t len = strlen(reply);
    mr_chat_split_reasoning(t, reply, len, 1, &s);
    CHECK(s.r_len == strlen(reason) && !memcmp(reply + s.r_off, reason, s.r_len), "'%s': reasoning '%.*s', want '%s'", reply,
          (int)s.r_len, reply + s.r_off, reason);
    CHECK(!strcmp(reply + s.c_off, answer), "'%s': answer '%s', want '%s'", reply, reply + s.c_off, answer);
    CHECK(s.done == done, "'%s': done %d", reply, s.done);
    /* streamed: each prefix's split is a prefix of the whole one's */
    for (size_t k = 0; k <= len; k++) {
        mr_chat_split p;
        mr_chat_split_reasoning(t, reply, k, 0, &p);
        int ok = p.r_len <= s.r_len && (!p.r_len || p.r_off == s.r_off) && p.c_off <= k;
        CHECK(ok, "'%s' prefix %zu: reasoning %zu+%zu answer from %zu (whole: %zu+%zu, %zu)", reply, k, p.r_off, p.r_len, p.c_off, s.r_off,
              s.r_len, s.c_off);
        if (!ok) break;
        /* the answer starts where the whole reply's does once any of it is shown */
        CHECK(p.c_off == k || p.c_off == s.c_off, "'%s' prefix %zu: answer from %zu, whole %zu", reply, k, p.c_off, s.c_off);
    }
}

static void test_formats(void) {
    mr_chat_think t;
    mr_chat_opts on = {.thinking = 1}, off = {.thinking = 0}, def = {.thinking = -1};
    CHECK(mr_chat_thinking(NULL, "deepseek4", &on, &t) == 1 && t.in_prompt && !strcmp(t.open, "<think>") && !strcmp(t.close, "</think>"), "deepseek4 on");
    CHECK(mr_chat_thinking(NULL, "deepseek4", &def, &t) == 0 && mr_chat_thinking(NULL, "deepseek4", &off, &t) == 0, "deepseek4: off by default");
    CHECK(mr_chat_thinking(NULL, "chatml", &def, &t) == 1 && !t.in_prompt, "chatml: the model may open <think>");
    CHECK(mr_chat_thinking(NULL, "chatml", &off, &t) == 0, "chatml off");
    CHECK(mr_chat_thinking(NULL, "gpt-oss", &def, &t) == 1 && t.answer_prefix, "gpt-oss");
    CHECK(mr_chat_thinking(NULL, "llama3", &on, &t) == 0 && mr_chat_thinking(NULL, "gemma", &def, &t) == 0, "no thinking in llama3 / gemma");
}

static void test_split(void) {
    const mr_chat_think ds4 = {"<think>", "</think>", 1, NULL}, qwen = {"<think>", "</think>", 0, NULL};
    split_is(&ds4, "Let me see. 2+2=4.</think>Four.", "Let me see. 2+2=4.", "Four.", 1);
    split_is(&ds4, "Hmm </thi", "Hmm </thi", "", 0);         /* cut inside: reasoning only */
    split_is(&ds4, "</think>\n\nDirect.", "", "Direct.", 1);
    split_is(&qwen, "<think>\nA < B\n</think>\n\nYes.", "\nA < B\n", "Yes.", 1);
    split_is(&qwen, "No thinking here.", "", "No thinking here.", 1);
    split_is(&qwen, "<thin", "", "<thin", 1);                 /* never opened: all answer */
    split_is(&qwen, "  <think>x</think>y", "x", "y", 1);
    const mr_chat_think oss = {"<|channel|>analysis<|message|>", "<|end|><|start|>assistant", 0, "<|channel|>final<|message|>"};
    split_is(&oss, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.", "Think.", "Answer.", 1);
    split_is(&oss, "<|channel|>final<|message|>Only the answer.", "", "Only the answer.", 1);
}

/* the templates render what they split: a reply in the prompt's thinking mode parses back */
static void test_render_prompt_ends_open(void) {
    const mr_chat_msg u = {.role = "user", .content = "Q"};
    mr_chat_opts on = {.thinking = 1};
    char out[256];
    int n = mr_chat_render_opts(NULL, "deepseek4", &u, 1, NULL, 0, &on, 1, out, sizeof out);
    mr_chat_think t;
    CHECK(n > 7 && mr_chat_thinking(NULL, "deepseek4", &on, &t) && t.in_prompt && !strcmp(out + n - strlen(t.open), t.open), "prompt: %s", out);
}

int main(void) {
    RUN(test_formats);
    RUN(test_split);
    RUN(test_render_prompt_ends_open);
    return t_finish();
}
