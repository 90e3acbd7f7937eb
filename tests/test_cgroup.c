/* cgroup limits (src/base/cgroup.c) on fake trees (mr_cgroup_set_paths): memory
 * room and CPU quota for v1 and v2, the tightest level on the way up wins, reclaimable page cache is
 * not counted as used; --ram-budget auto sizes the arena from the room. */
#include "test.h"
#include "moerun.h"
#include "base/base.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define GiB (1ull << 30)
#define MiB (1ull << 20)
static char root[256], self[300];

static void put(const char *rel, const char *text) {
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    /* mkdir -p of the file's directory */
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + strlen(root) + 1; (s = strchr(s, '/')); s++) { *s = 0; mkdir(dir, 0755); *s = '/'; }
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    if (f) { fputs(text, f); fclose(f); }
}

static void set_self(const char *text) {
    FILE *f = fopen(self, "w");
    CHECK(f, "cannot write %s", self);
    if (f) { fputs(text, f); fclose(f); }
}

static void fresh(const char *name) {
    snprintf(root, sizeof root, "/tmp/mr_test_cgroup_%d_%s", (int)getpid(), name);
    snprintf(self, sizeof self, "%s.self", root);
    mkdir(root, 0755);
    mr_cgroup_set_paths(root, self);
}

static void cleanup(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, self);
    CHECK(system(cmd) == 0, "cleanup");
    mr_cgroup_set_paths(NULL, NULL);
}

static void test_none(void) {
    fresh("none");
    set_self("0::/\n");
    CHECK(mr_cgroup_mem_room() == UINT64_MAX, "no files: no limit");
    CHECK(mr_cgroup_cpu_quota() == 0, "no files: no quota");
    int n = mr_cpu_default_threads();
    CHECK(n >= 1 && n <= mr_cpu_physical_cores(), "threads %d", n);
    cleanup();
}

static void test_v1(void) {
    fresh("v1");
    set_self("12:pids:/a/b\n4:memory:/a/b\n3:cpu,cpuacct:/a/b\n");
    put("memory/memory.limit_in_bytes", "9223372036854771712\n"); /* the root: no limit */
    put("memory/a/b/memory.limit_in_bytes", "12884901888\n");    /* 12 GiB */
    put("memory/a/b/memory.usage_in_bytes", "1073741824\n");     /* 1 GiB used, half of it page cache */
    put("memory/a/b/memory.stat", "cache 600000000\ntotal_inactive_file 536870912\ntotal_rss 1\n");
    CHECK(mr_cgroup_mem_room() == 12 * GiB - GiB / 2, "room %llu", (unsigned long long)mr_cgroup_mem_room());
    put("memory/a/memory.limit_in_bytes", "8589934592\n"); /* a tighter parent: 8 GiB with 2 GiB used */
    put("memory/a/memory.usage_in_bytes", "2147483648\n");
    CHECK(mr_cgroup_mem_room() == 6 * GiB, "parent: room %llu", (unsigned long long)mr_cgroup_mem_room());
    put("memory/a/memory.usage_in_bytes", "9663676416\n"); /* over its limit: no room */
    CHECK(mr_cgroup_mem_room() == 0, "over the limit: room %llu", (unsigned long long)mr_cgroup_mem_room());
    put("cpu,cpuacct/a/b/cpu.cfs_quota_us", "-1\n");
    put("cpu,cpuacct/a/b/cpu.cfs_period_us", "100000\n");
    CHECK(mr_cgroup_cpu_quota() == 0, "quota -1 is none: %.2f", mr_cgroup_cpu_quota());
    put("cpu,cpuacct/a/cpu.cfs_quota_us", "150000\n");
    put("cpu,cpuacct/a/cpu.cfs_period_us", "100000\n");
    CHECK(mr_cgroup_cpu_quota() == 1.5, "quota %.2f", mr_cgroup_cpu_quota());
    int n = mr_cpu_default_threads();
    CHECK(n >= 1 && n <= 2, "threads under a 1.5 CPU quota: %d", n);
    put("cpu,cpuacct/a/cpu.cfs_quota_us", "50000\n");
    CHECK(mr_cpu_default_threads() == 1, "threads under a 0.5 CPU quota: %d", mr_cpu_default_threads());
    cleanup();
}

