/* Pre-tokenizer splits, including the sets that have no shared vocab test file, and the places
 * where the reference differs from a plain Unicode regex engine (see src/tokenizer/pretok.c).
 * Expected splits are derived by hand from the reference's regexes and its matching rules. */
#include "test.h"
#include "tokenizer/tokenizer.h"

/* Split text with the set named pre; compare with the expected pieces, given as one string with
 * pieces separated by '|'. */
static void expect_split(const char *pre, const char *text, const char *expected) {
    int flags;
    int set = mr_pretok_lookup(pre, &flags);
    CHECK(set >= 0, "unknown pre %s", pre);
    if (set < 0) return;
    mr_pretok *p = mr_pretok_new(set);
    CHECK(p, "compile %s: %s", pre, mr_last_error());
    if (!p) return;
    char *out = NULL;
    size_t cap = 0, len = 0;
    mr_i32vec lens = { 0 };
    int rc = mr_pretok_split(p, text, strlen(text), &out, &cap, &len, &lens);
    CHECK(rc == 0, "%s: split failed: %s", pre, mr_last_error());
    char got[1024];
    size_t g = 0, o = 0;
    for (size_t i = 0; rc == 0 && i < lens.n && g + (size_t)lens.v[i] + 2 < sizeof got; i++) {
        if (i) got[g++] = '|';
        memcpy(got + g, out + o, (size_t)lens.v[i]);
        g += (size_t)lens.v[i];
        o += (size_t)lens.v[i];
    }
    got[g] = 0;
    CHECK(!strcmp(got, expected), "%s: '%s' split as '%s', expected '%s'", pre, text, got, expected);
    free(out);
    free(lens.v);
    mr_pretok_free(p);
}

static void test_gpt2(void) {
    expect_split("gpt-2", "Hello world's  end\n\n  x", "Hello| world|'s| | end|\n\n | x");
    expect_split("mpt", "a  b", "a| | b");
    expect_split("gpt-neox", "3.14 is pi", "3|.|14| is| pi");
}

static void test_default(void) {
    /* punctuation runs, gpt2 regex, digit runs, then groups of three digits */
    expect_split("default", "Hello, world! 12345", "Hello|,| world|!| |123|45");
    expect_split("", "a~b", "a|~|b");
}

static void test_llama3(void) {
    expect_split("llama-bpe", "Hello 1234567 world", "Hello| |123|456|7| world");
    expect_split("llama3", "I'M here.\n\n", "I|'M| here|.\n\n");
    expect_split("dbrx", "x  \n y", "x|  \n| y");
}

static void test_qwen2(void) {
    expect_split("qwen2", "abc 123", "abc| |1|2|3");
}

static void test_starcoder_falcon(void) {
    expect_split("starcoder", "x=12", "x|=|1|2");
    expect_split("refact", "ab 7", "ab| |7");
    /* falcon: punctuation first, then gpt2, then exactly-three-digit groups */
    expect_split("falcon", "1234, ok", "123|4|,| ok");
}

static void test_deepseek(void) {
    expect_split("deepseek-coder", "int x=10;\n", "int| x|=|1|0|;|\n");
    expect_split("deepseek-llm", "Hi 42 \xe4\xbd\xa0\xe5\xa5\xbd", "Hi| |42| |\xe4\xbd\xa0\xe5\xa5\xbd");
    expect_split("deepseek-v3", "abc 12345 \xe4\xbd\xa0\xe5\xa5\xbd!", "abc| |123|45| |\xe4\xbd\xa0\xe5\xa5\xbd|!");
    expect_split("deepseek-v3", "(foo)", "(foo|)");
}

/* '~' is not \p{S} in the reference's collapsed text: "~e-acute" is one piece in deepseek-v3 */
static void test_tilde_quirk(void) {
    expect_split("deepseek-v3", "~\xc3\xa9", "~\xc3\xa9");
    expect_split("deepseek-v3", "!\xc3\xa9", "!|\xc3\xa9");
}

/* Non-ASCII whitespace is U+000B to the reference's regexes, so U+3000 no longer matches the
 * deepseek-llm punctuation range U+3000-U+3002. */
static void test_unicode_space(void) {
    expect_split("deepseek-llm", "\xe3\x80\x82\xe3\x80\x80\xe3\x80\x80" "a", "\xe3\x80\x82|\xe3\x80\x80|\xe3\x80\x80" "a");
    /* and a no-break space is no "optional space" before a word */
    expect_split("gpt-2", "a\xc2\xa0\xc2\xa0" "b", "a|\xc2\xa0|\xc2\xa0|b");
}

