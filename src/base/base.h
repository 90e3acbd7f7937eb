/* Base services shared by every module: errors, logging, fp16/bf16, CPU features, timing.
 * Library code reports failures by returning -1/NULL after mr_set_error(); it never exits. */
#ifndef MR_BASE_H
#define MR_BASE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- errors: one message per thread, the most recent failure ---- */
void mr_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *mr_get_error(void);
void mr_clear_error(void);

/* ---- logging (stderr); level 0 = errors only, 1 = info (default), 2 = debug ---- */
extern int mr_log_level;
void mr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- checked arithmetic for sizes from untrusted input: return 0 on overflow ---- */
static inline int mr_mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int mr_add_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* ---- fp16 / bf16 (bit-exact with ggml: round to nearest even) ---- */
static inline uint32_t mr_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float mr_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float mr_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return mr_bits_f32(sign | 0x7f800000 | (m << 13) | (m ? 0x400000u : 0)); /* NaN comes out quiet, as in ggml */
    if (e != 0) return mr_bits_f32(sign | ((e + 112) << 23) | (m << 13));
    if (m == 0) return mr_bits_f32(sign);
    /* subnormal half: m * 2^-24, exact in float */
    float v = (float)m * (1.0f / 16777216.0f);
    return sign ? -v : v;
}

static inline uint16_t mr_fp32_to_fp16(float f) {
    uint32_t x = mr_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffff;
    if (x > 0x7f800000) return sign | 0x7e00;              /* NaN -> quiet NaN */
    if (x >= 0x38800000) {                                  /* normal half range or overflow */
        uint32_t a = x - 0x38000000;                        /* re-bias exponent 127 -> 15 */
        uint32_t h = (a + 0x0fff + ((a >> 13) & 1)) >> 13;  /* round mantissa to nearest even */
        return sign | (uint16_t)(h >= 0x7c00 ? 0x7c00 : h);
    }
    uint32_t E = x >> 23;
    if (E < 102) return sign;                               /* < 2^-25: rounds to zero */
    uint32_t mf = (x & 0x7fffff) | 0x800000, s = 126 - E;   /* value / 2^-24 = mf >> s */
    uint32_t q = mf >> s, rem = mf & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
}

static inline float mr_bf16_to_fp32(uint16_t h) { return mr_bits_f32((uint32_t)h << 16); }
static inline uint16_t mr_fp32_to_bf16(float f) {
    uint32_t u = mr_f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64); /* quiet NaN */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* ---- CPU features and the kernel instruction set in use ----
 * Two families: x86-64 (avx2 < avx512) and AArch64 (neon < dotprod: NEON plus SDOT/UDOT, ARMv8.2
 * FEAT_DotProd). A build holds the kernel files of its target's family only (Makefile), so code that
 * calls an ISA's kernels directly sits under MR_ARCH_X86 / MR_ARCH_ARM64. Within a family an ISA's
 * tables fall back to the next lower one (mr_isa_lower), then to the scalar references. */
#if defined(__x86_64__)
#define MR_ARCH_X86 1
#elif defined(__aarch64__)
#define MR_ARCH_ARM64 1
#endif
enum mr_isa { MR_ISA_SCALAR = 0, MR_ISA_AVX2 = 1, MR_ISA_AVX512 = 2, MR_ISA_NEON = 3, MR_ISA_DOTPROD = 4, MR_ISA_COUNT };
int mr_cpu_best_isa(void);             /* best ISA this CPU, OS and build support */
int mr_isa_available(int isa);         /* 1 if this CPU, OS and build can run the ISA's kernels */
int mr_isa_lower(int isa);             /* next ISA down the same family (scalar at the bottom); -1 for scalar */
int mr_isa(void);                      /* ISA in use: the thread's (mr_isa_enter), else the process's */
int mr_set_isa(int isa);               /* the process's ISA (best until set); -1 if unsupported here */
/* This thread runs kernels of ISA isa (-1: the process's) until mr_isa_leave(the returned value):
 * around a model's work (its ISA, mr_model_params.isa); pool jobs run in the ISA of the thread that
 * hands them out. */
int mr_isa_enter(int isa);
void mr_isa_leave(int prev);
const char *mr_isa_name(int isa);
int mr_isa_from_name(const char *name); /* -1 if unknown */
int mr_cpu_physical_cores(void);
/* Threads by default: physical cores, at most the CPUs of the affinity mask and the cgroup's CPU
 * quota (rounded up). src/base/cgroup.c */
int mr_cpu_default_threads(void);
/* cgroup v1/v2 limits on the way to the root: bytes left under the tightest memory limit, not
 * counting reclaimable page cache (UINT64_MAX without a limit); CPUs of the tightest CPU quota (0
 * without one). */
uint64_t mr_cgroup_mem_room(void);
double mr_cgroup_cpu_quota(void);
/* tests: read a fake tree (root replaces /sys/fs/cgroup, self /proc/self/cgroup; NULL: the
 * system's); the strings must outlive their use */
void mr_cgroup_set_paths(const char *root, const char *self);

/* ---- "12.5 MiB", "1.20 GiB", "3.0 KiB" into buf ---- */
void mr_format_bytes(char *buf, size_t n, double bytes);

/* ---- time ---- */
double mr_now(void);                   /* monotonic seconds */

