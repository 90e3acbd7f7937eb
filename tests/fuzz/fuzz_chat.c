/* libFuzzer target for the chat-template renderer: arbitrary message lists (roles, contents with
 * any bytes, any count) through every template and the detected one of two real models, then the
 * rendered text through the model's tokenizer with special-token parsing (as the server does).
 * Input: byte 0 picks the template (7 = detect), the model and add_assistant; byte 1 the size of a
 * short output buffer; then messages separated by NUL bytes, each a role byte and its content.
 * Checks: sizing answer == written length == strlen, a short buffer gets the NUL-terminated prefix,
 * unknown roles fail with a message, token ids in range. */
#include "moerun.h"
#include "base/base.h"
#include "fuzz_common.h"

#include <limits.h>

static mr_model *models[2];
static const char *tmpls[] = {"chatml", "llama2", "llama3", "phi3", "gemma", "deepseek3", "deepseek4", NULL};
static const char *roles[] = {"system", "user", "assistant", "narrator"}; /* the last is unknown ("tool" needs tool-call templates) */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    static const char *files[2] = {"tiny-qwen3moe.gguf", "tiny-deepseek4.gguf"};
    mr_set_log_level(0);
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/models/%s", fuzz_shared(), files[i]);
        mr_model_params p;
        mr_model_params_default(&p);
        p.n_threads = 1;
        if (!(models[i] = mr_model_load(path, &p))) { fprintf(stderr, "fuzz_chat: %s\n", mr_last_error()); exit(1); }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!models[0]) LLVMFuzzerInitialize(NULL, NULL);
    fuzz_in in = {data, size};
    uint8_t b0 = fuzz_u8(&in), small = fuzz_u8(&in);
    const char *tmpl = tmpls[b0 & 7];
    const mr_model *m = models[(b0 >> 3) & 1];
    int add_assistant = (b0 >> 4) & 1;
    /* messages: copies of the NUL-separated segments (the last one gets its NUL added) */
    char *text = malloc(in.n + 1);
    mr_chat_msg *msgs = calloc(in.n / 2 + 1, sizeof *msgs);
    FUZZ_CHECK(text && msgs);
    memcpy(text, in.p, in.n);
    text[in.n] = 0;
    int n = 0, bogus = 0;
    for (size_t i = 0; i < in.n;) {
        size_t l = strlen(text + i);
        if (l) {
            int r = (unsigned char)text[i] % 4;
            bogus |= r == 3;
            msgs[n].role = roles[r];
            msgs[n].content = text + i + 1;
            n++;
        }
        i += l + 1;
    }
    mr_clear_error();
    int len = mr_chat_render(m, tmpl, msgs, n, add_assistant, NULL, 0);
    if (bogus) {
        FUZZ_CHECK(len == -1 && strstr(mr_last_error(), "unknown role"));
    } else {
        FUZZ_CHECK(len >= 0);
        char *out = malloc((size_t)len + 1);
        FUZZ_CHECK(out);
        FUZZ_CHECK(mr_chat_render(m, tmpl, msgs, n, add_assistant, out, len + 1) == len);
        FUZZ_CHECK(strlen(out) == (size_t)len);
        char shortbuf[256];
        int ssize = small % sizeof shortbuf;
        memset(shortbuf, 'x', sizeof shortbuf);
        FUZZ_CHECK(mr_chat_render(m, tmpl, msgs, n, add_assistant, shortbuf, ssize) == len);
        if (ssize) {
            size_t keep = (size_t)len < (size_t)ssize - 1 ? (size_t)len : (size_t)ssize - 1;
            FUZZ_CHECK(shortbuf[keep] == 0 && !memcmp(shortbuf, out, keep));
        }
        FUZZ_CHECK(shortbuf[ssize] == 'x' || ssize == (int)sizeof shortbuf);
        const mr_tokenizer *t = mr_model_tokenizer(m);
        int need = mr_tokenize(t, out, (size_t)len, 1, 1, NULL, 0);
        FUZZ_CHECK(need != INT_MIN);
        need = need < 0 ? -need : need;
        int32_t *ids = malloc(sizeof *ids * (size_t)(need ? need : 1));
        FUZZ_CHECK(ids && mr_tokenize(t, out, (size_t)len, 1, 1, ids, need) == need);
        for (int i = 0; i < need; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < mr_tokenizer_n_vocab(t));
        free(ids);
        free(out);
    }
    free(msgs);
    free(text);
    return 0;
}
