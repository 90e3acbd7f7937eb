/* A model file that shrinks while it is mapped (truncated or rewritten in place by another program).
 *
 * Two defences (docs/RELIABILITY.md "The model file changing under the process"):
 * - mr_gguf_check_files: one fstat per shard, called before every evaluation. A file smaller than
 *   when it was mapped fails the eval with a message; nothing has touched the lost pages yet.
 * - mr_file_guard_install (opt-in; the CLI and the server install it, library code never does): a
 *   SIGBUS handler for the window between that check and the access (a file truncated during an
 *   eval, or during load). A bus error inside a registered mapping writes one line naming the file,
 *   its mapped and current sizes and the offset, then _exit(MR_EXIT_FILE_SHRANK): the process cannot
 *   continue, since the faulting thread is inside a kernel with no way to return an error. A bus
 *   error anywhere else goes to the handler that was there before (or the default action).
 *
 * The registry is a fixed array written under a mutex and read by the handler with atomic loads
 * (async-signal-safe: no locks, no allocation, only fstat, write, sigaction and _exit). */
#include "gguf/gguf.h"
#include "base/base.h"
#include "moerun.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_MAX 256 /* mapped shards at once; more are mapped unguarded (a plain SIGBUS) */

typedef struct {
    _Atomic uintptr_t base; /* 0 = free entry */
    _Atomic size_t size;
    _Atomic(const char *) path;
    _Atomic int fd;
} guard_ent;

static guard_ent guard[GUARD_MAX];
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_prev;
static atomic_int guard_on;

void mr_map_guard_add(const void *base, size_t size, const char *path, int fd) {
    pthread_mutex_lock(&guard_mu);
    for (int i = 0; i < GUARD_MAX; i++)
        if (!atomic_load(&guard[i].base)) {
            atomic_store(&guard[i].size, size);
            atomic_store(&guard[i].path, path);
            atomic_store(&guard[i].fd, fd);
            atomic_store(&guard[i].base, (uintptr_t)base); /* last: the entry is complete when seen */
            break;
        }
    pthread_mutex_unlock(&guard_mu);
}

void mr_map_guard_remove(const void *base) {
    pthread_mutex_lock(&guard_mu);
    for (int i = 0; i < GUARD_MAX; i++)
        if (atomic_load(&guard[i].base) == (uintptr_t)base) atomic_store(&guard[i].base, 0);
    pthread_mutex_unlock(&guard_mu);
}

/* ---- the handler: async-signal-safe pieces ---- */
static size_t put_str(char *b, size_t at, size_t cap, const char *s) {
    while (s && *s && at + 1 < cap) b[at++] = *s++;
    return at;
}

static size_t put_u64(char *b, size_t at, size_t cap, uint64_t v) {
    char d[24];
    int n = 0;
    do { d[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n && at + 1 < cap) b[at++] = d[--n];
    return at;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const uintptr_t a = (uintptr_t)si->si_addr;
    int hit = -1;
    if (si->si_code > 0) /* raised by the hardware, not sent with kill() */
        for (int i = 0; i < GUARD_MAX && hit < 0; i++) {
            uintptr_t b = atomic_load(&guard[i].base);
            if (b && a >= b && a - b < atomic_load(&guard[i].size)) hit = i;
        }
    if (hit < 0) { /* not ours: the previous action, on the fault's re-execution (or now, if sent) */
        sigaction(SIGBUS, &guard_prev, NULL);
        if (si->si_code <= 0) raise(sig);
        return;
    }
    const guard_ent *g = &guard[hit];
    struct stat st;
    const int have = fstat(atomic_load(&g->fd), &st) == 0;
    char msg[1400];
    size_t n = 0;
    n = put_str(msg, n, sizeof msg, "moerun: fatal: bus error reading ");
    n = put_str(msg, n, sizeof msg, atomic_load(&g->path));
    n = put_str(msg, n, sizeof msg, " at offset ");
    n = put_u64(msg, n, sizeof msg, (uint64_t)(a - atomic_load(&g->base)));
    n = put_str(msg, n, sizeof msg, ": the file shrank while mapped (");
    n = put_u64(msg, n, sizeof msg, (uint64_t)atomic_load(&g->size));
    n = put_str(msg, n, sizeof msg, " bytes when loaded");
    if (have) {
        n = put_str(msg, n, sizeof msg, ", ");
        n = put_u64(msg, n, sizeof msg, (uint64_t)st.st_size);
        n = put_str(msg, n, sizeof msg, " now");
    }
    n = put_str(msg, n, sizeof msg, "); it was truncated or rewritten in place while in use. Exiting.\n");
    for (size_t off = 0; off < n;) {
        ssize_t w = write(2, msg + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    _exit(MR_EXIT_FILE_SHRANK);
}

int mr_file_guard_install(void) {
    if (atomic_exchange(&guard_on, 1)) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &guard_prev)) {
        atomic_store(&guard_on, 0);
        mr_set_error("cannot install the SIGBUS handler: %s", strerror(errno));
        return -1;
    }
    return 0;
}
