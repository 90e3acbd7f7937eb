/* An incremental recogniser of JSON prefixes, byte by byte, for constrained sampling: response_format
 * json_object (any JSON object) and json_schema (a value valid against a compiled JSON Schema of the
 * subset in json_schema.c). generate.c masks every token whose bytes would take the text out of the
 * set of prefixes of an accepted value. A subset of JSON that keeps a model from spending its tokens
 * on whitespace or digits: the value starts at the first byte, whitespace comes in runs of at most
 * MR_JSONP_MAX_WS bytes, and nothing but whitespace may follow the value. Nesting is bounded
 * (MR_JSONP_MAX_DEPTH containers): a deeper '{' or '[' is refused, so the state is a fixed struct.
 * Strings take any byte >= 0x20 but '"' and '\\' unescaped (UTF-8 is not checked); escapes are
 * JSON's; the literals true, false, null follow the JSON grammar exactly, and so do numbers, with
 * bounded parts: at most MR_JSONP_MAX_INT_DIGITS digits before the point (an integer below 10^15 is
 * exact as a double and fits int64), MR_JSONP_MAX_FRAC_DIGITS after it and MR_JSONP_MAX_EXP_DIGITS
 * in the exponent, so every number is below 10^115 in magnitude (a finite double) and no run of
 * digits or whitespace goes on for ever.
 *
 * The recogniser is a pushdown automaton: a stack of frames (the root, open containers, the scalar
 * or key being read) per thread. anyOf forks threads (at most MR_JSONP_MAX_ALT live at once: an
 * alternative beyond that is dropped, so the language shrinks but stays valid); a thread that cannot
 * take a byte dies, and the text is a prefix while any thread lives. */
#ifndef MR_GEN_JSON_PREFIX_H
#define MR_GEN_JSON_PREFIX_H
#include <stddef.h>
#include <stdint.h>

#define MR_JSONP_MAX_DEPTH 32
#define MR_JSONP_MAX_WS 2
#define MR_JSONP_MAX_INT_DIGITS 15
#define MR_JSONP_MAX_FRAC_DIGITS 15
#define MR_JSONP_MAX_EXP_DIGITS 2
#define MR_JSONP_MAX_ALT 8
#define MR_JSONP_MAX_PROPS 64   /* properties per object schema (a 64-bit mask says which are present) */
#define MR_JSONP_MAX_NODES 4096 /* schema nodes after compiling */
#define MR_JSONP_MAX_LITS 60000 /* property names and enum / const values over the whole schema */

/* Schema node kinds (json_schema.c compiles into them; $ref and anyOf nest only during compiling:
 * the automaton sees anyOf alternatives that are all concrete). */
enum { JS_ANY, JS_OBJ, JS_ARR, JS_STR, JS_NUM, JS_INT, JS_LIT, JS_ANYOF, JS_REF, JS_SEQ, JS_PICK };
#define JS_OBJ_ONLY 1           /* JS_ANY flag: an object of anything (json_object) */
#define JS_DSML 2               /* JS_OBJ flag: written as DeepSeek-V4 DSML parameters, not as JSON */
#define JS_PICKS 4              /* JS_LIT flag: each literal's node is what a following JS_PICK reads */
#define JS_NONE 0xffffu         /* no node (additionalProperties false) */
/* Every schema starts with these two nodes: any value, and the literals false / null / true that
 * any value uses. */
#define JS_NODE_ANY 0
#define JS_NODE_TFN 1

typedef struct {
    uint8_t kind, flags;
    uint16_t a;                 /* ARR: items; OBJ: additionalProperties (JS_NONE: refused); REF: target */
    uint32_t first, count;      /* LIT / OBJ: entries in lit[] (sorted); ANYOF, SEQ: entries in alt[] */
    uint64_t required;          /* OBJ: properties that must be present (bit i: lit[first + i]) */
    uint32_t min, max;          /* ARR: minItems, maxItems */
} mr_jsnode;

/* a literal: an enum / const value as JSON text, a property name as it is written between the
 * quotes (node: the property's schema), a function's name with the text after it (node: its
 * arguments), or a piece of DSML syntax (node: a DSML_TAG_*) */
typedef struct { uint32_t off, len; uint16_t node; } mr_jslit;

