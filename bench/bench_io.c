/* Read throughput of the device under a file, as the pager reads it: O_DIRECT preads of one size
 * (an expert slice), at random 4096-aligned offsets or sequentially, with QD reads in flight
 * (QD threads each doing one blocking pread at a time, which is how the pager's I/O pool works).
 *   build/bench/bench_io FILE [--size 4M] [--qd 1,2,4,8,16,32] [--mb 2048] [--seq]
 * Reads --mb MiB per queue depth (spread over the whole file) and prints GB/s (1e9 bytes/s).
 * Drop the page cache first for honest numbers (O_DIRECT bypasses it anyway, but a buffered fallback
 * does not: the tool refuses to run when O_DIRECT cannot be opened). */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096ull

typedef struct {
    int fd, seq, tid, qd;
    uint64_t size, file_size, n_reads, bytes;
    unsigned seed;
    int err;
} worker;

static uint64_t next_rand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    uint64_t hi = *s;
    *s = *s * 1664525u + 1013904223u;
    return hi << 32 | *s;
}

static void *run(void *arg) {
    worker *w = arg;
    uint8_t *buf = mr_aligned_alloc(PAGE, (size_t)w->size);
    if (!buf) { w->err = ENOMEM; return NULL; }
    uint64_t span = w->file_size - w->size, slots = span / PAGE;
    for (uint64_t i = 0; i < w->n_reads; i++) {
        uint64_t off;
        if (w->seq) /* thread t reads chunks t, t+qd, ... of one sequential sweep */
            off = ((i * (uint64_t)w->qd + (uint64_t)w->tid) * w->size) % (span ? span : 1) / PAGE * PAGE;
        else
            off = slots ? next_rand(&w->seed) % slots * PAGE : 0;
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

static uint64_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
    return (uint64_t)v;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    uint64_t size = 4ull << 20, mb = 2048;
    int qds[16] = {1, 2, 4, 8, 16, 32}, nq = 6, seq = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seq")) seq = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--size")) size = parse_size(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--mb")) mb = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(argv[i], "--qd")) {
            nq = 0;
            for (char *p = argv[++i]; *p && nq < 16;) { qds[nq++] = (int)strtol(p, &p, 10); if (*p == ',') p++; }
        } else if (argv[i][0] != '-' && !path) path = argv[i];
        else { fprintf(stderr, "usage: bench_io FILE [--size 4M] [--qd 1,2,4,8] [--mb 2048] [--seq]\n"); return 1; }
    }
    if (!path) { fprintf(stderr, "bench_io: no file\n"); return 1; }
    size = (size + PAGE - 1) / PAGE * PAGE;
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) { fprintf(stderr, "bench_io: %s: cannot open with O_DIRECT: %s\n", path, strerror(errno)); return 1; }
    struct stat st;
    if (fstat(fd, &st) || (uint64_t)st.st_size < 2 * size) { fprintf(stderr, "bench_io: %s is too small\n", path); return 1; }
    printf("# %s: %.2f GiB, O_DIRECT %s reads of %.2f MiB, %llu MiB per queue depth\n", path,
           (double)st.st_size / (1ull << 30), seq ? "sequential" : "random", (double)size / (1 << 20),
           (unsigned long long)mb);
    printf("%4s %10s %9s\n", "qd", "GB/s", "ms/read");
    for (int k = 0; k < nq; k++) {
        int qd = qds[k] < 1 ? 1 : qds[k] > 256 ? 256 : qds[k];
        uint64_t total = (mb << 20) / size, per = (total + (uint64_t)qd - 1) / (uint64_t)qd;
        worker *w = calloc((size_t)qd, sizeof *w);
        pthread_t *th = calloc((size_t)qd, sizeof *th);
        if (!w || !th) { fprintf(stderr, "bench_io: out of memory\n"); return 1; }
        double t0 = mr_now();
        for (int t = 0; t < qd; t++) {
            w[t] = (worker){.fd = fd, .seq = seq, .tid = t, .qd = qd, .size = size, .file_size = (uint64_t)st.st_size,
                            .n_reads = per, .seed = 12345u + 7919u * (unsigned)t + 104729u * (unsigned)k};
            if (pthread_create(&th[t], NULL, run, &w[t])) { fprintf(stderr, "bench_io: pthread_create failed\n"); return 1; }
        }
        uint64_t bytes = 0;
        int err = 0;
        for (int t = 0; t < qd; t++) {
            pthread_join(th[t], NULL);
            bytes += w[t].bytes;
            if (w[t].err) err = w[t].err;
        }
        double dt = mr_now() - t0;
        if (err) { fprintf(stderr, "bench_io: read failed: %s\n", strerror(err)); return 1; }
        printf("%4d %10.2f %9.2f\n", qd, (double)bytes / dt / 1e9, dt * 1e3 / (double)per);
        fflush(stdout);
        free(w);
        free(th);
    }
    close(fd);
    return 0;
}
