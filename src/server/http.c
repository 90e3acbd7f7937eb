#include "server/http.h"
#include "base/base.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void mr_http_limits_default(mr_http_limits *l) {
    l->header_timeout_ms = 10000;
    l->body_timeout_ms = 60000;
    l->idle_timeout_ms = 15000;
    l->send_timeout_ms = 30000;
    l->max_conn = MR_HTTP_MAX_CONN;
}

static const char *status_text(int s) {
    switch (s) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
    }
}

/* ---- parsing (pure: no I/O, no allocation) ---- */

/* header value: skip leading blanks, drop trailing blanks */
static void hdr_value(const char *v, const char *end, const char **vs, size_t *vn) {
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    *vs = v;
    *vn = (size_t)(end - v);
}

static void copy_cut(char *dst, size_t cap, const char *s, size_t n) {
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* case-insensitive: does the comma-separated list v[n] contain token tok? */
static int has_token(const char *v, size_t n, const char *tok) {
    size_t tl = strlen(tok);
    for (size_t i = 0; i < n;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t s = i;
        while (i < n && v[i] != ',') i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
        if (e - s == tl && !strncasecmp(v + s, tok, tl)) return 1;
    }
    return 0;
}

int mr_http_parse_head(const char *buf, size_t len, mr_http_req *req, size_t *head_len, int *status) {
    const char *end = NULL;
    size_t scan = len < MR_HTTP_MAX_HEADER ? len : MR_HTTP_MAX_HEADER;
    for (size_t i = 0; i + 3 < scan; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') { end = buf + i; break; }
    if (!end) {
        if (len >= MR_HTTP_MAX_HEADER) { *status = 431; return -1; }
        return 0;
    }
    req->method[0] = req->path[0] = req->query[0] = req->version[0] = 0;
    req->auth[0] = req->api_key[0] = req->cors_headers[0] = 0;
    req->content_length = -1;
    req->expect_continue = 0;
    /* request line: METHOD SP TARGET SP VERSION */
    const char *line_end = memchr(buf, '\r', (size_t)(end - buf) + 1);
    const char *sp1 = memchr(buf, ' ', (size_t)(line_end - buf));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp1 == buf || sp2 == sp1 + 1 || line_end - sp2 - 1 <= 0) { *status = 400; return -1; }
    size_t ml = (size_t)(sp1 - buf), tl = (size_t)(sp2 - sp1 - 1), vl = (size_t)(line_end - sp2 - 1);
    if (ml >= sizeof req->method || vl >= sizeof req->version) { *status = 400; return -1; }
    if (tl >= sizeof req->path) { *status = 414; return -1; }
    for (size_t i = 0; i < ml; i++) if (buf[i] < 'A' || buf[i] > 'Z') { *status = 400; return -1; }
    for (size_t i = 0; i < tl; i++) {
        unsigned char c = (unsigned char)sp1[1 + i];
        if (c <= ' ' || c >= 0x7f) { *status = 400; return -1; }
    }
    memcpy(req->method, buf, ml);
    req->method[ml] = 0;
    memcpy(req->version, sp2 + 1, vl);
    req->version[vl] = 0;
    if (strncmp(req->version, "HTTP/1.", 7) || vl != 8) { *status = vl >= 5 && !strncmp(req->version, "HTTP/", 5) ? 505 : 400; return -1; }
    const char *target = sp1 + 1, *q = memchr(target, '?', tl);
    size_t pl = q ? (size_t)(q - target) : tl;
    if (q) copy_cut(req->query, sizeof req->query, q + 1, tl - pl - 1);
    if (pl == 0 || target[0] != '/') {
        /* absolute form "http://host/path" is legal for proxies; only origin form is served */
        *status = 400;
        return -1;
    }
    while (pl > 1 && target[pl - 1] == '/') pl--;
    memcpy(req->path, target, pl);
    req->path[pl] = 0;
    int http11 = req->version[7] == '1';
    int conn_close = 0, conn_keep = 0;
    for (const char *h = line_end + 2; h < end;) {
        const char *nl = h;
        while (nl < end && *nl != '\r') nl++;
        const char *colon = memchr(h, ':', (size_t)(nl - h));
        if (!colon || colon == h) { *status = 400; return -1; }
        for (const char *c = h; c < colon; c++)
            if (*c == ' ' || *c == '\t') { *status = 400; return -1; } /* no blank before the colon */
        size_t nlen = (size_t)(colon - h), vn;
        const char *vs;
        hdr_value(colon + 1, nl, &vs, &vn);
#define IS(name) (nlen == sizeof(name) - 1 && !strncasecmp(h, name, nlen))
        if (IS("Content-Length")) {
            long long v = 0;
            if (vn == 0 || vn > 18) { *status = vn > 18 ? 413 : 400; return -1; }
            for (size_t i = 0; i < vn; i++) {
                if (vs[i] < '0' || vs[i] > '9') { *status = 400; return -1; }
                v = v * 10 + (vs[i] - '0');
            }
            if (req->content_length >= 0 && req->content_length != v) { *status = 400; return -1; }
            req->content_length = v;
        } else if (IS("Transfer-Encoding")) {
            *status = 501;
            return -1;
        } else if (IS("Connection")) {
            conn_close |= has_token(vs, vn, "close");
            conn_keep |= has_token(vs, vn, "keep-alive");
        } else if (IS("Expect")) {
            if (vn == 12 && !strncasecmp(vs, "100-continue", 12)) req->expect_continue = 1;
        } else if (IS("Authorization")) {
            copy_cut(req->auth, sizeof req->auth, vs, vn);
        } else if (IS("x-api-key")) {
            copy_cut(req->api_key, sizeof req->api_key, vs, vn);
        } else if (IS("Access-Control-Request-Headers")) {
            copy_cut(req->cors_headers, sizeof req->cors_headers, vs, vn);
        }
#undef IS
        h = nl + 2;
    }
    req->keep_alive = http11 ? !conn_close : conn_keep;
    if (req->content_length > MR_HTTP_MAX_BODY) { *status = 413; return -1; }
    *head_len = (size_t)(end - buf) + 4;
    return 1;
}

int mr_http_parse(char *buf, size_t len, mr_http_req *req, size_t *consumed, int *status) {
    size_t hl;
    int r = mr_http_parse_head(buf, len, req, &hl, status);
    if (r <= 0) return r;
    size_t clen = req->content_length > 0 ? (size_t)req->content_length : 0;
    if (len - hl < clen) return 0;
    req->body = buf + hl;
    req->body_len = clen;
    *consumed = hl + clen;
    return 1;
}

/* ---- writing ---- */

static void write_all(mr_http_req *r, const char *p, size_t n) {
    while (n && !r->broken) {
        ssize_t w = send(r->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { r->broken = 1; return; } /* includes the send timeout (EAGAIN) */
        p += w;
        n -= (size_t)w;
    }
}

static int cors_lines(const mr_http_req *r, char *out, size_t cap) {
    return snprintf(out, cap, "Access-Control-Allow-Origin: *\r\n"
                              "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
                              "Access-Control-Allow-Headers: %s\r\n"
                              "Access-Control-Max-Age: 86400\r\n",
                    r->cors_headers[0] ? r->cors_headers : "Authorization, Content-Type, x-api-key, anthropic-version");
}

void mr_http_reply_hdr(mr_http_req *r, int status, const char *ct, const char *extra, const char *body, size_t len) {
    char hdr[2048], cors[1024];
    cors_lines(r, cors, sizeof cors);
    int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n%s%s%s\r\n",
                     status, status_text(status), ct, len, r->keep_alive ? "keep-alive" : "close", cors,
                     r->extra_headers, extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof hdr) { r->broken = 1; return; }
    write_all(r, hdr, (size_t)n);
    write_all(r, body, len);
    r->replied = 1;
}

void mr_http_reply(mr_http_req *r, int status, const char *ct, const char *body, size_t len) {
    mr_http_reply_hdr(r, status, ct, NULL, body, len);
}

void mr_http_sse_begin(mr_http_req *r) {
    char hdr[2048], cors[1024];
    cors_lines(r, cors, sizeof cors);
    r->chunked = r->keep_alive; /* HTTP/1.1: chunked keeps the connection; otherwise the close ends the body */
    int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     "%sConnection: %s\r\n%s%s\r\n", r->chunked ? "Transfer-Encoding: chunked\r\n" : "",
                     r->keep_alive ? "keep-alive" : "close", cors, r->extra_headers);
    write_all(r, hdr, (size_t)n);
    r->streaming = 1;
    r->replied = 1;
}

