/* The environment variables of the CLI: read once, when moerun starts (mr_cli_env_read), into engine
 * settings that every model a command loads gets (mr_cli_env_apply); the library itself reads none
 * (except the allocation-failure injector for tests, src/base/base.c). moerun --help lists them
 * (mr_cli_env_help). Options given on the command line come after and win.
 *
 *   MOERUN_ISA=scalar|avx2|avx512|neon|dotprod   kernels (default: the best this CPU has; an unknown or
 *                                    unavailable one is a warning and the best is used)
 *   MOERUN_NO_REPACK (set)           no repacked weight copies (mr_model_params.no_repack)
 *   MOERUN_DS4_PREFILL_F32=1         deepseek4: the reference's asymmetric prefill precision
 *   MOERUN_PAGER_POLICY=NAME         expert-cache policy (mr_pager_params.policy; docs/PAGING.md)
 *   MOERUN_PAGER_IO_THREADS=N        reads in flight, 1..64 (default 8)
 *   MOERUN_PAGER_CHUNK=SIZE          bytes per read job: 1M (default), 512K, ...; 0 = one per slice
 *   MOERUN_PAGER_NO_DIRECT=1         buffered reads instead of O_DIRECT
 *   MOERUN_PAGER_GUESS=0             no read-ahead of the next layer's guessed experts
 *   MOERUN_PAGER_HUGE=0 / 1          the arena faulted in as used / on transparent huge pages (default:
 *                                    4 KiB pages pre-faulted at load)
 *   MOERUN_PAGER_FAULT=eio:N|short:N|slow:MS   tests: the N-th read fails / is short; slow reads
 *   MOERUN_API_KEY, MOERUN_ADMIN_KEY the server's keys (tools/cmd_server.c; docs/SERVER.md)
 *   MOERUN_ALLOC_FAIL=N[s], MOERUN_ALLOC_FAIL_TRACE=1   tests: allocation failures (docs/RELIABILITY.md) */
#include "cli.h"
#include "moerun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    mr_pager_params pager;
    int no_repack, ds4_prefill_f32;
} env;

/* set and not empty */
static const char *env_get(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* set, not empty and not "0" */
static int env_on(const char *name) {
    const char *v = env_get(name);
    return v && strcmp(v, "0") != 0;
}

static void read_isa(void) {
    const char *v = env_get("MOERUN_ISA");
    if (!v) return;
    const int best = mr_kernel_isa_current(), isa = mr_kernel_isa_from_name(v);
    if (isa < 0)
        fprintf(stderr, "warning: MOERUN_ISA=%s is not one of scalar|avx2|avx512|neon|dotprod; using %s\n", v,
                mr_kernel_isa_name(best));
    else if (!mr_kernel_isa_available(isa))
        fprintf(stderr, "warning: MOERUN_ISA=%s is not supported by this CPU; using %s\n", v, mr_kernel_isa_name(best));
    else
        mr_kernel_isa_set(isa);
}

/* MOERUN_PAGER_IO_THREADS=N and MOERUN_PAGER_CHUNK=SIZE (1M, 512K, 4096: rounded up to pages by the
 * pager; 0 = one read job per slice). The job queue has room for every job of every slot (about 80
 * bytes per chunk), so very small chunks cost memory: 4K exists for the tests. */
static int read_pager_io(void) {
    const char *t = env_get("MOERUN_PAGER_IO_THREADS"), *c = env_get("MOERUN_PAGER_CHUNK");
    char *end = NULL;
    if (t) {
        long n = strtol(t, &end, 10);
        if (!end || *end || n < 1 || n > 64) {
            fprintf(stderr, "error: MOERUN_PAGER_IO_THREADS='%s': expected 1..64\n", t);
            return -1;
        }
        env.pager.io_threads = (int)n;
    }
    if (c) {
        unsigned long long v = strtoull(c, &end, 10);
        int64_t mul = 1;
        if (end && (*end == 'K' || *end == 'k')) { mul = 1024; end++; }
        else if (end && (*end == 'M' || *end == 'm')) { mul = 1024 * 1024; end++; }
        if (!end || *end || end == c || strchr(c, '-') || v > (1ull << 20)) {
            fprintf(stderr, "error: MOERUN_PAGER_CHUNK='%s': expected a size such as 1M or 512K, or 0 (whole slices)\n", c);
            return -1;
        }
        env.pager.chunk = v ? (int64_t)v * mul : -1;
    }
    return 0;
}

int mr_cli_env_read(void) {
    read_isa();
    env.no_repack = getenv("MOERUN_NO_REPACK") != NULL; /* set at all, as it always was */
    const char *f32 = env_get("MOERUN_DS4_PREFILL_F32");
    env.ds4_prefill_f32 = f32 && atoi(f32) != 0;
    env.pager.policy = env_get("MOERUN_PAGER_POLICY");
    env.pager.fault = env_get("MOERUN_PAGER_FAULT");
    env.pager.no_direct = env_on("MOERUN_PAGER_NO_DIRECT");
    const char *guess = env_get("MOERUN_PAGER_GUESS");
    env.pager.no_guess = guess && !strcmp(guess, "0");
    const char *huge = env_get("MOERUN_PAGER_HUGE");
    env.pager.no_huge = huge && !strcmp(huge, "0");
    env.pager.huge = huge && !strcmp(huge, "1");
    return read_pager_io();
}

void mr_cli_env_apply(mr_model_params *mp) {
    mp->pager = env.pager;
    mp->no_repack = env.no_repack;
    mp->ds4_prefill_f32 = env.ds4_prefill_f32;
}

void mr_cli_env_help(FILE *f) {
    fprintf(f, "\nenvironment (read once at start):\n"
               "  MOERUN_ISA=NAME          kernels: scalar, avx2, avx512, neon or dotprod (default: the best here)\n"
               "  MOERUN_NO_REPACK=1       no repacked weight copies (same logits, the file's layout)\n"
               "  MOERUN_DS4_PREFILL_F32=1 deepseek4: the reference's F32 keys in prefill (diagnostics)\n"
               "  MOERUN_PAGER_POLICY=P    expert cache policy with --ram-budget (default hot; docs/PAGING.md)\n"
               "  MOERUN_PAGER_IO_THREADS=N  reads in flight, 1..64 (default 8)\n"
               "  MOERUN_PAGER_CHUNK=SIZE  bytes per read, e.g. 512K (default 1M; 0: one read per expert slice)\n"
               "  MOERUN_PAGER_NO_DIRECT=1 buffered reads instead of O_DIRECT\n"
               "  MOERUN_PAGER_GUESS=0     no read-ahead of the next layer's guessed experts\n"
               "  MOERUN_PAGER_HUGE=0|1    the expert arena faulted in as used / on huge pages, pre-faulted (default:\n"
               "                           4 KiB pages, pre-faulted)\n"
               "  MOERUN_PAGER_FAULT=F     tests: eio:N or short:N (the N-th read fails), slow:MS (slow reads)\n"
               "  MOERUN_API_KEY, MOERUN_ADMIN_KEY  the server's keys (moerun server --help)\n"
               "  MOERUN_ALLOC_FAIL=N[s]   tests: the N-th allocation fails (s: and all after; docs/RELIABILITY.md)\n");
}
