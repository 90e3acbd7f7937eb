/* moerun inspect FILE: print a GGUF model's metadata, tensors and expert/non-expert byte totals. */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <string.h>

#define INSPECT_OPTS(m) \
    {.names = "-m, --model", .arg = "FILE", .help = "the file (as the FILE argument)", .kind = MR_OPT_STR, .dst = (m)}

static void usage(FILE *f) {
    const char *m;
    const mr_opt opts[] = {INSPECT_OPTS(&m)};
    fprintf(f, "usage: moerun inspect FILE.gguf   (or: moerun inspect -m FILE.gguf)\n\n"
               "Prints the GGUF header, the metadata (long arrays abbreviated with their length), the tensor\n"
               "table (name, type, dims, bytes, shard, data offset), totals per type, and the bytes in routed\n"
               "experts (ffn_{gate,up,down}_exps) vs everything else. For a split model give the first shard\n"
               "(NAME-00001-of-0000N.gguf); the other shards are opened from the same directory.\n"
               "Exit status 1 with 'error: ...' on stderr if the file is missing or malformed.\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static int cmd_inspect(int argc, char **argv) {
    const char *model = NULL, *pos[2];
    const mr_opt opts[] = {INSPECT_OPTS(&model)};
    int np = 0;
    int pr_rc = mr_cli_parse("inspect", opts, MR_NOPTS(opts), usage, argc, argv, pos, 2, &np);
    if (pr_rc) return pr_rc > 0 ? 0 : 1;
    if (np + (model != NULL) > 1) { fprintf(stderr, "error: inspect takes one file (see moerun inspect --help)\n"); return 1; }
    const char *path = model ? model : np ? pos[0] : NULL;
    if (!path) { usage(stderr); fprintf(stderr, "error: no file given\n"); return 1; }
    if (mr_inspect(path, stdout) != 0) {
        fflush(stdout);
        fprintf(stderr, "error: %s\n", mr_last_error());
        return 1;
    }
    if (fflush(stdout) != 0) { fprintf(stderr, "error: writing the output failed\n"); return 1; }
    return 0;
}

MR_COMMAND(inspect, "print a GGUF model's metadata, tensors and expert bytes", cmd_inspect)