/* one piece of the event stream: a chunk when chunked */
static void sse_write(mr_http_req *r, const char *a, size_t an, const char *b, size_t bn, const char *c, size_t cn) {
    if (r->chunked) {
        char h[32];
        int k = snprintf(h, sizeof h, "%zx\r\n", an + bn + cn);
        write_all(r, h, (size_t)k);
    }
    write_all(r, a, an);
    write_all(r, b, bn);
    write_all(r, c, cn);
    if (r->chunked) write_all(r, "\r\n", 2);
}

void mr_http_sse_send(mr_http_req *r, const char *data, size_t len) { sse_write(r, "data: ", 6, data, len, "\n\n", 2); }

void mr_http_sse_event(mr_http_req *r, const char *event, const char *data, size_t len) {
    char h[128];
    int k = snprintf(h, sizeof h, "event: %s\ndata: ", event);
    if (k < 0 || (size_t)k >= sizeof h) return;
    sse_write(r, h, (size_t)k, data, len, "\n\n", 2);
}

void mr_http_sse_comment(mr_http_req *r, const char *text) { sse_write(r, ": ", 2, text, strlen(text), "\n\n", 2); }

void mr_http_sse_end(mr_http_req *r) {
    if (r->chunked) write_all(r, "0\r\n\r\n", 5);
}

