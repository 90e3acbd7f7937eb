/* Limits of the control group the process runs in (cgroup v1 and v2): memory room for
 * --ram-budget auto and the CPU quota / affinity for the default thread count.
 *
 * /proc/self/cgroup lines are "ID:CONTROLLERS:PATH": v2 is "0::PATH" (files under
 * ROOT/PATH or ROOT/unified/PATH), v1 has "memory" or "cpu" among the comma-separated controllers
 * (files under ROOT/memory/PATH, ROOT/cpu/PATH or ROOT/cpu,cpuacct/PATH). Limits apply at every level
 * up to the root, so each level on the way up is read and the tightest wins. ROOT is /sys/fs/cgroup;
 * mr_cgroup_set_paths (a directory, and a file in /proc/self/cgroup's format) replaces both for
 * tests. Anything unreadable or malformed counts as "no limit": these only ever lower a default. */
#include "base/base.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_LIMIT UINT64_MAX

static _Atomic(const char *) cg_root_path, cg_self_path; /* NULL: the system's */

void mr_cgroup_set_paths(const char *root, const char *self) {
    atomic_store(&cg_root_path, root);
    atomic_store(&cg_self_path, self);
}

static const char *cg_root(void) {
    const char *r = atomic_load(&cg_root_path);
    return r && *r ? r : "/sys/fs/cgroup";
}

/* first number of DIR/NAME; "max" = NO_LIMIT; 0 if absent or not a number */
static int read_u64(const char *dir, const char *name, uint64_t *v) {
    char path[1024], buf[64];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    if (!strncmp(buf, "max", 3)) { *v = NO_LIMIT; return 0; }
    char *end;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf) return -1;
    *v = (uint64_t)x;
    return 0;
}

/* value of KEY in DIR/memory.stat (0 if absent) */
static uint64_t stat_key(const char *dir, const char *key) {
    char path[1024], line[256];
    if ((size_t)snprintf(path, sizeof path, "%s/memory.stat", dir) >= sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t kl = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ' ') { v = strtoull(line + kl + 1, NULL, 10); break; }
    fclose(f);
    return v;
}

/* the PATH of the v2 line (v1 = 0) or of the v1 line naming controller `ctl` (v1 = 1) */
static int self_path(int v1, const char *ctl, char *out, size_t n) {
    const char *p = atomic_load(&cg_self_path);
    FILE *f = fopen(p && *p ? p : "/proc/self/cgroup", "r");
    if (!f) return -1;
    char line[1024];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        line[strcspn(line, "\n")] = 0;
        *c1 = *c2 = 0;
        const char *ctls = c1 + 1, *path = c2 + 1;
        int match = 0;
        if (!v1) match = !strcmp(line, "0") && !*ctls;
        else
            for (const char *t = ctls; *t && !match;) {
                size_t len = strcspn(t, ",");
                match = len == strlen(ctl) && !strncmp(t, ctl, len);
                t += len + (t[len] == ',');
            }
        if (match && strlen(path) < n && path[0] == '/') { strcpy(out, path); found = 0; }
    }
    fclose(f);
    return found;
}

/* calls level(dir) for BASE/PATH and each parent up to BASE; returns the levels visited */
static int walk(const char *base, const char *path, void (*level)(const char *dir, void *arg), void *arg) {
    char dir[1024];
    if ((size_t)snprintf(dir, sizeof dir, "%s%s", base, path) >= sizeof dir) return 0;
    size_t blen = strlen(base);
    int n = 0;
    for (;;) {
        size_t len = strlen(dir);
        while (len > blen && dir[len - 1] == '/') dir[--len] = 0;
        level(dir, arg);
        n++;
        char *slash = strrchr(dir + blen, '/');
        if (!slash) break;
        *slash = 0;
    }
    return n;
}

static void mem_level_v1(const char *dir, void *arg) {
    uint64_t *room = arg, lim, use;
    /* v1 reports "no limit" as a page-rounded LONG_MAX */
    if (read_u64(dir, "memory.limit_in_bytes", &lim) || lim >= (1ull << 62)) return;
    if (read_u64(dir, "memory.usage_in_bytes", &use)) use = 0;
    uint64_t cache = stat_key(dir, "total_inactive_file"); /* reclaimable page cache */
    use = use > cache ? use - cache : 0;
    uint64_t r = lim > use ? lim - use : 0;
    if (r < *room) *room = r;
}

