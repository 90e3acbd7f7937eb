/* Machine measurements shared by `moerun plan` (src/eval/plan.c) and the benchmarks in bench/:
 * one DRAM read pass over a buffer, and the device's read rate under a file as the pager reads it. */
#include "base/base.h"
#include "base/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- DRAM: XOR every 16-byte word of the buffer (plain C vectors), split over the pool ---- */
typedef long long ms_v2 __attribute__((vector_size(16)));
typedef struct { const ms_v2 *p; size_t n; long long sink[64]; } ms_read_job;

static void ms_read_worker(void *arg, int ith, int nth) {
    ms_read_job *j = arg;
    long lo, hi;
    mr_split((long)(j->n / 8), ith, nth, &lo, &hi);
    ms_v2 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
    for (long i = lo * 8; i < hi * 8; i += 8) {
        a0 ^= j->p[i] ^ j->p[i + 4];
        a1 ^= j->p[i + 1] ^ j->p[i + 5];
        a2 ^= j->p[i + 2] ^ j->p[i + 6];
        a3 ^= j->p[i + 3] ^ j->p[i + 7];
    }
    ms_v2 a = a0 ^ a1 ^ a2 ^ a3;
    j->sink[ith & 63] = a[0] ^ a[1]; /* keeps the loads alive */
}

void mr_dram_read_pass(mr_pool *pool, const void *buf, size_t bytes) {
    ms_read_job j = {(const ms_v2 *)buf, bytes / 16, {0}};
    mr_pool_run(pool, ms_read_worker, &j);
}

/* ---- device read rate: QD threads each doing one blocking O_DIRECT pread at a time ---- */
#define MS_PAGE 4096ull

typedef struct {
    int fd, seq, tid, qd;
    uint64_t size, file_size, n_reads, bytes;
    unsigned seed;
    int err;
} ms_worker;

static uint64_t ms_rand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    uint64_t hi = *s;
    *s = *s * 1664525u + 1013904223u;
    return hi << 32 | *s;
}

static void *ms_run(void *arg) {
    ms_worker *w = arg;
    uint8_t *buf = mr_aligned_alloc(MS_PAGE, (size_t)w->size);
    if (!buf) { w->err = ENOMEM; return NULL; }
    uint64_t span = w->file_size - w->size, slots = span / MS_PAGE;
    for (uint64_t i = 0; i < w->n_reads; i++) {
        uint64_t off;
        if (w->seq) /* thread t reads chunks t, t+qd, ... of one sequential sweep */
            off = ((i * (uint64_t)w->qd + (uint64_t)w->tid) * w->size) % (span ? span : 1) / MS_PAGE * MS_PAGE;
        else
            off = slots ? ms_rand(&w->seed) % slots * MS_PAGE : 0;
        uint64_t got = 0;
        while (got < w->size) {
            ssize_t r = pread(w->fd, buf + got, (size_t)(w->size - got), (off_t)(off + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) { w->err = r < 0 ? errno : EIO; mr_aligned_free(buf); return NULL; }
            got += (uint64_t)r;
        }
        w->bytes += got;
    }
    mr_aligned_free(buf);
    return NULL;
}

int mr_disk_read_rate(const char *path, uint64_t size, int qd, uint64_t total, int seq, unsigned seed,
                      double *gbs, double *ms_per_read) {
    size = (size + MS_PAGE - 1) / MS_PAGE * MS_PAGE;
    qd = qd < 1 ? 1 : qd > 256 ? 256 : qd;
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) { mr_set_error("%s: cannot open with O_DIRECT: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) || (uint64_t)st.st_size < 2 * size) {
        mr_set_error("%s: too small for reads of %llu bytes", path, (unsigned long long)size);
        close(fd);
        return -1;
    }
    uint64_t n = total / size, per = (n + (uint64_t)qd - 1) / (uint64_t)qd;
    ms_worker *w = mr_calloc((size_t)qd, sizeof *w);
    pthread_t *th = mr_calloc((size_t)qd, sizeof *th);
    int rc = -1, started = 0, err = 0;
    if (!w || !th) { mr_set_error("out of memory"); goto done; }
    double t0 = mr_now();
    for (; started < qd; started++) {
        w[started] = (ms_worker){.fd = fd, .seq = seq, .tid = started, .qd = qd, .size = size,
                                 .file_size = (uint64_t)st.st_size, .n_reads = per,
                                 .seed = seed + 7919u * (unsigned)started};
        if (pthread_create(&th[started], NULL, ms_run, &w[started])) { err = EAGAIN; break; }
    }
    uint64_t bytes = 0;
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        bytes += w[t].bytes;
        if (w[t].err) err = w[t].err;
    }
    double dt = mr_now() - t0;
    if (err) { mr_set_error("%s: read failed: %s", path, strerror(err)); goto done; }
    *gbs = (double)bytes / dt / 1e9;
    if (ms_per_read) *ms_per_read = dt * 1e3 / (double)(per ? per : 1);
    rc = 0;
done:
    free(w);
    free(th);
    close(fd);
    return rc;
}
