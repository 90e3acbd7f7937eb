/* libFuzzer target for the HTTP request parser (mr_http_parse), fed as the server feeds it: the
 * received bytes grow in chunks (sizes from the first input byte) and the parser is asked again
 * after each "need more". Checks: an answer of 1 names a body inside the received bytes and within
 * the limits, method and path are NUL-terminated; -1 carries an HTTP error status; a complete
 * request stays complete (same length) when more bytes arrive. */
#include "server/http.h"
#include "fuzz_common.h"

/* the statuses mr_http_parse gives (src/server/http.c) */
static int known_status(int s) {
    return s == 400 || s == 413 || s == 414 || s == 431 || s == 500 || s == 501 || s == 505;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    size_t chunk = (size_t)fuzz_u8(&in) * 37 + 1;
    /* the server keeps one spare byte for a terminating NUL */
    char *buf = malloc(in.n + 1);
    if (!buf) return 0;
    memcpy(buf, in.p, in.n);
    buf[in.n] = 0;
    size_t done_len = 0, done_consumed = 0;
    for (size_t len = in.n < chunk ? in.n : chunk;; len = len + chunk < in.n ? len + chunk : in.n) {
        mr_http_req req;
        memset(&req, 0, sizeof req);
        size_t consumed = 0;
        int status = 0;
        char save = buf[len];
        buf[len] = 0;
        int r = mr_http_parse(buf, len, &req, &consumed, &status);
        buf[len] = save;
        FUZZ_CHECK(r == -1 || r == 0 || r == 1);
        if (r == 1) {
            FUZZ_CHECK(consumed <= len && req.body >= buf && req.body + req.body_len == buf + consumed);
            FUZZ_CHECK(req.body_len <= MR_HTTP_MAX_BODY);
            FUZZ_CHECK(memchr(req.method, 0, sizeof req.method) && memchr(req.path, 0, sizeof req.path));
            FUZZ_CHECK(req.method[0] && req.path[0]);
            if (done_len) FUZZ_CHECK(consumed == done_consumed);
            done_len = len;
            done_consumed = consumed;
        } else if (r == -1) {
            FUZZ_CHECK(known_status(status));
            FUZZ_CHECK(!done_len); /* more bytes after a complete request are the next request's */
            break;
        } else {
            FUZZ_CHECK(!done_len);
        }
        if (len == in.n) break;
    }
    free(buf);
    return 0;
}