static void mem_level_v2(const char *dir, void *arg) {
    uint64_t *room = arg, lim, use;
    if (read_u64(dir, "memory.max", &lim) || lim == NO_LIMIT) return;
    if (read_u64(dir, "memory.current", &use)) use = 0;
    uint64_t cache = stat_key(dir, "inactive_file");
    use = use > cache ? use - cache : 0;
    uint64_t r = lim > use ? lim - use : 0;
    if (r < *room) *room = r;
}

uint64_t mr_cgroup_mem_room(void) {
    uint64_t room = NO_LIMIT;
    char path[512], base[1024];
    const char *root = cg_root();
    if (self_path(0, NULL, path, sizeof path) == 0) {
        const char *sub[2] = {"", "/unified"};
        for (int i = 0; i < 2; i++) {
            snprintf(base, sizeof base, "%s%s", root, sub[i]);
            walk(base, path, mem_level_v2, &room);
        }
    }
    if (self_path(1, "memory", path, sizeof path) == 0) {
        snprintf(base, sizeof base, "%s/memory", root);
        walk(base, path, mem_level_v1, &room);
    }
    return room;
}

typedef struct { double cpus; int v1; } cpu_acc;

static void cpu_level(const char *dir, void *arg) {
    cpu_acc *a = arg;
    char path[1024], buf[128];
    double q = 0;
    if (a->v1) {
        uint64_t quota, period;
        char qs[32];
        /* cfs_quota_us is -1 without a limit: read it as text */
        if ((size_t)snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= sizeof path) return;
        FILE *f = fopen(path, "r");
        if (!f) return;
        int ok = fgets(qs, sizeof qs, f) != NULL;
        fclose(f);
        if (!ok || qs[0] == '-' || read_u64(dir, "cpu.cfs_quota_us", &quota) ||
            read_u64(dir, "cpu.cfs_period_us", &period) || !period || !quota)
            return;
        q = (double)quota / (double)period;
    } else {
        if ((size_t)snprintf(path, sizeof path, "%s/cpu.max", dir) >= sizeof path) return;
        FILE *f = fopen(path, "r");
        if (!f) return;
        int ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        unsigned long long quota, period;
        if (!ok || !strncmp(buf, "max", 3) || sscanf(buf, "%llu %llu", &quota, &period) != 2 || !period || !quota) return;
        q = (double)quota / (double)period;
    }
    if (a->cpus == 0 || q < a->cpus) a->cpus = q;
}

double mr_cgroup_cpu_quota(void) {
    cpu_acc a = {0, 0};
    char path[512], base[1024];
    const char *root = cg_root();
    if (self_path(0, NULL, path, sizeof path) == 0) {
        const char *sub[2] = {"", "/unified"};
        for (int i = 0; i < 2; i++) {
            snprintf(base, sizeof base, "%s%s", root, sub[i]);
            walk(base, path, cpu_level, &a);
        }
    }
    if (self_path(1, "cpu", path, sizeof path) == 0) {
        a.v1 = 1;
        const char *sub[2] = {"/cpu", "/cpu,cpuacct"};
        for (int i = 0; i < 2; i++) {
            snprintf(base, sizeof base, "%s%s", root, sub[i]);
            walk(base, path, cpu_level, &a);
        }
    }
    return a.cpus;
}

int mr_cpu_default_threads(void) {
    int n = mr_cpu_physical_cores();
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int allowed = CPU_COUNT(&set);
        if (allowed > 0 && allowed < n) n = allowed;
    }
    double q = mr_cgroup_cpu_quota();
    if (q > 0) {
        int qn = (int)(q + 0.999); /* a quota of 1.5 CPUs keeps 2 threads busy half the time: round up */
        if (qn < 1) qn = 1;
        if (qn < n) n = qn;
    }
    return n;
}
