/* Tests that talk to an in-process server (mr_server_run in a thread on 127.0.0.1) with a minimal
 * HTTP client: one request per connection, the whole response read until the server closes (the
 * requests say "Connection: close" or are HTTP/1.0: keep-alive is HTTP/1.1's default). */
#ifndef MR_TEST_SERVER_UTIL_H
#define MR_TEST_SERVER_UTIL_H
#include "moerun.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct { mr_model *m; int port; volatile int stop; int rc; char err[256]; } srv_thread;

/* ask the server to stop (its thread reads the flag with an atomic load) */
static inline void srv_thread_stop(srv_thread *t) { __atomic_store_n(&t->stop, 1, __ATOMIC_RELAXED); }

static void *srv_thread_main(void *arg) {
    srv_thread *t = arg;
    mr_server_params p;
    mr_server_params_default(&p);
    p.port = t->port;
    p.n_ctx = 128;
    p.alias = "tiny";
    p.stop = &t->stop;
    t->rc = mr_server_run(t->m, &p);
    if (t->rc) snprintf(t->err, sizeof t->err, "%s", mr_last_error()); /* errors are per thread */
    return NULL;
}

/* A loopback port nobody listens on now (the kernel's pick; other tests run at the same time). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static int http_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    return fd;
}

/* Sends raw bytes, reads the whole response (malloc'd, NUL-terminated) or NULL. */
static char *http_raw(int port, const char *req, size_t len) {
    int fd = http_connect(port);
    if (fd < 0) return NULL;
    /* the server may answer (e.g. 503, 431) and close before reading everything: no SIGPIPE */
    for (size_t off = 0; off < len;) {
        ssize_t k = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (k <= 0) break;
        off += (size_t)k;
    }
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    for (ssize_t k; out && (k = read(fd, out + n, cap - 1 - n)) > 0;) {
        n += (size_t)k;
        if (n == cap - 1) { char *nb = realloc(out, cap *= 2); if (!nb) { free(out); out = NULL; } else out = nb; }
    }
    close(fd);
    if (out) out[n] = 0;
    return out;
}

static char *http_post(int port, const char *path, const char *body) {
    size_t bl = strlen(body), cap = bl + 256;
    char *req = malloc(cap);
    if (!req) return NULL;
    int hl = snprintf(req, cap, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n", path, bl);
    memcpy(req + hl, body, bl);
    char *r = http_raw(port, req, (size_t)hl + bl);
    free(req);
    return r;
}

/* one request per connection: the server closes after its reply (it keeps HTTP/1.1 connections
 * open otherwise) */
#define HEALTH_REQ "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"

static int status_of(const char *r) { int s = 0; return r && sscanf(r, "HTTP/1.1 %d", &s) == 1 ? s : 0; }
#endif
