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
    close(fd);
    for (int k = 0; k < nq; k++) {
        double gbs, ms;
        if (mr_disk_read_rate(path, size, qds[k], mb << 20, seq, 12345u + 104729u * (unsigned)k, &gbs, &ms)) {
            fprintf(stderr, "bench_io: %s\n", mr_get_error());
            return 1;
        }
        printf("%4d %10.2f %9.2f\n", qds[k] < 1 ? 1 : qds[k] > 256 ? 256 : qds[k], gbs, ms);
        fflush(stdout);
    }
    return 0;
}
