/* Run-time choice of the kernel instruction set: CPUID on x86-64, the kernel's HWCAP bits on AArch64. */
#include "base/base.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if MR_ARCH_X86
#include <cpuid.h>
#elif MR_ARCH_ARM64
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#endif

/* The process's ISA (-1 until first asked: the best one), and a thread's override while it runs a
 * model's work (mr_isa_enter): a model's evals and the pool jobs they hand out use the model's ISA. */
static _Atomic int isa_process = -1;
static _Thread_local int isa_scope = -1;

#if MR_ARCH_X86
/* F16C via CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c". */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

int mr_cpu_best_isa(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && cpu_has_f16c())
        return MR_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c() &&
        __builtin_cpu_supports("bmi2"))
        return MR_ISA_AVX2;
    return MR_ISA_SCALAR;
}
#elif MR_ARCH_ARM64
/* AdvSIMD is part of every ARMv8-A Linux system, but the bit is checked rather than assumed;
 * ASIMDDP is FEAT_DotProd (SDOT/UDOT, ARMv8.2 and later: Neoverse N1/V1, Graviton 2+, Apple M1+). */
int mr_cpu_best_isa(void) {
    unsigned long hw = getauxval(AT_HWCAP);
    if ((hw & HWCAP_ASIMD) && (hw & HWCAP_ASIMDDP)) return MR_ISA_DOTPROD;
    if (hw & HWCAP_ASIMD) return MR_ISA_NEON;
    return MR_ISA_SCALAR;
}
#else
int mr_cpu_best_isa(void) { return MR_ISA_SCALAR; }
#endif

int mr_isa_lower(int isa) {
    switch (isa) {
    case MR_ISA_AVX512: return MR_ISA_AVX2;
    case MR_ISA_DOTPROD: return MR_ISA_NEON;
    case MR_ISA_AVX2: case MR_ISA_NEON: return MR_ISA_SCALAR;
    default: return -1;
    }
}

int mr_isa_available(int isa) {
    if (isa < 0 || isa >= MR_ISA_COUNT) return 0;
    /* isa is available iff it is on the way down from the best one */
    for (int i = mr_cpu_best_isa(); i >= 0; i = mr_isa_lower(i))
        if (i == isa) return 1;
    return 0;
}

const char *mr_isa_name(int isa) {
    switch (isa) {
    case MR_ISA_SCALAR: return "scalar";
    case MR_ISA_AVX2: return "avx2";
    case MR_ISA_AVX512: return "avx512";
    case MR_ISA_NEON: return "neon";
    case MR_ISA_DOTPROD: return "dotprod";
    default: return "?";
    }
}

int mr_isa_from_name(const char *name) {
    for (int i = 0; i < MR_ISA_COUNT; i++)
        if (name && strcmp(name, mr_isa_name(i)) == 0) return i;
    return -1;
}

int mr_isa(void) {
    if (isa_scope >= 0) return isa_scope;
    int v = atomic_load_explicit(&isa_process, memory_order_relaxed);
    if (v >= 0) return v;
    int unset = -1;
    atomic_compare_exchange_strong(&isa_process, &unset, mr_cpu_best_isa());
    return atomic_load(&isa_process);
}

int mr_set_isa(int isa) {
    if (!mr_isa_available(isa)) return -1;
    atomic_store(&isa_process, isa);
    return 0;
}

int mr_isa_enter(int isa) {
    int prev = isa_scope;
    isa_scope = isa;
    return prev;
}

void mr_isa_leave(int prev) { isa_scope = prev; }

int mr_cpu_physical_cores(void) {
    /* Count distinct (physical id, core id) pairs; fall back to online CPUs. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    int n = 0;
    if (f) {
        char line[256];
        int phys = 0, seen[1024][2], nseen = 0;
        while (fgets(line, sizeof line, f)) {
            int v;
            if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
            else if (sscanf(line, "core id : %d", &v) == 1) {
                int dup = 0;
                for (int i = 0; i < nseen; i++)
                    if (seen[i][0] == phys && seen[i][1] == v) dup = 1;
                if (!dup && nseen < 1024) { seen[nseen][0] = phys; seen[nseen][1] = v; nseen++; }
            }
        }
        fclose(f);
        n = nseen;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = online > 0 ? (int)online : 1;
    return n;
}
