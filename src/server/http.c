#include "server/http.h"
#include "base/base.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *status_text(int s) {
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

static void write_all(mr_http_req *r, const char *p, size_t n) {
    while (n && !r->broken) {
        ssize_t w = send(r->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { r->broken = 1; return; }
        p += w;
        n -= (size_t)w;
    }
}

void mr_http_reply(mr_http_req *r, int status, const char *ct, const char *body, size_t len) {
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n"
                     "Access-Control-Allow-Origin: *\r\n\r\n",
                     status, status_text(status), ct, len);
    write_all(r, hdr, (size_t)n);
    write_all(r, body, len);
}

void mr_http_sse_begin(mr_http_req *r) {
    static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                            "Connection: close\r\nAccess-Control-Allow-Origin: *\r\n\r\n";
    write_all(r, h, sizeof h - 1);
    r->streaming = 1;
}

void mr_http_sse_send(mr_http_req *r, const char *data, size_t len) {
    write_all(r, "data: ", 6);
    write_all(r, data, len);
    write_all(r, "\n\n", 2);
}

int mr_http_parse(char *buf, size_t len, mr_http_req *req, size_t *consumed, int *status) {
    char *end = NULL;
    for (size_t i = 0; i + 3 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') { end = buf + i; break; }
    if (!end) {
        if (len >= MR_HTTP_MAX_HEADER) { *status = 431; return -1; }
        return 0;
    }
    size_t hlen = (size_t)(end - buf) + 4;
    /* work on a copy: the caller may call again with more bytes after a "need more" answer */
    char *hdr = mr_malloc(hlen + 1);
    if (!hdr) { *status = 500; return -1; }
    memcpy(hdr, buf, hlen);
    hdr[hlen] = 0;
    char *hend = hdr + hlen - 4;
    *hend = 0;
    char *line_end = strstr(hdr, "\r\n");
    if (line_end) *line_end = 0;
    char method[16], path[1024], version[16];
    long long clen = -1;
    int bad = 0;
    if (sscanf(hdr, "%15s %1023s %15s", method, path, version) != 3 || strncmp(version, "HTTP/1.", 7)) bad = 400;
    for (char *h = line_end ? line_end + 2 : hend; !bad && h && h < hend;) {
        char *nl = strstr(h, "\r\n");
        if (nl) *nl = 0;
        if (!strncasecmp(h, "Content-Length:", 15)) {
            char *e;
            clen = strtoll(h + 15, &e, 10);
            while (*e == ' ' || *e == '\t') e++;
            if (*e || clen < 0) bad = 400;
        } else if (!strncasecmp(h, "Transfer-Encoding:", 18)) {
            bad = 501;
        }
        h = nl ? nl + 2 : NULL;
    }
    free(hdr);
    if (bad) { *status = bad; return -1; }
    if (clen < 0) clen = 0;
    if (clen > MR_HTTP_MAX_BODY) { *status = 413; return -1; }
    if (len - hlen < (size_t)clen) return 0;
    snprintf(req->method, sizeof req->method, "%s", method);
    snprintf(req->path, sizeof req->path, "%s", path);
    req->body = buf + hlen;
    req->body_len = (size_t)clen;
    *consumed = hlen + (size_t)clen;
    return 1;
}

/* out of memory before the handler runs: a reply built on the stack, so the client learns why */
static void reply_oom(mr_http_req *r) {
    static const char msg[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":503}}";
    mr_http_reply(r, 503, "application/json", msg, sizeof msg - 1);
}

static void serve_conn(int fd, mr_http_handler h, void *user) {
    size_t cap = 8192, len = 0;
    char *buf = mr_malloc(cap + 1);
    mr_http_req req;
    memset(&req, 0, sizeof req);
    req.fd = fd;
    if (!buf) { reply_oom(&req); return; }
    for (;;) {
        size_t consumed;
        int status = 400;
        int pr = mr_http_parse(buf, len, &req, &consumed, &status);
        if (pr < 0 && status == 500) { reply_oom(&req); break; }
        if (pr < 0) {
            const char *msg = "{\"error\":{\"message\":\"malformed HTTP request\",\"type\":\"invalid_request_error\"}}";
            mr_http_reply(&req, status, "application/json", msg, strlen(msg));
            break;
        }
        if (pr == 1) {
            char save = req.body[req.body_len];
            req.body[req.body_len] = 0;
            h(user, &req);
            req.body[req.body_len] = save;
            break;
        }
        if (len == cap) {
            if (cap >= MR_HTTP_MAX_HEADER + MR_HTTP_MAX_BODY) break;
            size_t ncap = cap * 2;
            char *nb = mr_realloc(buf, ncap + 1);
            if (!nb) { reply_oom(&req); break; }
            buf = nb;
            cap = ncap;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 30000) <= 0) break; /* idle client */
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = 0;
    }
    free(buf);
}

int mr_http_serve(const char *host, int port, mr_http_handler h, void *user, volatile int *stop) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    if (getaddrinfo(host, ports, &hints, &ai) != 0 || !ai) { mr_set_error("server: cannot resolve %s", host); return -1; }
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
        mr_set_error("server: cannot listen on %s:%d: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    while (!*stop) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, 500);
        if (pr <= 0) continue;
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        serve_conn(c, h, user);
        close(c);
    }
    close(fd);
    return 0;
}
