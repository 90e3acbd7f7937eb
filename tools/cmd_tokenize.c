/* moerun tokenize: print the token ids of a text (like llama-tokenize --ids). */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: moerun tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--no-parse-special] [--pieces]\n\n"
            "Prints the token ids of TEXT as [id, id, ...]. MODEL is any GGUF with tokenizer metadata.\n"
            "  -m MODEL             GGUF file (a model or a vocabulary-only file)\n"
            "  -p TEXT              text to tokenize\n"
            "  -f FILE              read the text from FILE (bytes as they are)\n"
            "  --no-bos             do not add the BOS token the model asks for\n"
            "  --no-parse-special   do not turn text like <|im_start|> into control tokens\n"
            "  --pieces             also print one line per token: id and its text\n");
}

static int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int add_bos = 1, parse_special = 1, pieces = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { tokenize_usage(stdout); return 0; }
        if (!strcmp(a, "--no-bos")) { add_bos = 0; continue; }
        if (!strcmp(a, "--no-parse-special")) { parse_special = 0; continue; }
        if (!strcmp(a, "--pieces")) { pieces = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "error: unknown or incomplete option '%s' (see moerun tokenize --help)\n", a); return 1; }
        const char *v = argv[++i];
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-p")) prompt = v;
        else if (!strcmp(a, "-f")) file = v;
        else { fprintf(stderr, "error: unknown option '%s' (see moerun tokenize --help)\n", a); return 1; }
    }
    if (!model) { fprintf(stderr, "error: -m MODEL is required\n"); return 1; }
    if (!prompt == !file) { fprintf(stderr, "error: give exactly one of -p TEXT and -f FILE\n"); return 1; }
    size_t len = 0;
    char *text = NULL;
    if (file) {
        text = mr_cli_read_file(file, &len);
        if (!text) { fprintf(stderr, "error: cannot read %s\n", file); return 1; }
    } else {
        len = strlen(prompt);
    }
    mr_tokenizer *t = mr_tokenizer_load(model);
    if (!t) { fprintf(stderr, "error: %s\n", mr_last_error()); free(text); return 1; }
    const char *src = text ? text : prompt;
    int n = mr_tokenize(t, src, len, add_bos, parse_special, NULL, 0);
    int32_t *ids = NULL;
    if (n < 0 && n != INT_MIN) {
        ids = malloc(sizeof *ids * (size_t)-n);
        if (!ids) { fprintf(stderr, "error: out of memory\n"); mr_tokenizer_free(t); free(text); return 1; }
        n = mr_tokenize(t, src, len, add_bos, parse_special, ids, -n);
    }
    if (n == INT_MIN || n < 0) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        free(ids); mr_tokenizer_free(t); free(text);
        return 1;
    }
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    printf("]\n");
    if (pieces) {
        for (int i = 0; i < n; i++) {
            char buf[256];
            int k = mr_token_to_piece(t, ids[i], buf, (int)sizeof buf, 1);
            if (k < 0) k = 0;
            printf("%6d -> '%.*s'\n", ids[i], k, buf);
        }
    }
    free(ids);
    mr_tokenizer_free(t);
    free(text);
    return 0;
}

MR_COMMAND(tokenize, "print the token ids of a text", cmd_tokenize)