/* the stop flag: set by a signal handler (the CLI) or by another thread (tests, embedding
 * programs), so read with an atomic load */
static int stop_set(volatile int *s) { return s && __atomic_load_n(s, __ATOMIC_RELAXED) != 0; }

int mr_http_client_gone(mr_http_req *r) {
    if (r->broken || stop_set(r->stop)) return 1;
    struct pollfd p = {r->fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) { r->broken = 1; return 1; }
    return 0;
}

/* ---- connections ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active;
} conn_count;

typedef struct {
    int fd;
    mr_http_handler h;
    void *user;
    volatile int *stop;
    mr_http_limits lim;
    conn_count *cc;
} conn_ctx;

/* out of memory before the handler runs: a reply built on the stack, so the client learns why */
static void reply_oom(int fd) {
    static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 71\r\n"
                              "Connection: close\r\n\r\n{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":503}}";
    if (send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL) < 0) { /* the client is gone: nothing more to do */ }
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for bytes until the deadline (checked against the clock: bytes arriving do not extend it) and
 * appends them. 1 read, 0 deadline passed / peer closed / stopping, -1 error. */
static int read_more(conn_ctx *c, char **buf, size_t *cap, size_t *len, long long deadline) {
    if (*len == *cap) {
        if (*cap >= MR_HTTP_MAX_HEADER + MR_HTTP_MAX_BODY) return -1;
        size_t ncap = *cap * 2;
        char *nb = mr_realloc(*buf, ncap + 1);
        if (!nb) { reply_oom(c->fd); return -1; }
        *buf = nb;
        *cap = ncap;
    }
    for (;;) {
        if (stop_set(c->stop)) return 0;
        long long left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, left < 250 ? (int)left : 250); /* short slices: notice a stop */
        if (pr < 0 && errno != EINTR) return -1;
        if (pr <= 0) continue;
        ssize_t n = recv(c->fd, *buf + *len, *cap - *len, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return 0;
        *len += (size_t)n;
        (*buf)[*len] = 0;
        return 1;
    }
}

static void reply_error(mr_http_req *req, int status, const char *msg) {
    char body[256];
    int n = snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"code\":%d}}",
                     msg, status);
    req->keep_alive = 0;
    mr_http_reply(req, status, "application/json", body, (size_t)n);
}

