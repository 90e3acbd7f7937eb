#include "json/json.h"
#include "base/base.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *s; size_t n, i; int nodes; const char *err; } jp;

static void jp_ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static mr_json *jp_node(jp *p, int type) {
    if (++p->nodes > MR_JSON_MAX_NODES) { p->err = "too many values"; return NULL; }
    mr_json *j = mr_calloc(1, sizeof *j);
    if (!j) { p->err = "out of memory"; return NULL; }
    j->type = type;
    return j;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int jp_hex4(jp *p, uint32_t *out) {
    if (p->n - p->i < 4) return -1;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p->s[p->i + (size_t)k]);
        if (h < 0) return -1;
        v = v * 16 + (uint32_t)h;
    }
    p->i += 4;
    *out = v;
    return 0;
}

/* Parses a string at p->i (after the opening quote); returns a malloc'd copy and its length. */
static char *jp_string(jp *p, size_t *len) {
    /* the unescaped string is never longer than the escaped one */
    size_t start = p->i, end = start;
    while (end < p->n && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->n) { p->err = "unterminated string"; return NULL; }
    char *out = mr_malloc(end - start + 1);
    if (!out) { p->err = "out of memory"; return NULL; }
    size_t o = 0;
    while (p->i < end) {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c < 0x20) { p->err = "control character in string"; goto fail; }
        if (c != '\\') { out[o++] = (char)c; continue; }
        char e = p->s[p->i++];
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (jp_hex4(p, &cp)) { p->err = "bad \\u escape"; goto fail; }
            if (cp >= 0xd800 && cp < 0xdc00) { /* surrogate pair */
                uint32_t lo;
                if (p->i + 2 <= end && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                    p->i += 2;
                    if (jp_hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) { p->err = "bad surrogate pair"; goto fail; }
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else cp = 0xfffd;
            } else if (cp >= 0xdc00 && cp < 0xe000) cp = 0xfffd;
            /* \uXXXX is 6 input bytes, at most 4 output bytes: fits */
            if (cp < 0x80) out[o++] = (char)cp;
            else if (cp < 0x800) { out[o++] = (char)(0xc0 | (cp >> 6)); out[o++] = (char)(0x80 | (cp & 0x3f)); }
            else if (cp < 0x10000) {
                out[o++] = (char)(0xe0 | (cp >> 12)); out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (char)(0x80 | (cp & 0x3f));
            } else {
                out[o++] = (char)(0xf0 | (cp >> 18)); out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[o++] = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default: p->err = "bad escape"; goto fail;
        }
    }
    p->i = end + 1;
    out[o] = 0;
    *len = o;
    return out;
fail:
    free(out);
    return NULL;
}

static mr_json *jp_value(jp *p, int depth);

static mr_json *jp_container(jp *p, int depth, int is_obj) {
    mr_json *j = jp_node(p, is_obj ? MR_JSON_OBJ : MR_JSON_ARR), **tail;
    if (!j) return NULL;
    tail = &j->child;
    p->i++; /* [ or { */
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == (is_obj ? '}' : ']')) { p->i++; return j; }
    for (;;) {
        char *key = NULL;
        size_t klen;
        jp_ws(p);
        if (is_obj) {
            if (p->i >= p->n || p->s[p->i] != '"') { p->err = "expected member name"; goto fail; }
            p->i++;
            if (!(key = jp_string(p, &klen))) goto fail;
            jp_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { free(key); p->err = "expected ':'"; goto fail; }
            p->i++;
        }
        mr_json *c = jp_value(p, depth + 1);
        if (!c) { free(key); goto fail; }
        c->key = key;
        *tail = c;
        tail = &c->next;
        j->len++;
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == (is_obj ? '}' : ']')) { p->i++; return j; }
        p->err = is_obj ? "expected ',' or '}'" : "expected ',' or ']'";
        goto fail;
    }
fail:
    mr_json_free(j);
    return NULL;
}

static mr_json *jp_value(jp *p, int depth) {
    if (depth > MR_JSON_MAX_DEPTH) { p->err = "nested too deeply"; return NULL; }
    jp_ws(p);
    if (p->i >= p->n) { p->err = "unexpected end of input"; return NULL; }
    char c = p->s[p->i];
    if (c == '{' || c == '[') return jp_container(p, depth, c == '{');
    if (c == '"') {
        p->i++;
        mr_json *j = jp_node(p, MR_JSON_STR);
        if (!j) return NULL;
        if (!(j->str = jp_string(p, &j->len))) { free(j); return NULL; }
        return j;
    }
    static const struct { const char *w; int type; double v; } lits[] = {
        {"true", MR_JSON_BOOL, 1}, {"false", MR_JSON_BOOL, 0}, {"null", MR_JSON_NULL, 0}};
    for (size_t k = 0; k < 3; k++) {
        size_t wl = strlen(lits[k].w);
        if (p->n - p->i >= wl && !memcmp(p->s + p->i, lits[k].w, wl)) {
            p->i += wl;
            mr_json *j = jp_node(p, lits[k].type);
            if (j) j->num = lits[k].v;
            return j;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t k = 0;
        while (p->i < p->n && k < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[p->i])) buf[k++] = p->s[p->i++];
        buf[k] = 0;
        char *end;
        double v = strtod(buf, &end);
        if (*end || !isfinite(v)) { p->err = "bad number"; return NULL; }
        mr_json *j = jp_node(p, MR_JSON_NUM);
        if (j) j->num = v;
        return j;
    }
    p->err = "unexpected character";
    return NULL;
}

