/* A small JSON reader for untrusted request bodies (bounded depth, sizes checked) and a string
 * builder for responses. Values are parsed into a flat node array; strings are unescaped copies. */
#ifndef MR_JSON_H
#define MR_JSON_H
#include <stddef.h>
#include <stdint.h>

enum mr_json_type { MR_JSON_NULL, MR_JSON_BOOL, MR_JSON_NUM, MR_JSON_STR, MR_JSON_ARR, MR_JSON_OBJ };

typedef struct mr_json {
    int type;
    double num;              /* NUM; BOOL: 0/1 */
    char *str;               /* STR: unescaped, NUL-terminated (may contain NUL; see len) */
    size_t len;              /* STR: bytes; ARR/OBJ: number of children */
    char *key;               /* member name when the parent is an object */
    struct mr_json *child;   /* first child (ARR/OBJ) */
    struct mr_json *next;    /* next sibling */
} mr_json;

#define MR_JSON_MAX_DEPTH 64
#define MR_JSON_MAX_NODES 100000

/* Parse text[len]; NULL + mr_set_error("json: ...") on malformed input or limits exceeded. */
mr_json *mr_json_parse(const char *text, size_t len);
void mr_json_free(mr_json *j);
const mr_json *mr_json_get(const mr_json *obj, const char *key); /* NULL if absent or obj not an object */
const char *mr_json_get_str(const mr_json *obj, const char *key, const char *def);
double mr_json_get_num(const mr_json *obj, const char *key, double def);
int mr_json_get_bool(const mr_json *obj, const char *key, int def);
/* JSON text of a value with Python json.dumps's separators (", " and ": "; the spacing chat templates
 * were trained with); integers without a fraction, other numbers with %.17g. malloc'd, NULL if OOM. */
char *mr_json_dump(const mr_json *v);

/* growable output buffer */
typedef struct { char *p; size_t n, cap; int oom; } mr_sbuf;
void mr_sbuf_add(mr_sbuf *b, const char *s, size_t n);
void mr_sbuf_puts(mr_sbuf *b, const char *s);
void mr_sbuf_printf(mr_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mr_sbuf_json_str(mr_sbuf *b, const char *s, size_t n); /* quoted, escaped JSON string */
void mr_sbuf_free(mr_sbuf *b);
#endif
