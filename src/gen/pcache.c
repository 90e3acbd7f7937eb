/* The prompt cache (moerun.h mr_pcache_*, docs/SNAPSHOTS.md): snapshots of sessions at chosen
 * positions, keyed by the tokens before them, shared by every session of one model.
 *
 * An entry is a token prefix (its ids are kept in memory, 4 bytes a token) with its snapshot in RAM,
 * in a file, or both. RAM copies are bounded by ram_bytes, files by disk_bytes, each dropped least
 * recently used first; an entry with neither is forgotten. A lookup compares the prompt with every
 * entry's ids (memcmp: ~10 MB for 100 entries of 25k tokens, about a millisecond), so there is no
 * index to keep consistent. Files are named by a hash of the model identity and the ids, written to
 * a temporary name and renamed, and found again by a scan at start (header and ids read, nothing
 * trusted: the restore checks the checksums, and a file that fails is removed).
 *
 * Threads: one mutex over the entry table. Copying a snapshot in or out happens outside it; the
 * entry is pinned meanwhile so eviction leaves it alone. */
#include "moerun.h"
#include "base/base.h"
#include "base/hash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PC_SUFFIX ".mrsnap"

typedef struct {
    int32_t *ids;
    int n;
    uint64_t key;          /* mr_hash64 of the ids, seeded with the model identity: the file name */
    void *buf;             /* RAM copy or NULL */
    size_t bytes;          /* snapshot size (RAM copy and file alike) */
    int on_disk;
    int pins;              /* restores in progress */
    uint64_t used;         /* LRU clock */
} pc_entry;

struct mr_pcache {
    mr_model *m;
    uint64_t model_id;
    mr_pcache_params p;
    char *dir;
    pthread_mutex_t mu;
    pc_entry *e;
    int n, cap;
    uint64_t clock;
    mr_pcache_stats st;
};

static void pc_path(const mr_pcache *c, uint64_t key, char *out, size_t n) {
    snprintf(out, n, "%s/%016llx" PC_SUFFIX, c->dir, (unsigned long long)key);
}

static void entry_drop(mr_pcache *c, int i) {
    free(c->e[i].ids);
    free(c->e[i].buf);
    c->e[i] = c->e[--c->n];
}

/* Keep RAM copies within ram_bytes and files within disk_bytes, least recently used first (pinned
 * entries stay). Called with the lock held. */
static void pc_evict(mr_pcache *c) {
    for (;;) {
        int over_ram = c->st.ram_bytes > c->p.ram_bytes, over_disk = c->p.disk_bytes && c->st.disk_bytes > c->p.disk_bytes;
        if (!over_ram && !over_disk) return;
        int v = -1;
        for (int i = 0; i < c->n; i++) {
            const pc_entry *x = &c->e[i];
            if (x->pins || (over_ram ? !x->buf : !x->on_disk)) continue;
            if (v < 0 || x->used < c->e[v].used) v = i;
        }
        if (v < 0) return;
        pc_entry *x = &c->e[v];
        if (over_ram) {
            free(x->buf);
            x->buf = NULL;
            c->st.ram_bytes -= x->bytes;
            c->st.n_ram--;
        } else {
            char path[4096];
            pc_path(c, x->key, path, sizeof path);
            unlink(path);
            x->on_disk = 0;
            c->st.disk_bytes -= x->bytes;
            c->st.n_disk--;
        }
        c->st.evictions++;
        if (!x->buf && !x->on_disk) entry_drop(c, v);
    }
}

static int entry_add(mr_pcache *c, int32_t *ids, int n, uint64_t key) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        pc_entry *e = mr_realloc(c->e, sizeof *e * (size_t)cap);
        if (!e) return -1;
        c->e = e;
        c->cap = cap;
    }
    c->e[c->n] = (pc_entry){.ids = ids, .n = n, .key = key, .used = ++c->clock};
    return c->n++;
}

/* Files of this model in the directory: their ids and sizes. A file whose header or size is wrong is
 * removed; another model's files are left alone (the directory may be shared). */
