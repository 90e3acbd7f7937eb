/* MOERUN_ISA for the kernel benchmarks: the library reads no environment (tools/cli_env.c does it for
 * moerun), so a benchmark that honours the variable sets the process's ISA itself, first thing. */
#ifndef BENCH_ISA_H
#define BENCH_ISA_H
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>

static inline void bench_isa_from_env(void) {
    const char *v = getenv("MOERUN_ISA");
    if (!v || !*v) return;
    if (mr_set_isa(mr_isa_from_name(v)))
        fprintf(stderr, "warning: MOERUN_ISA=%s is unknown or not supported here; using %s\n", v, mr_isa_name(mr_isa()));
}
#endif