static void test_v2(void) {
    fresh("v2");
    set_self("0::/x/y\n");
    put("x/y/memory.max", "max\n");
    put("x/y/memory.current", "5\n");
    put("x/memory.max", "12884901888\n");
    put("x/memory.current", "1073741824\n");
    put("x/memory.stat", "anon 1\ninactive_file 0\n");
    CHECK(mr_cgroup_mem_room() == 11 * GiB, "room %llu", (unsigned long long)mr_cgroup_mem_room());
    put("x/y/cpu.max", "max 100000\n");
    put("x/cpu.max", "300000 100000\n");
    CHECK(mr_cgroup_cpu_quota() == 3, "quota %.2f", mr_cgroup_cpu_quota());
    /* hybrid layout: v2 under ROOT/unified */
    set_self("0::/z\n");
    put("unified/z/memory.max", "1073741824\n");
    CHECK(mr_cgroup_mem_room() == GiB, "unified: room %llu", (unsigned long long)mr_cgroup_mem_room());
    put("unified/z/memory.max", "junk\n");
    CHECK(mr_cgroup_mem_room() == UINT64_MAX, "malformed: no limit");
    cleanup();
}

/* --ram-budget auto: the arena is the room minus dense weights, KV, 256 MiB scratch and the margin */
static void test_auto(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/mr_test_cgroup_%d.gguf", (int)getpid());
    mr_gguf_writer *w = mr_gguf_writer_new();
    mr_gguf_writer_set_str(w, "general.architecture", "qwen3moe");
    mr_gguf_writer_set_u32(w, "qwen3moe.expert_used_count", 2);
    static float dense[64 * 8], ex[64 * 64 * 8];
    int64_t nd[2] = {64, 8}, ne[3] = {64, 64, 8};
    mr_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", MR_TYPE_F32, 2, nd, dense);
    mr_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight", MR_TYPE_F32, 3, ne, ex);
    CHECK(mr_gguf_writer_write(w, path, 1) == 0, "%s", mr_last_error());
    mr_gguf_writer_free(w);
    mr_pager_model_info mi;
    CHECK(mr_pager_model_sizes(path, &mi) == 0 && mi.expert_bytes == sizeof ex, "%s", mr_last_error());
    uint64_t dense_b = mi.total_bytes - mi.expert_bytes, kv = mi.kv_bytes_per_token * 64;
    uint64_t want = 3 * mi.expert_bytes / 4; /* 6 of the 8 experts */
    fresh("auto");
    set_self("0::/\n");
    char lim[64];
    /* room R, margin max(R / 10, 512 MiB) = 512 MiB for R < 5 GiB */
    snprintf(lim, sizeof lim, "%llu\n", (unsigned long long)(dense_b + kv + 256 * MiB + 512 * MiB + want));
    put("memory.max", lim);
    uint64_t b = 1;
    CHECK(mr_ram_budget_parse("auto", path, 64, &b) == 0, "%s", mr_last_error());
    CHECK(b == want, "budget %llu, want %llu", (unsigned long long)b, (unsigned long long)want);
    snprintf(lim, sizeof lim, "%llu\n", (unsigned long long)(dense_b + kv + 768 * MiB + 100));
    put("memory.max", lim);
    CHECK(mr_ram_budget_parse("auto", path, 64, &b) == -1 && strstr(mr_last_error(), "minimum"),
          "room below the floor: %s", mr_last_error());
    put("memory.max", "max\n");
    CHECK(mr_ram_budget_parse("auto", path, 64, &b) == 0 && b == 0, "no limit: all experts fit, budget %llu",
          (unsigned long long)b);
    cleanup();
    remove(path);
}

int main(void) {
    RUN(test_none);
    RUN(test_v1);
    RUN(test_v2);
    RUN(test_auto);
    return t_finish();
}
