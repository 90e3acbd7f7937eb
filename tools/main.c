/* moerun: subcommand dispatcher. */
#include "cli.h"
#include "moerun.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MR_MAX_COMMANDS 64
static struct { const char *name, *summary; mr_cmd_fn fn; } cmds[MR_MAX_COMMANDS];
static int n_cmds;

void mr_cli_register(const char *name, const char *summary, mr_cmd_fn fn) {
    if (n_cmds < MR_MAX_COMMANDS) {
        cmds[n_cmds].name = name;
        cmds[n_cmds].summary = summary;
        cmds[n_cmds].fn = fn;
        n_cmds++;
    }
}

int mr_cli_parse_size(const char *s, unsigned long long *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'I') end++;
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end) return -1;
    *out = (unsigned long long)(v * mul);
    return 0;
}

static int cmp_cmd(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void usage(FILE *f) {
    fprintf(f, "moerun %s: run Mixture-of-Experts GGUF models on CPUs\n\n"
               "usage: moerun COMMAND [options]   (moerun COMMAND --help for details)\n\ncommands:\n",
            mr_version());
    qsort(cmds, (size_t)n_cmds, sizeof cmds[0], cmp_cmd);
    for (int i = 0; i < n_cmds; i++) fprintf(f, "  %-12s %s\n", cmds[i].name, cmds[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 1; }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version")) { printf("moerun %s\n", mr_version()); return 0; }
    for (int i = 0; i < n_cmds; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "error: unknown command '%s' (see moerun --help)\n", argv[1]);
    return 1;
}