typedef struct mr_jschema {
    mr_jsnode *node;
    int n_node;
    mr_jslit *lit;
    int n_lit;
    char *bytes;                /* literal text */
    uint16_t *alt;
    int n_alt;
    uint16_t root;
    uint16_t dsml[9];           /* the JS_LIT nodes of DSML syntax (json_prefix.c: enum dsml_lits) */
} mr_jschema;
enum { DSML_TAG_PARAM = 1, DSML_TAG_CLOSE, DSML_TAG_TRUE, DSML_TAG_FALSE };
/* dsml[]: the first parameter or the close, just the parameter, just the close; the same after a
 * parameter; ` string="true">`, ` string="false">`; the parameter's closing tag */
enum dsml_lits { DL_FIRST, DL_FIRST_PARAM, DL_FIRST_CLOSE, DL_NEXT, DL_NEXT_PARAM, DL_NEXT_CLOSE, DL_TRUE, DL_FALSE, DL_TERM };

/* Compile a JSON Schema (text) for the recogniser; NULL after mr_set_error naming the keyword or the
 * limit that is outside the subset (json_schema.c). */
mr_jschema *mr_jschema_compile(const char *text, size_t len);
void mr_jschema_free(mr_jschema *sc);
/* A tool call for constrained sampling: prefix NAME middle ARGUMENTS suffix (mr_gen_calls in
 * moerun.h); NULL after mr_set_error. */
struct mr_gen_calls;
mr_jschema *mr_jschema_compile_calls(const struct mr_gen_calls *calls);

typedef struct {
    uint16_t node;              /* the frame's schema node */
    uint16_t cur;               /* object: the property (index from the node's first) whose value is read */
    uint8_t mode;               /* what the next byte may be (json_prefix.c: enum jp_mode) */
    uint8_t aux;                /* string: \u digits to go; schema key: KEY_* flags */
    uint16_t pick;              /* sequence: the node the last name chose (JS_PICK) */
    union {
        uint64_t seen;          /* schema object: properties present */
        uint32_t count;         /* array: items so far; sequence: parts done */
        struct { uint32_t lo, pos; } m;  /* literal / key: candidates lit[lo..] matched for pos bytes;
                                          * number: pos digits in the part being read */
    } u;
    uint32_t hi;                /* literal / key: end of the candidates */
    uint32_t pad2;
} mr_jsonp_frame;

typedef struct {
    uint8_t depth;              /* frames in use (frame 0: the root) */
    uint8_t ws;                 /* whitespace bytes in a row so far */
    mr_jsonp_frame f[MR_JSONP_MAX_DEPTH + 2];
} mr_jsonp_thread;

typedef struct {
    const mr_jschema *sc;
    uint8_t n;                  /* live threads */
    mr_jsonp_thread t[MR_JSONP_MAX_ALT];
} mr_jsonp;

/* json_object: a JSON object of anything. */
void mr_jsonp_init(mr_jsonp *s);
/* json_schema: a value of sc (which must outlive s). */
void mr_jsonp_init_schema(mr_jsonp *s, const mr_jschema *sc);
/* Copy the live part of src (cheaper than a struct copy). */
void mr_jsonp_copy(mr_jsonp *dst, const mr_jsonp *src);
/* Feed bytes: 0 if the text so far is still a prefix of an accepted value (s advanced), -1 if not
 * (s is then unspecified: feed a copy to try). */
int mr_jsonp_feed(mr_jsonp *s, const char *p, size_t n);
/* 1 when the text is a whole accepted value (more bytes may still continue it: a number). */
int mr_jsonp_done(const mr_jsonp *s);
/* 1 when the value is whole and nothing but whitespace may follow (the reply can end). */
int mr_jsonp_closed(const mr_jsonp *s);
/* Text any bytes of a kind leave in an equivalent state: bit 0, every thread is inside a JSON string,
 * which takes bytes >= 0x20 other than '"' and '\\'; bit 1, inside DSML raw text (or, with bit 0, a
 * JSON string in a DSML parameter) with no part of the closing tag matched, which takes bytes other
 * than '<'. 0: neither. */
int mr_jsonp_in_text(const mr_jsonp *s);
#endif
