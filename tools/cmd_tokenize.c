/* moerun tokenize: print the token ids of a text (like llama-tokenize --ids). */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *model, *prompt, *file; int add_bos, parse_special, pieces, ids; } tok_args;

#define TOK_OPTS(a) \
    {.names = "-m, --model", .arg = "MODEL", .help = "GGUF file (a model or a vocabulary-only file)", .kind = MR_OPT_STR, \
     .dst = &(a)->model}, \
    {.names = "-p, --prompt", .arg = "TEXT", .help = "text to tokenize", .kind = MR_OPT_STR, .dst = &(a)->prompt}, \
    {.names = "-f, --file", .arg = "FILE", .help = "read the text from FILE (bytes as they are; - = standard input)", \
     .kind = MR_OPT_STR, .dst = &(a)->file}, \
    {.names = "--no-bos", .help = "do not add the BOS token the model asks for", .kind = MR_OPT_FLAG, .dst = &(a)->add_bos, .ival = 0}, \
    {.names = "--no-parse-special", .help = "do not turn text like <|im_start|> into control tokens", .kind = MR_OPT_FLAG, \
     .dst = &(a)->parse_special, .ival = 0}, \
    {.names = "--pieces", .help = "also print one line per token: id and its text", .kind = MR_OPT_FLAG, .dst = &(a)->pieces, .ival = 1}, \
    {.names = "--ids", .help = "print the ids as [id, id, ...] (the default, as llama-tokenize --ids)", .kind = MR_OPT_FLAG, \
     .dst = &(a)->ids, .ival = 1}

static void tokenize_usage(FILE *f) {
    tok_args a;
    const mr_opt opts[] = {TOK_OPTS(&a)};
    fprintf(f, "usage: moerun tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--no-parse-special] [--pieces]\n\n"
               "Prints the token ids of TEXT as [id, id, ...]. MODEL is any GGUF with tokenizer metadata.\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int cmd_tokenize(int argc, char **argv) {
    tok_args a = {.add_bos = 1, .parse_special = 1};
    const mr_opt opts[] = {TOK_OPTS(&a)};
    int pr_rc = mr_cli_parse("tokenize", opts, MR_NOPTS(opts), tokenize_usage, argc, argv, NULL, 0, NULL);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    const char *model = a.model, *prompt = a.prompt, *file = a.file;
    const int add_bos = a.add_bos, parse_special = a.parse_special, pieces = a.pieces;
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
