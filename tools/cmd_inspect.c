/* moerun inspect FILE: print a GGUF model's metadata, tensors and expert/non-expert byte totals. */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: moerun inspect FILE.gguf\n\n"
               "Prints the GGUF header, the metadata (long arrays abbreviated with their length), the tensor\n"
               "table (name, type, dims, bytes, shard, data offset), totals per type, and the bytes in routed\n"
               "experts (ffn_{gate,up,down}_exps) vs everything else. For a split model give the first shard\n"
               "(NAME-00001-of-0000N.gguf); the other shards are opened from the same directory.\n"
               "Exit status 1 with 'error: ...' on stderr if the file is missing or malformed.\n");
}

static int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        if (argv[i][0] == '-' && argv[i][1]) { fprintf(stderr, "error: unknown option '%s' (see moerun inspect --help)\n", argv[i]); return 1; }
        if (path) { fprintf(stderr, "error: inspect takes one file (see moerun inspect --help)\n"); return 1; }
        path = argv[i];
    }
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