/* ---- machine measurements (measure.c; `moerun plan`, bench/) ----
 * mr_dram_read_pass: one read of every byte of buf (bytes a multiple of 128), split over the pool
 * (NULL: the calling thread); the caller times it. mr_disk_read_rate: the device's rate under a file
 * as the pager reads it: qd threads each doing one blocking O_DIRECT pread of `size` bytes (rounded up
 * to 4 KiB) at a time, at random 4 KiB-aligned offsets (seq: one sequential sweep), about `total`
 * bytes in all; *gbs in 1e9 bytes/s, *ms_per_read (may be NULL) per thread. -1 with the error set
 * (no O_DIRECT, a file smaller than two reads, a failed read). */
struct mr_pool;
void mr_dram_read_pass(struct mr_pool *pool, const void *buf, size_t bytes);
int mr_disk_read_rate(const char *path, uint64_t size, int qd, uint64_t total, int seq, unsigned seed,
                      double *gbs, double *ms_per_read);

/* ---- heap allocation ----
 * Every allocation of the library goes through these (free with free() / mr_aligned_free), so a
 * test can make any one of them fail, as SQLite's tests do: mr_alloc_fail_at(n, sticky) resets
 * the counter and makes the n-th allocation from then on return NULL (sticky: every later one
 * too; n 0: none). The environment MOERUN_ALLOC_FAIL=N (or Ns for sticky) sets the same switch
 * for a whole process (CLI, server); MOERUN_ALLOC_FAIL_TRACE=1 prints the stack of each injected
 * failure. Other kinds of allocation (anonymous mmap) ask
 * mr_alloc_inject(), which counts one allocation and says whether it must fail. */
void *mr_malloc(size_t n);
void *mr_calloc(size_t n, size_t size);
void *mr_realloc(void *p, size_t n);                /* NULL: p unchanged, as realloc */
char *mr_strdup(const char *s);
void *mr_aligned_alloc(size_t align, size_t size); /* not zeroed; NULL on failure */
void mr_aligned_free(void *p);
int mr_alloc_inject(void);
/* Big buffers (the pager's arena, repacked copies) in their own anonymous mapping; from 2 MiB up its
 * start is aligned to 2 MiB and transparent huge pages are requested with madvise where the kernel has
 * them (/sys/kernel/mm/transparent_hugepage/enabled not [never]; else 4 KiB pages, nothing else changes),
 * so gigabytes cost thousands of page faults instead of millions. prefault: every page is faulted in
 * now (MADV_POPULATE_WRITE, or one write per 4 KiB where the kernel lacks it) instead of when first
 * used; MR_BIG_NO_HUGE: no huge pages asked for (where populating huge pages means direct compaction,
 * 4 KiB pages faulted in at once cost less kernel time). *huge (may be NULL) = 1 if huge pages were
 * requested. NULL on failure (no error set); free with mr_big_free and the same bytes. Counts as one
 * allocation for mr_alloc_inject. */
enum { MR_BIG_PREFAULT = 1, MR_BIG_NO_HUGE = 2 };
void *mr_big_alloc(size_t bytes, int flags, int *huge);
void mr_big_free(void *p, size_t bytes);
int mr_thp_available(void); /* 1 if madvise(MADV_HUGEPAGE) can give transparent huge pages */
void mr_alloc_fail_at(long n, int sticky);
long mr_alloc_count(void);   /* allocations counted since mr_alloc_fail_at (counted only while armed) */
long mr_alloc_failed(void);  /* of those, made to fail */

/* ---- scratch: buffers of an eval carved from one block per session ----
 * The block grows to the largest batch seen, so an eval allocates nothing once its session has seen
 * a batch that large. Carving loop (the takes are repeated once after the block grew):
 *     int r;
 *     do { mr_scratch_begin(s); x = mr_scratch_take(s, bytes_x); y = mr_scratch_take(s, bytes_y); }
 *     while ((r = mr_scratch_end(s)) == 1);
 *     if (r < 0) return -1;                  (error set: out of memory)
 * Buffers are 64-byte aligned, uninitialised, valid until the next begin.
 * Arena use, for buffers whose sizes are known only one after the other (the expert engine's plan):
 *     mr_scratch_reset(s);  p = mr_scratch_alloc(s, bytes);  q = mr_scratch_alloc(s, ...); ...
 * A buffer comes from the block while it has room, else from an extra allocation kept until the
 * next reset, which replaces block and extras by one block of their total: once a scratch has
 * served a call that large, the same call allocates nothing. One thread at a time. */
typedef struct mr_scratch_extra mr_scratch_extra;
typedef struct { void *p; size_t cap, used, need; mr_scratch_extra *extra; } mr_scratch;
void mr_scratch_begin(mr_scratch *s);
void *mr_scratch_take(mr_scratch *s, size_t bytes); /* NULL until the block is large enough */
int mr_scratch_end(mr_scratch *s);                  /* 0 all taken, 1 grown (take again), -1 no memory */
void mr_scratch_reset(mr_scratch *s);               /* arena: forget every buffer (see above) */
void *mr_scratch_alloc(mr_scratch *s, size_t bytes); /* arena: a buffer, or NULL (error set) */
void mr_scratch_free(mr_scratch *s);

#endif
