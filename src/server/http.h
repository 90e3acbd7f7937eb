/* Minimal HTTP/1.1 server for the OpenAI-compatible API: one connection at a time (one model, one
 * session), bounded request line / headers / body, Content-Length bodies only, Connection: close.
 * Responses are either whole (mr_http_reply) or streamed as server-sent events (mr_http_sse_*). */
#ifndef MR_HTTP_H
#define MR_HTTP_H
#include <stddef.h>

#define MR_HTTP_MAX_HEADER (32 * 1024)
#define MR_HTTP_MAX_BODY (16 * 1024 * 1024)

typedef struct {
    int fd;
    char method[16];
    char path[1024];
    char *body;          /* NUL-terminated */
    size_t body_len;
    int streaming;       /* SSE headers sent */
    int broken;          /* write failed: client went away */
} mr_http_req;

typedef void (*mr_http_handler)(void *user, mr_http_req *req);

/* Listens on host:port and serves until *stop becomes non-zero (checked between connections, and
 * by the accept timeout). Returns 0, or -1 if it cannot listen. */
int mr_http_serve(const char *host, int port, mr_http_handler h, void *user, volatile int *stop);
void mr_http_reply(mr_http_req *r, int status, const char *content_type, const char *body, size_t len);
void mr_http_sse_begin(mr_http_req *r);
void mr_http_sse_send(mr_http_req *r, const char *data, size_t len); /* one "data: ..." event */
/* Parse a request from buf[len] (the whole received bytes); used by the server and the tests.
 * Returns 1 complete (fills req, body points into buf), 0 need more bytes, -1 malformed (status set). */
int mr_http_parse(char *buf, size_t len, mr_http_req *req, size_t *consumed, int *status);
#endif