static void *conn_main(void *arg) {
    conn_ctx *c = arg;
    size_t cap = 8192, len = 0;
    char *buf = mr_malloc(cap + 1);
    if (!buf) reply_oom(c->fd);
    struct timeval tv = {c->lim.send_timeout_ms / 1000, (c->lim.send_timeout_ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* streamed tokens leave at once */
    for (int first = 1; buf; first = 0) {
        mr_http_req req;
        memset(&req, 0, sizeof req);
        req.fd = c->fd;
        req.stop = c->stop;
        /* the head deadline starts when the request starts; between keep-alive requests the idle
         * timeout applies until the first byte */
        long long deadline = now_ms() + (first ? c->lim.header_timeout_ms : c->lim.idle_timeout_ms);
        if (!first && len == 0) {
            if (read_more(c, &buf, &cap, &len, deadline) <= 0) break;
            deadline = now_ms() + c->lim.header_timeout_ms;
        }
        size_t hl = 0;
        int status = 400, pr;
        while ((pr = mr_http_parse_head(buf, len, &req, &hl, &status)) == 0) {
            int rr = read_more(c, &buf, &cap, &len, deadline);
            if (rr <= 0) {
                if (rr == 0 && len && !stop_set(c->stop) && now_ms() >= deadline) reply_error(&req, 408, "request head timed out");
                goto out;
            }
        }
        if (pr < 0) { reply_error(&req, status, "malformed HTTP request"); break; }
        size_t clen = req.content_length > 0 ? (size_t)req.content_length : 0;
        if (len - hl < clen) {
            if (req.expect_continue) write_all(&req, "HTTP/1.1 100 Continue\r\n\r\n", 25);
            long long bdl = now_ms() + c->lim.body_timeout_ms;
            while (len - hl < clen) {
                int rr = read_more(c, &buf, &cap, &len, bdl);
                if (rr <= 0) {
                    if (rr == 0 && !stop_set(c->stop) && now_ms() >= bdl) reply_error(&req, 408, "request body timed out");
                    goto out;
                }
            }
        }
        req.body = buf + hl;
        req.body_len = clen;
        char save = req.body[clen];
        req.body[clen] = 0;
        c->h(c->user, &req);
        req.body[clen] = save;
        if (!req.replied || req.broken || !req.keep_alive || (req.streaming && !req.chunked) || stop_set(c->stop)) break;
        /* keep what follows (a pipelined request) */
        size_t used = hl + clen;
        memmove(buf, buf + used, len - used);
        len -= used;
        buf[len] = 0;
    }
out:
    free(buf);
    close(c->fd);
    pthread_mutex_lock(&c->cc->mu);
    c->cc->active--;
    pthread_cond_broadcast(&c->cc->cv);
    pthread_mutex_unlock(&c->cc->mu);
    free(c);
    return NULL;
}

int mr_http_listen(const char *host, int port) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    if (getaddrinfo(host, ports, &hints, &ai) != 0 || !ai) { mr_set_error("server: cannot resolve %s", host); return -1; }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        mr_set_error("server: cannot listen on %s:%d: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    return fd;
}

int mr_http_serve_fd(int fd, const mr_http_limits *lim, mr_http_handler h, void *user, volatile int *stop) {
    mr_http_limits l;
    if (lim) l = *lim;
    else mr_http_limits_default(&l);
    conn_count cc = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (!stop_set(stop)) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 250) <= 0) continue;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        pthread_mutex_lock(&cc.mu);
        int full = cc.active >= l.max_conn;
        if (!full) cc.active++;
        pthread_mutex_unlock(&cc.mu);
        if (full) {
            static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            if (send(c, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* nothing more to do */ }
            close(c);
            continue;
        }
        conn_ctx *ctx = mr_malloc(sizeof *ctx);
        pthread_t th;
        if (ctx) *ctx = (conn_ctx){c, h, user, stop, l, &cc};
        if (!ctx || pthread_create(&th, &attr, conn_main, ctx) != 0) {
            reply_oom(c);
            free(ctx);
            close(c);
            pthread_mutex_lock(&cc.mu);
            cc.active--;
            pthread_mutex_unlock(&cc.mu);
            mr_log(0, "server: cannot start a connection thread\n");
        }
    }
    pthread_attr_destroy(&attr);
    /* the handlers use the model: wait until every connection thread has seen the stop */
    pthread_mutex_lock(&cc.mu);
    while (cc.active > 0) pthread_cond_wait(&cc.cv, &cc.mu);
    pthread_mutex_unlock(&cc.mu);
    close(fd);
    return 0;
}