/* Code points assigned in Unicode 15/15.1 (after PCRE2 10.42's tables) keep the reference's classes */
static void test_unicode15(void) {
    /* U+11F50..U+11F53 Kawi digits: \p{N}{1,3} */
    expect_split("llama3", "\xf0\x91\xbd\x90\xf0\x91\xbd\x91\xf0\x91\xbd\x92\xf0\x91\xbd\x93",
                 "\xf0\x91\xbd\x90\xf0\x91\xbd\x91\xf0\x91\xbd\x92|\xf0\x91\xbd\x93");
    /* U+31350 CJK Ext H is a letter */
    expect_split("gpt-2", "a\xf0\xb1\x8d\x90", "a\xf0\xb1\x8d\x90");
}

static void test_invalid_utf8(void) {
    /* invalid bytes become U+FFFD, one per byte, like the reference */
    expect_split("gpt-2", "a\xff\xfe", "a|\xef\xbf\xbd\xef\xbf\xbd");
    expect_split("gpt-2", "\xe4\xbd", "\xef\xbf\xbd\xef\xbf\xbd");
}

static void test_no_file_sets(void) {
    /* tekken / gpt-4o: case-aware letter runs */
    expect_split("tekken", "HelloWorld 12", "Hello|World| |1|2");
    expect_split("gpt-4o", "HelloWorld's 1234", "Hello|World's| |123|4");
    /* chatglm4 uses the llama3 regex */
    expect_split("chatglm-bpe", "ab12345", "ab|123|45");
    /* kimi-k2: Han runs separate from other letters */
    expect_split("kimi-k2", "\xe4\xbd\xa0\xe5\xa5\xbdworld's 123", "\xe4\xbd\xa0\xe5\xa5\xbd|world's| |123");
    /* afmoe: digit runs cut from the left into len%3 then threes, the text before joins the head */
    expect_split("afmoe", "ab1234 x", "ab|1|234| x");
    /* superbpe: lookahead-only regex (empty matches) groups digits by three from the right */
    expect_split("superbpe", "x1234567", "x|1|234|567");
    expect_split("seed-coder", "a1b", "a|1|b");
    expect_split("bailingmoe", "don't", "don|'t");
    expect_split("poro-chat", "hi, there", "hi|,| there");
    expect_split("viking", "a1, b", "a|1|,| b");
    expect_split("qwen35", "ab 12", "ab| |1|2");
    expect_split("exaone-moe", "ab cd, 1", "ab cd|,| |1");
    expect_split("jais-2", "a     b", "a|    | b");
    expect_split("tiny_aya", "1234", "1|234");
    /* later regexes of the set split what the first one isolated (as in the reference) */
    expect_split("chameleon", "<sentinel:12>ab", "<|sentinel|:|1|2|>|ab");
    expect_split("youtu", "\xea\xb0\x80\xea\xb0\x81 abc", "\xea\xb0\x80\xea\xb0\x81| abc");
}

/* A very long word: regexes that repeat groups exhaust PCRE2's JIT stack; the split must still work */
static void test_long_word(void) {
    enum { N = 65536 };
    char *a = malloc(N + 1);
    memset(a, 'a', N);
    a[N] = 0;
    const char *pres[] = { "tekken", "gpt-4o", "exaone-moe", "kimi-k2", "llama3", "deepseek-v3" };
    for (int k = 0; k < 6; k++) {
        int flags;
        mr_pretok *p = mr_pretok_new(mr_pretok_lookup(pres[k], &flags));
        char *out = NULL;
        size_t cap = 0, len = 0;
        mr_i32vec lens = { 0 };
        int rc = p ? mr_pretok_split(p, a, N, &out, &cap, &len, &lens) : -1;
        CHECK(rc == 0 && lens.n == 1 && lens.v[0] == N, "%s: rc %d, %zu words (%s)", pres[k], rc, lens.n, rc ? mr_last_error() : "");
        free(out); free(lens.v);
        mr_pretok_free(p);
    }
    free(a);
}

static void test_unknown_pre(void) {
    int flags;
    CHECK(mr_pretok_lookup("no-such-pre", &flags) < 0, "unknown pre accepted");
}

int main(void) {
    RUN(test_gpt2);
    RUN(test_default);
    RUN(test_llama3);
    RUN(test_qwen2);
    RUN(test_starcoder_falcon);
    RUN(test_deepseek);
    RUN(test_tilde_quirk);
    RUN(test_unicode_space);
    RUN(test_unicode15);
    RUN(test_invalid_utf8);
    RUN(test_no_file_sets);
    RUN(test_long_word);
    RUN(test_unknown_pre);
    return t_finish();
}
