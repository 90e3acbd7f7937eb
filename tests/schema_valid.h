/* A JSON Schema validator for the subset of src/gen/json_schema.c, written apart from it (on the
 * JSON reader's trees, with JSON Schema's own meanings: additionalProperties absent allows any
 * member, "integer" is any number without a fraction, enum / const compare values, not text), so
 * that the tests check what the recogniser let through against the schema rather than against
 * itself. Beyond JSON Schema, what the recogniser promises about numbers: each one in the text is a
 * finite double (strtod without overflow or underflow to 0) and an integer is one a double holds exactly
 * (|n| <= 2^53). For tests and fuzz targets only. */
#ifndef MR_TESTS_SCHEMA_VALID_H
#define MR_TESTS_SCHEMA_VALID_H
#include "json/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int sv_equal(const mr_json *a, const mr_json *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case MR_JSON_NULL: return 1;
    case MR_JSON_BOOL: case MR_JSON_NUM: return a->num == b->num;
    case MR_JSON_STR: return a->len == b->len && !memcmp(a->str, b->str, a->len);
    case MR_JSON_ARR: {
        const mr_json *x = a->child, *y = b->child;
        for (; x && y; x = x->next, y = y->next)
            if (!sv_equal(x, y)) return 0;
        return !x && !y;
    }
    default: /* objects: the same keys with equal values */
        if (a->len != b->len) return 0;
        for (const mr_json *x = a->child; x; x = x->next) {
            const mr_json *y = mr_json_get(b, x->key);
            if (!y || !sv_equal(x, y)) return 0;
        }
        return 1;
    }
}

static int sv_is(const mr_json *v, const char *type) {
    if (!strcmp(type, "string")) return v->type == MR_JSON_STR;
    if (!strcmp(type, "number")) return v->type == MR_JSON_NUM;
    if (!strcmp(type, "integer")) return v->type == MR_JSON_NUM && v->num == floor(v->num) && fabs(v->num) <= 9007199254740992.0;
    if (!strcmp(type, "boolean")) return v->type == MR_JSON_BOOL;
    if (!strcmp(type, "null")) return v->type == MR_JSON_NULL;
    if (!strcmp(type, "object")) return v->type == MR_JSON_OBJ;
    if (!strcmp(type, "array")) return v->type == MR_JSON_ARR;
    return 0;
}

/* 1 if every number of the JSON text (outside strings) is at most 63 characters and a finite
 * double that strtod reads without overflow or an underflow to 0 */
static int sv_numbers_finite(const char *t, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '"') { /* skip the string */
            for (i++; i < len && t[i] != '"'; i++)
                if (t[i] == '\\') i++;
            continue;
        }
        if (t[i] != '-' && !(t[i] >= '0' && t[i] <= '9')) continue;
        size_t e = i;
        while (e < len && t[e] && strchr("+-.0123456789eE", t[e])) e++;
        char buf[64], *end;
        if (e - i >= sizeof buf) return 0;
        memcpy(buf, t + i, e - i);
        buf[e - i] = 0;
        errno = 0;
        const double v = strtod(buf, &end);
        if (*end || !isfinite(v) || (errno == ERANGE && v == 0)) return 0;
        i = e - 1;
    }
    return 1;
}

/* 1 if v is valid against schema s (root: the whole schema, for $ref) */
static int sv_valid(const mr_json *root, const mr_json *s, const mr_json *v, int depth) {
    if (depth > 200) return 0;
    if (s->type == MR_JSON_BOOL) return s->num != 0;
    const mr_json *k;
    if ((k = mr_json_get(s, "$ref"))) {
        if (k->type != MR_JSON_STR) return 0;
        if (!strcmp(k->str, "#")) return sv_valid(root, root, v, depth + 1);
        const char *name = strrchr(k->str, '/');
        const mr_json *defs = mr_json_get(root, !strncmp(k->str, "#/$defs/", 8) ? "$defs" : "definitions");
        char key[256];
        size_t n = 0;
        for (const char *p = name ? name + 1 : ""; *p && n + 1 < sizeof key; p++) { /* JSON pointer: ~1 '/', ~0 '~' */
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) { key[n++] = p[1] == '1' ? '/' : '~'; p++; }
            else key[n++] = *p;
        }
        key[n] = 0;
        const mr_json *t = name ? mr_json_get(defs, key) : NULL;
        return t && sv_valid(root, t, v, depth + 1);
    }
    if ((k = mr_json_get(s, "anyOf"))) {
        for (const mr_json *a = k->child; a; a = a->next)
            if (sv_valid(root, a, v, depth + 1)) return 1;
        return 0;
    }
    if ((k = mr_json_get(s, "const")) && !sv_equal(k, v)) return 0;
    if ((k = mr_json_get(s, "enum"))) {
        const mr_json *e = k->child;
        while (e && !sv_equal(e, v)) e = e->next;
        if (!e) return 0;
    }
    if ((k = mr_json_get(s, "type"))) {
        int ok = k->type == MR_JSON_STR && sv_is(v, k->str);
        for (const mr_json *t = k->type == MR_JSON_ARR ? k->child : NULL; t; t = t->next) ok |= t->type == MR_JSON_STR && sv_is(v, t->str);
        if (!ok) return 0;
    }
    if (v->type == MR_JSON_OBJ) {
        const mr_json *props = mr_json_get(s, "properties"), *add = mr_json_get(s, "additionalProperties");
        for (const mr_json *r = (k = mr_json_get(s, "required")) ? k->child : NULL; r; r = r->next)
            if (r->type != MR_JSON_STR || !mr_json_get(v, r->str)) return 0;
        for (const mr_json *m = v->child; m; m = m->next) {
            const mr_json *ps = mr_json_get(props, m->key);
            if (ps ? !sv_valid(root, ps, m, depth + 1) : add && !sv_valid(root, add, m, depth + 1)) return 0;
        }
    }
    if (v->type == MR_JSON_ARR) {
        const mr_json *items = mr_json_get(s, "items");
        for (const mr_json *m = v->child; items && m; m = m->next)
            if (!sv_valid(root, items, m, depth + 1)) return 0;
        if ((k = mr_json_get(s, "minItems")) && (double)v->len < k->num) return 0;
        if ((k = mr_json_get(s, "maxItems")) && (double)v->len > k->num) return 0;
    }
    return 1;
}

/* text against the schema text: 1 valid, 0 not (or not JSON) */
static int sv_check(const char *schema, const char *text, size_t len) {
    mr_json *s = mr_json_parse(schema, strlen(schema)), *v = mr_json_parse(text, len);
    const int ok = s && v && sv_valid(s, s, v, 0) && sv_numbers_finite(text, len);
    mr_json_free(s);
    mr_json_free(v);
    return ok;
}
#endif