mr_json *mr_json_parse(const char *text, size_t len) {
    jp p = {text, len, 0, 0, NULL};
    mr_json *j = jp_value(&p, 0);
    if (j) {
        jp_ws(&p);
        if (p.i != p.n) { mr_json_free(j); j = NULL; p.err = "trailing characters after the value"; }
    }
    if (!j) mr_set_error("json: %s at byte %zu", p.err ? p.err : "error", p.i);
    return j;
}

void mr_json_free(mr_json *j) {
    while (j) {
        mr_json *next = j->next;
        mr_json_free(j->child);
        free(j->str);
        free(j->key);
        free(j);
        j = next;
    }
}

const mr_json *mr_json_get(const mr_json *obj, const char *key) {
    if (!obj || obj->type != MR_JSON_OBJ) return NULL;
    const mr_json *found = NULL;
    for (const mr_json *c = obj->child; c; c = c->next)
        if (c->key && !strcmp(c->key, key)) found = c; /* last one wins, like most parsers */
    return found;
}

const char *mr_json_get_str(const mr_json *obj, const char *key, const char *def) {
    const mr_json *v = mr_json_get(obj, key);
    return v && v->type == MR_JSON_STR ? v->str : def;
}

double mr_json_get_num(const mr_json *obj, const char *key, double def) {
    const mr_json *v = mr_json_get(obj, key);
    return v && v->type == MR_JSON_NUM ? v->num : def;
}

int mr_json_get_bool(const mr_json *obj, const char *key, int def) {
    const mr_json *v = mr_json_get(obj, key);
    return v && v->type == MR_JSON_BOOL ? (int)v->num : def;
}

static void dump(mr_sbuf *b, const mr_json *v) {
    switch (v->type) {
    case MR_JSON_NULL: mr_sbuf_puts(b, "null"); break;
    case MR_JSON_BOOL: mr_sbuf_puts(b, v->num ? "true" : "false"); break;
    case MR_JSON_NUM:
        if (v->num == floor(v->num) && fabs(v->num) < 1e15) mr_sbuf_printf(b, "%.0f", v->num);
        else mr_sbuf_printf(b, "%.17g", v->num);
        break;
    case MR_JSON_STR: mr_sbuf_json_str(b, v->str, v->len); break;
    default: {
        const int obj = v->type == MR_JSON_OBJ;
        mr_sbuf_puts(b, obj ? "{" : "[");
        for (const mr_json *c = v->child; c; c = c->next) {
            if (c != v->child) mr_sbuf_puts(b, ", ");
            if (obj) { mr_sbuf_json_str(b, c->key, strlen(c->key)); mr_sbuf_puts(b, ": "); }
            dump(b, c);
        }
        mr_sbuf_puts(b, obj ? "}" : "]");
    }
    }
}

char *mr_json_dump(const mr_json *v) {
    mr_sbuf b = {0};
    dump(&b, v);
    if (b.oom) { mr_sbuf_free(&b); return NULL; }
    return b.p ? b.p : mr_strdup("");
}

void mr_sbuf_add(mr_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = mr_realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void mr_sbuf_puts(mr_sbuf *b, const char *s) { mr_sbuf_add(b, s, strlen(s)); }

void mr_sbuf_printf(mr_sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { mr_sbuf_add(b, tmp, (size_t)n); return; }
    char *big = mr_malloc((size_t)n + 1);
    if (!big) { b->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    mr_sbuf_add(b, big, (size_t)n);
    free(big);
}

/* bytes of the well-formed UTF-8 character at s[i] (RFC 3629: no overlong forms, surrogates or
 * code points above U+10FFFF), 0 if there is none */
static size_t utf8_char(const unsigned char *s, size_t n, size_t i) {
    const unsigned char c = s[i];
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) need = 2;
    else if (c >= 0xe0 && c <= 0xef) { need = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { need = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (n - i < need || s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (size_t k = 2; k < need; k++)
        if ((s[i + k] & 0xc0) != 0x80) return 0;
    return need;
}

/* (a byte that does not start a well-formed UTF-8 character is written as U+FFFD: every JSON text
 * written is valid UTF-8; a text cut only between characters, or where the cut sequence is
 * ill-formed anyway, gives the same characters in pieces as whole) */
void mr_sbuf_json_str(mr_sbuf *b, const char *s, size_t n) {
    mr_sbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            const size_t k = utf8_char((const unsigned char *)s, n, i);
            if (k) mr_sbuf_add(b, s + i, k);
            else mr_sbuf_add(b, "\xef\xbf\xbd", 3);
            i += k ? k - 1 : 0;
            continue;
        }
        switch (c) {
        case '"': mr_sbuf_add(b, "\\\"", 2); break;
        case '\\': mr_sbuf_add(b, "\\\\", 2); break;
        case '\n': mr_sbuf_add(b, "\\n", 2); break;
        case '\r': mr_sbuf_add(b, "\\r", 2); break;
        case '\t': mr_sbuf_add(b, "\\t", 2); break;
        default:
            if (c < 0x20) mr_sbuf_printf(b, "\\u%04x", c);
            else mr_sbuf_add(b, (const char *)&s[i], 1);
        }
    }
    mr_sbuf_add(b, "\"", 1);
}

void mr_sbuf_free(mr_sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
