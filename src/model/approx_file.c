/* The MoE approximation control file (mr_approx_file_*, moerun.h; docs/APPROX.md "Switching while
 * running"): a small text file holding a spec, polled between evaluations. A poll is one stat(); the
 * file is read only when its identity (device, inode, size, modification time) changed, or while its
 * modification time is so recent that a second write in the same clock tick could hide behind an
 * unchanged stat (then the bytes are compared with the last read). */
#include "moerun.h"
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct mr_approx_file {
    char *path;
    pthread_mutex_t mu;          /* polls from several threads (the server's) */
    int have_stat;               /* st below describes the file as last seen */
    struct stat st;
    char last[MR_APPROX_FILE_MAX + 1]; /* the bytes last read (good or bad), NUL-terminated */
    int have_last;
};

mr_approx_file *mr_approx_file_open(const char *path) {
    if (!path || !*path) { mr_set_error("approx file: empty path"); return NULL; }
    mr_approx_file *f = mr_calloc(1, sizeof *f);
    if (!f || !(f->path = mr_malloc(strlen(path) + 1))) { free(f); mr_set_error("approx file: out of memory"); return NULL; }
    strcpy(f->path, path);
    if (pthread_mutex_init(&f->mu, NULL)) { free(f->path); free(f); mr_set_error("approx file: cannot create a mutex"); return NULL; }
    return f;
}

void mr_approx_file_free(mr_approx_file *f) {
    if (!f) return;
    pthread_mutex_destroy(&f->mu);
    free(f->path);
    free(f);
}

const char *mr_approx_file_path(const mr_approx_file *f) { return f ? f->path : NULL; }

static int same_stat(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* modified within the last 2 s: file systems stamp times at a clock tick (a few ms), so two writes of
 * the same size inside one tick leave the stat unchanged; such a file is re-read until it is older */
static int recent(const struct stat *s) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double age = (double)(now.tv_sec - s->st_mtim.tv_sec) + 1e-9 * (double)(now.tv_nsec - s->st_mtim.tv_nsec);
    return age < 2.0;
}

/* The file's bytes into buf (NUL-terminated): 0, or -1 with the error set. A FIFO or device is
 * refused (a read could block the evaluation), so is a file over MR_APPROX_FILE_MAX bytes or one with
 * NUL bytes. */
static int read_bounded(const char *path, char *buf, struct stat *st) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) { mr_set_error("approx file %s: cannot open: %s", path, strerror(errno)); return -1; }
    int rc = -1;
    ssize_t n = 0;
    if (fstat(fd, st) != 0) mr_set_error("approx file %s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st->st_mode)) mr_set_error("approx file %s: not a regular file", path);
    else if (st->st_size > MR_APPROX_FILE_MAX) mr_set_error("approx file %s: %lld bytes, at most %d", path, (long long)st->st_size, MR_APPROX_FILE_MAX);
    else {
        size_t got = 0;
        while (got <= MR_APPROX_FILE_MAX && (n = read(fd, buf + got, MR_APPROX_FILE_MAX + 1 - got)) > 0) got += (size_t)n;
        if (n < 0) mr_set_error("approx file %s: read error: %s", path, strerror(errno));
        else if (got > MR_APPROX_FILE_MAX) mr_set_error("approx file %s: more than %d bytes", path, MR_APPROX_FILE_MAX);
        else if (memchr(buf, 0, got)) mr_set_error("approx file %s: contains a NUL byte", path);
        else { buf[got] = 0; rc = 0; }
    }
    close(fd);
    return rc;
}

int mr_approx_file_parse(const char *text, mr_approx_params *p) {
    /* '#' starts a comment to the end of the line; the rest is one spec starting from "off" */
    char spec[MR_APPROX_FILE_MAX + 1];
    size_t n = 0;
    for (const char *s = text; *s && n < MR_APPROX_FILE_MAX; s++) {
        if (*s == '#') { while (s[1] && s[1] != '\n') s++; continue; }
        spec[n++] = *s == '\r' ? ' ' : *s;
    }
    spec[n] = 0;
    mr_approx_params q;
    mr_approx_params_default(&q);
    if (mr_approx_parse(spec, &q)) return -1;
    *p = q;
    return 0;
}

int mr_approx_file_poll(mr_approx_file *f, mr_model *m) {
    struct stat st;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    if (stat(f->path, &st) != 0) { /* missing (not yet written, or removed): the setting stays */
        f->have_stat = 0;
        goto out;
    }
    int changed = !f->have_stat || !same_stat(&st, &f->st);
    if (!changed && !recent(&st)) goto out;
    char buf[MR_APPROX_FILE_MAX + 1];
    struct stat rst;
    int bad = read_bounded(f->path, buf, &rst);
    f->st = bad ? st : rst;
    f->have_stat = 1;
    if (bad) {
        /* reported once per version of the file: the same error again is not news */
        rc = changed ? -1 : 0;
        f->have_last = 0;
        goto out;
    }
    if (!changed && f->have_last && !strcmp(buf, f->last)) goto out; /* a recent file, read again, same bytes */
    memcpy(f->last, buf, strlen(buf) + 1);
    f->have_last = 1;
    mr_approx_params p;
    char msg[512];
    if (mr_approx_file_parse(buf, &p) || mr_model_set_approx(m, &p)) {
        snprintf(msg, sizeof msg, "%s", mr_last_error());
        mr_set_error("approx file %s: %s (the setting stays as it was)", f->path, msg);
        rc = -1;
    } else rc = 1;
out:
    pthread_mutex_unlock(&f->mu);
    return rc;
}
