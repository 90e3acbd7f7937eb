/* moerun: subcommand dispatcher. */
#include "cli.h"
#include "moerun.h"

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

static int cmp_cmd(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void usage(FILE *f) {
    fprintf(f, "moerun %s: run Mixture-of-Experts GGUF models on CPUs\n\n"
               "usage: moerun COMMAND [options]   (moerun help COMMAND or moerun COMMAND --help for details)\n\ncommands:\n",
            mr_version());
    qsort(cmds, (size_t)n_cmds, sizeof cmds[0], cmp_cmd);
    for (int i = 0; i < n_cmds; i++) fprintf(f, "  %-12s %s\n", cmds[i].name, cmds[i].summary);
    mr_cli_env_help(f);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); fprintf(stderr, "error: no command given\n"); return 1; }
    if (!strcmp(argv[1], "help") && argc > 2) { /* moerun help CMD = moerun CMD --help */
        for (int i = 0; i < n_cmds; i++)
            if (!strcmp(argv[2], cmds[i].name)) {
                char *av[] = {argv[2], "--help", NULL};
                return cmds[i].fn(2, av);
            }
        fprintf(stderr, "error: unknown command '%s' (see moerun --help)\n", argv[2]);
        return 1;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version")) { printf("moerun %s\n", mr_version()); return 0; }
    /* a model file truncated while mapped: one clear line and exit status 74, not a bare SIGBUS */
    if (mr_file_guard_install()) fprintf(stderr, "warning: %s\n", mr_last_error());
    if (mr_cli_env_read()) return 1;
    /* --ep anywhere: join the MPI job (expert parallelism); every rank runs the command, ranks > 0
     * only serve their experts once the model is loaded (mr_cli_load) */
    if (mr_ep_start(&argc, &argv) < 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    for (int i = 0; i < n_cmds; i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            int rc = cmds[i].fn(argc - 1, argv + 1);
            mr_ep_stop();
            return rc;
        }
    mr_ep_stop();
    fprintf(stderr, "error: unknown command '%s' (see moerun --help)\n", argv[1]);
    return 1;
}