static void pc_scan(mr_pcache *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        const size_t L = strlen(de->d_name);
        if (L <= strlen(PC_SUFFIX) || strcmp(de->d_name + L - strlen(PC_SUFFIX), PC_SUFFIX)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        mr_snapshot_info info;
        int32_t *ids = NULL;
        if (mr_snapshot_peek_file(path, &info, &ids)) {
            mr_log(1, "prompt cache: %s removed: %s\n", path, mr_last_error());
            unlink(path);
            c->st.bad_files++;
            continue;
        }
        if (info.model_id != c->model_id) { free(ids); continue; }
        const uint64_t key = mr_hash64(ids, sizeof(int32_t) * (size_t)info.n_past, c->model_id);
        char want[4096];
        pc_path(c, key, want, sizeof want);
        int i = strcmp(want, path) || !ids ? -1 : entry_add(c, ids, info.n_past, key);
        if (i < 0) { /* a name that does not match its ids, a file without ids, or no memory */
            mr_log(1, "prompt cache: %s removed: its name does not match its tokens\n", path);
            unlink(path);
            c->st.bad_files++;
            free(ids);
            continue;
        }
        c->e[i].on_disk = 1;
        c->e[i].bytes = (size_t)info.bytes;
        c->st.disk_bytes += info.bytes;
        c->st.n_disk++;
    }
    closedir(d);
}

mr_pcache *mr_pcache_new(mr_model *m, const mr_pcache_params *p) {
    mr_pcache *c = mr_calloc(1, sizeof *c);
    if (!c) { mr_set_error("prompt cache: out of memory"); return NULL; }
    c->m = m;
    c->model_id = mr_model_identity(m);
    if (p) c->p = *p;
    c->p.dir = NULL;
    pthread_mutex_init(&c->mu, NULL);
    if (p && p->dir && p->dir[0]) {
        if (!(c->dir = mr_strdup(p->dir))) { mr_set_error("prompt cache: out of memory"); goto fail; }
        if (mkdir(c->dir, 0755) && errno != EEXIST) { mr_set_error("prompt cache: cannot create %s: %s", c->dir, strerror(errno)); goto fail; }
        struct stat sb;
        if (stat(c->dir, &sb) || !S_ISDIR(sb.st_mode)) { mr_set_error("prompt cache: %s is not a directory", c->dir); goto fail; }
        pc_scan(c);
        pc_evict(c);
    }
    return c;
fail:
    mr_pcache_free(c);
    return NULL;
}

void mr_pcache_free(mr_pcache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) { free(c->e[i].ids); free(c->e[i].buf); }
    free(c->e);
    free(c->dir);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int write_file(const char *dir, const char *path, const void *buf, size_t n) {
    char tmp[4096];
    static unsigned seq;
    snprintf(tmp, sizeof tmp, "%s/.%ld.%u.tmp", dir, (long)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) { mr_set_error("%s: cannot create: %s", tmp, strerror(errno)); return -1; }
    const unsigned char *p = buf;
    size_t left = n;
    while (left) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { mr_set_error("%s: cannot write: %s", tmp, k < 0 ? strerror(errno) : "no progress"); break; }
        p += k;
        left -= (size_t)k;
    }
    int rc = left || fsync(fd) ? -1 : 0;
    if (!left && rc) mr_set_error("%s: cannot sync: %s", tmp, strerror(errno));
    if (close(fd) && !rc) { mr_set_error("%s: cannot close: %s", tmp, strerror(errno)); rc = -1; }
    if (!rc && rename(tmp, path)) { mr_set_error("%s: cannot rename: %s", path, strerror(errno)); rc = -1; }
    if (rc) unlink(tmp);
    return rc;
}

static int find(const mr_pcache *c, const int32_t *ids, int n) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].n == n && !memcmp(c->e[i].ids, ids, sizeof(int32_t) * (size_t)n)) return i;
    return -1;
}

