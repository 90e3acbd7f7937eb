/* HTTP/1.1 server for the OpenAI-compatible API. Every connection is served by its own thread, so an
 * idle or slow client holds only that thread: reading a request has a deadline for the headers and
 * one for the body, fixed when the read starts (a byte now and then does not extend them), writes have
 * a send timeout, and keep-alive connections are closed after an idle time. Bodies: Content-Length
 * only (Transfer-Encoding is refused with 501); `Expect: 100-continue` is answered before the body is
 * read. Responses are either whole (mr_http_reply) or server-sent events (mr_http_sse_*), chunked on
 * HTTP/1.1 so the connection can be kept.
 * The parser (mr_http_parse_head, mr_http_parse) is a pure function over a buffer: tests and fuzzers
 * call it directly. */
#ifndef MR_HTTP_H
#define MR_HTTP_H
#include <stddef.h>

#define MR_HTTP_MAX_HEADER (32 * 1024)
#define MR_HTTP_MAX_BODY (16 * 1024 * 1024)
#define MR_HTTP_MAX_CONN 256          /* connections served at once; more get 503 */

typedef struct {
    int fd;
    char method[16];
    char path[1024];          /* without the query, trailing '/' removed (except "/") */
    char query[1024];         /* after '?', "" if none */
    char version[16];
    char auth[512];           /* Authorization header ("" if absent; longer values cut) */
    char api_key[512];        /* x-api-key header */
    char cors_headers[512];   /* Access-Control-Request-Headers */
    char extra_headers[512];  /* header lines ("Name: value\r\n") the handler adds to its response, "" if none */
    char *body;               /* NUL-terminated while the handler runs */
    size_t body_len;
    long long content_length; /* -1 if absent */
    int keep_alive;           /* the client allows the connection to stay open */
    int expect_continue;      /* Expect: 100-continue */
    int streaming;            /* SSE headers sent */
    int chunked;              /* the SSE body uses chunked encoding */
    int replied;              /* a response was written */
    int broken;               /* write failed or timed out: client went away */
    volatile int *stop;       /* server shutting down */
} mr_http_req;

typedef void (*mr_http_handler)(void *user, mr_http_req *req);

typedef struct {
    int header_timeout_ms;    /* whole request line + headers (default 10000) */
    int body_timeout_ms;      /* whole body (default 60000) */
    int idle_timeout_ms;      /* keep-alive connection waiting for its next request (default 15000) */
    int send_timeout_ms;      /* one blocked send (default 30000) */
    int max_conn;             /* default MR_HTTP_MAX_CONN */
} mr_http_limits;
void mr_http_limits_default(mr_http_limits *l);

/* Binds and listens on host:port: fd, or -1 (mr_set_error) if it cannot. */
int mr_http_listen(const char *host, int port);
/* Accepts on fd and serves until *stop becomes non-zero; then waits for the connection threads to
 * finish (handlers see req->stop) and returns 0. The handler runs in the connection's thread. */
int mr_http_serve_fd(int fd, const mr_http_limits *lim, mr_http_handler h, void *user, volatile int *stop);

void mr_http_reply(mr_http_req *r, int status, const char *content_type, const char *body, size_t len);
/* As mr_http_reply with extra header lines (each ending in "\r\n"). */
void mr_http_reply_hdr(mr_http_req *r, int status, const char *content_type, const char *extra, const char *body,
                       size_t len);
void mr_http_sse_begin(mr_http_req *r);
void mr_http_sse_send(mr_http_req *r, const char *data, size_t len);   /* one "data: ..." event */
/* One event with a name ("event: NAME\ndata: ...", as the Anthropic API sends them). */
void mr_http_sse_event(mr_http_req *r, const char *event, const char *data, size_t len);
void mr_http_sse_comment(mr_http_req *r, const char *text);            /* ": text" keep-alive line */
void mr_http_sse_end(mr_http_req *r);
/* 1 if the client closed its side, the connection broke or the server is stopping. Cheap (one poll
 * without waiting): call it between tokens. */
int mr_http_client_gone(mr_http_req *r);

/* Parse the request line and headers in buf[len] (all the bytes received so far). Returns 1 when the
 * head is complete (fills req except body; *head_len = its bytes incl. the blank line), 0 if more
 * bytes are needed, -1 malformed or over a limit (*status = 400, 413, 414, 431, 501, 505). */
int mr_http_parse_head(const char *buf, size_t len, mr_http_req *req, size_t *head_len, int *status);
/* Head and body: 1 complete (req->body points into buf), 0 need more bytes, -1 malformed (status set). */
int mr_http_parse(char *buf, size_t len, mr_http_req *req, size_t *consumed, int *status);
#endif
