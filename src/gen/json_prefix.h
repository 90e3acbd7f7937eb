/* An incremental recogniser of JSON-object prefixes, byte by byte: constrained sampling for
 * response_format json_object (generate.c masks every token whose bytes would take the text out of
 * the set of prefixes of a valid JSON object). A subset of JSON that keeps a model from spending its
 * tokens on whitespace: the object starts at the first byte, whitespace comes in runs of at most
 * MR_JSONP_MAX_WS bytes, and nothing but whitespace may follow the object. Nesting is bounded
 * (MR_JSONP_MAX_DEPTH containers): a deeper '{' or '[' is refused, so the state is a small fixed
 * struct that is cheap to copy for trying a token.
 * Strings take any byte >= 0x20 but '"' and '\\' unescaped (UTF-8 is not checked); escapes are
 * JSON's; numbers and the literals true, false, null follow the JSON grammar exactly. */
#ifndef MR_GEN_JSON_PREFIX_H
#define MR_GEN_JSON_PREFIX_H
#include <stddef.h>
#include <stdint.h>

#define MR_JSONP_MAX_DEPTH 32
#define MR_JSONP_MAX_WS 8

typedef struct {
    uint8_t mode;                        /* what the next byte may be (json_prefix.c: enum jp_mode) */
    uint8_t depth;                       /* open containers */
    uint8_t lit, lit_pos;                /* a literal being matched: which one, bytes matched */
    uint8_t key;                         /* the string being read is an object key */
    uint8_t ws;                          /* whitespace bytes in a row so far */
    char stack[MR_JSONP_MAX_DEPTH];      /* '{' or '[' per open container */
} mr_jsonp;

void mr_jsonp_init(mr_jsonp *s);
/* Feed bytes: 0 if the text so far is still a prefix of a valid JSON object (s advanced), -1 if
 * not (s is then unspecified: feed a copy to try). */
int mr_jsonp_feed(mr_jsonp *s, const char *p, size_t n);
/* 1 when the text is a whole JSON object (then only whitespace may follow). */
int mr_jsonp_done(const mr_jsonp *s);
#endif