int mr_pcache_store(mr_pcache *c, mr_session *s, const int32_t *tokens) {
    const int n = mr_session_n_past(s);
    if (n <= 0) return 0;
    pthread_mutex_lock(&c->mu);
    int i = find(c, tokens, n);
    if (i >= 0) c->e[i].used = ++c->clock;
    pthread_mutex_unlock(&c->mu);
    if (i >= 0) return 0;
    const size_t bytes = mr_session_save_size(s, 1);
    const int keep_ram = bytes && bytes <= c->p.ram_bytes;
    if (!bytes || (!keep_ram && !c->dir)) return bytes ? 0 : -1;
    void *buf = mr_malloc(bytes);
    int32_t *ids = mr_malloc(sizeof(int32_t) * (size_t)n);
    if (!buf || !ids) { free(buf); free(ids); mr_set_error("prompt cache: out of memory for a %zu-byte snapshot", bytes); return -1; }
    memcpy(ids, tokens, sizeof(int32_t) * (size_t)n);
    if (mr_session_save(s, tokens, buf, bytes)) { free(buf); free(ids); return -1; }
    const uint64_t key = mr_hash64(ids, sizeof(int32_t) * (size_t)n, c->model_id);
    int on_disk = 0;
    if (c->dir) {
        /* a full disk or a write error costs this file only: the snapshot stays in RAM if it fits */
        char path[4096];
        pc_path(c, key, path, sizeof path);
        if (write_file(c->dir, path, buf, bytes) == 0) on_disk = 1;
        else mr_log(1, "prompt cache: %s\n", mr_last_error());
    }
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (find(c, tokens, n) >= 0 || (!keep_ram && !on_disk)) { /* another thread stored it meanwhile, or nowhere to keep it */
        pthread_mutex_unlock(&c->mu);
        free(buf); free(ids);
        return 0;
    }
    i = entry_add(c, ids, n, key);
    if (i < 0) { free(buf); free(ids); mr_set_error("prompt cache: out of memory"); rc = -1; }
    else {
        pc_entry *x = &c->e[i];
        x->bytes = bytes;
        if (keep_ram) { x->buf = buf; c->st.ram_bytes += bytes; c->st.n_ram++; }
        else free(buf);
        if (on_disk) { x->on_disk = 1; c->st.disk_bytes += bytes; c->st.n_disk++; c->st.disk_writes++; }
        c->st.stores++;
        pc_evict(c);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int mr_pcache_restore(mr_pcache *c, mr_session *s, const int32_t *prompt, int max_len, int min_len) {
    pthread_mutex_lock(&c->mu);
    int best = -1;
    for (int i = 0; i < c->n; i++) {
        const pc_entry *x = &c->e[i];
        if (x->n > max_len || x->n <= min_len || (!x->buf && !x->on_disk) || (best >= 0 && x->n <= c->e[best].n)) continue;
        if (!memcmp(x->ids, prompt, sizeof(int32_t) * (size_t)x->n)) best = i;
    }
    if (best < 0) { c->st.misses++; pthread_mutex_unlock(&c->mu); return 0; }
    pc_entry *x = &c->e[best];
    x->pins++;
    x->used = ++c->clock;
    const int n = x->n;
    const uint64_t key = x->key;
    void *buf = x->buf;
    const size_t bytes = x->bytes;
    pthread_mutex_unlock(&c->mu);

    int rc;
    char path[4096] = "";
    int32_t *ids = mr_malloc(sizeof(int32_t) * (size_t)n);
    if (!ids) { mr_set_error("prompt cache: out of memory"); rc = -1; }
    else if (buf) rc = mr_session_restore(s, buf, bytes, ids, n);
    else {
        pc_path(c, key, path, sizeof path);
        rc = mr_session_restore_file(s, path, ids, n);
    }
    /* the ids inside the snapshot are checked too: a file that passed its checksums yet holds other
     * tokens is as bad as a corrupted one */
    if (rc == n && memcmp(ids, prompt, sizeof(int32_t) * (size_t)n)) {
        mr_session_reset(s);
        mr_set_error("prompt cache: %s holds other tokens than its entry", path[0] ? path : "a snapshot");
        rc = -1;
    }
    free(ids);

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++) {
        if (c->e[i].key != key || c->e[i].n != n) continue;
        x = &c->e[i];
        x->pins--;
        if (rc != n) {
            /* never trusted again: the RAM copy and the file go */
            if (x->buf) { free(x->buf); x->buf = NULL; c->st.ram_bytes -= x->bytes; c->st.n_ram--; }
            if (x->on_disk) {
                pc_path(c, key, path, sizeof path);
                unlink(path);
                x->on_disk = 0;
                c->st.disk_bytes -= x->bytes;
                c->st.n_disk--;
            }
            c->st.bad_files++;
            if (!x->pins) entry_drop(c, i);
        }
        break;
    }
    if (rc == n) {
        c->st.hits++;
        c->st.tokens_restored += (uint64_t)n;
        if (!buf) c->st.disk_reads++;
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != n) {
        mr_log(1, "prompt cache: a snapshot of %d tokens was refused and removed: %s\n", n, mr_last_error());
        return -1;
    }
    return n;
}

void mr_pcache_stats_get(mr_pcache *c, mr_pcache_stats *st) {
    pthread_mutex_lock(&c->mu);
    *st = c->st;
    st->n_entries = c->n;
    pthread_mutex_unlock(&c->mu);
}
