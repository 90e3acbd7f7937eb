/* libFuzzer target for the tokenizers: arbitrary bytes through every vocabulary in ../shared/vocab
 * (SPM and each byte-level BPE pre-tokenizer), with and without special-token parsing and BOS/EOS.
 * Input: byte 0 picks the vocabulary, byte 1 the flags, the rest is the text. Checks: every id in
 * range, the "-needed" size answer is exact, detokenizing (and each token's piece) succeeds within
 * the size it asked for (never longer after its clean-up of spaces). */
#include "moerun.h"
#include "fuzz_common.h"

#include <dirent.h>
#include <limits.h>

#define MAX_VOCABS 32
static mr_tokenizer *vocab[MAX_VOCABS];
static int n_vocab_files;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/vocab", fuzz_shared());
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "fuzz_tokenizer: no %s (set MR_SHARED)\n", dir); exit(1); }
    char *names[MAX_VOCABS];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < MAX_VOCABS;) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str); /* the same input picks the same vocabulary everywhere */
    mr_set_log_level(0);
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (!(vocab[n_vocab_files] = mr_tokenizer_load(path))) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, mr_last_error());
            exit(1);
        }
        n_vocab_files++;
        free(names[i]);
    }
    if (!n_vocab_files) { fprintf(stderr, "fuzz_tokenizer: no vocabularies in %s\n", dir); exit(1); }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!n_vocab_files) LLVMFuzzerInitialize(NULL, NULL);
    fuzz_in in = {data, size};
    const mr_tokenizer *t = vocab[fuzz_u8(&in) % n_vocab_files];
    uint8_t flags = fuzz_u8(&in);
    int add_special = flags & 1, parse_special = (flags >> 1) & 1;
    /* an exact-size copy of the text, so reading past it is caught */
    char *text = malloc(in.n ? in.n : 1);
    if (!text) return 0;
    memcpy(text, in.p, in.n);
    const int32_t nv = mr_tokenizer_n_vocab(t);

    int need = mr_tokenize(t, text, in.n, add_special, parse_special, NULL, 0);
    FUZZ_CHECK(need != INT_MIN);
    need = need < 0 ? -need : need;
    int32_t *ids = malloc(sizeof *ids * (size_t)(need ? need : 1));
    FUZZ_CHECK(ids);
    int n = mr_tokenize(t, text, in.n, add_special, parse_special, ids, need);
    FUZZ_CHECK(n == need);
    for (int i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < nv);

    for (int special = 0; special < 2; special++) {
        char piece[8];
        for (int i = 0; i < n; i++) {
            int k = mr_token_to_piece(t, ids[i], piece, sizeof piece, special);
            FUZZ_CHECK(k != INT_MIN);
            if (k < 0) {
                char *big = malloc((size_t)-k);
                FUZZ_CHECK(big && mr_token_to_piece(t, ids[i], big, -k, special) == -k);
                free(big);
            }
        }
        int dn = mr_detokenize(t, ids, n, NULL, 0, flags >> 2 & 1, special);
        FUZZ_CHECK(dn != INT_MIN);
        int size_needed = dn < 0 ? -dn : dn;
        char *out = malloc((size_t)size_needed + 1);
        FUZZ_CHECK(out);
        /* the clean-up of spaces after the sizing pass may only shorten the text */
        int got = mr_detokenize(t, ids, n, out, size_needed, flags >> 2 & 1, special);
        FUZZ_CHECK(got >= 0 && got <= size_needed);
        free(out);
    }
    free(ids);
    free(text);
    return 0;
}
