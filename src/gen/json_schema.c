/* JSON Schema compiler for the prefix recogniser (json_prefix.h). The subset (docs/SERVER.md):
 * type (a name or a list of names), properties, required, additionalProperties (false, true or a
 * schema; absent with properties: false, as llama.cpp does, so a model cannot invent keys; absent
 * without: any member), enum, const, items (one schema), minItems, maxItems, anyOf, $ref to "#",
 * "#/$defs/NAME" or "#/definitions/NAME", and the annotations (title, description, ...), which are
 * ignored. Any other keyword is refused with its name and where it is, never ignored: the reply
 * would not be held to it.
 * The result is a node array: objects keep their property names sorted (a key is matched by
 * narrowing a contiguous range), enum / const values are their JSON text as mr_json_dump writes it
 * (sorted: the same narrowing), $ref is resolved and anyOf flattened to concrete alternatives. */
#include "gen/json_prefix.h"
#include "json/json.h"
#include "base/base.h"
#include "moerun.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mr_jschema *sc;
    int cap_node, cap_lit, cap_alt;
    size_t n_bytes, cap_bytes;
    const mr_json *root;
    struct memo { const mr_json *j; uint16_t node; } *memo;
    int n_memo, cap_memo;
    char path[256];               /* where the compiler is, for messages: #/properties/x/items */
    int dsml_next;                /* the next object compiled is a tool's DSML arguments */
    uint8_t *state;               /* per node while flattening anyOf: 0 new, 1 open, 2 done */
    mr_json **trees;              /* tool calls: the parsed schemas of the functions */
    int n_trees, cap_trees;
} cc;

static const char *const annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "$defs", "definitions",
};
static const char *const keywords[] = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems", "maxItems",
    "anyOf", "$ref",
};

static int in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return 1;
    return 0;
}

static int fail(cc *c, const char *what) {
    mr_set_error("json_schema: %s (at %s)", what, c->path[0] ? c->path : "#");
    return -1;
}

static int node_new(cc *c) {
    mr_jschema *sc = c->sc;
    if (sc->n_node >= MR_JSONP_MAX_NODES) return fail(c, "more than 4096 schema nodes");
    if (sc->n_node == c->cap_node) {
        int cap = c->cap_node ? 2 * c->cap_node : 16;
        mr_jsnode *p = mr_realloc(sc->node, sizeof *p * (size_t)cap);
        if (!p) return fail(c, "out of memory");
        sc->node = p;
        c->cap_node = cap;
    }
    memset(&sc->node[sc->n_node], 0, sizeof sc->node[0]);
    sc->node[sc->n_node].a = JS_NONE;
    return sc->n_node++;
}

static int lit_add(cc *c, const char *p, size_t n, uint16_t node) {
    mr_jschema *sc = c->sc;
    if (sc->n_lit >= MR_JSONP_MAX_LITS || n > UINT32_MAX / 4 || c->n_bytes + n > UINT32_MAX / 2)
        return fail(c, "too many enum values or property names");
    if (sc->n_lit == c->cap_lit) {
        int cap = c->cap_lit ? 2 * c->cap_lit : 16;
        mr_jslit *q = mr_realloc(sc->lit, sizeof *q * (size_t)cap);
        if (!q) return fail(c, "out of memory");
        sc->lit = q;
        c->cap_lit = cap;
    }
    if (c->n_bytes + n + 1 > c->cap_bytes) {
        size_t cap = c->cap_bytes ? 2 * c->cap_bytes : 256;
        while (cap < c->n_bytes + n + 1) cap *= 2;
        char *q = mr_realloc(sc->bytes, cap);
        if (!q) return fail(c, "out of memory");
        sc->bytes = q;
        c->cap_bytes = cap;
    }
    memcpy(sc->bytes + c->n_bytes, p, n);
    sc->lit[sc->n_lit++] = (mr_jslit){(uint32_t)c->n_bytes, (uint32_t)n, node};
    c->n_bytes += n;
    return 0;
}

static int alt_add(cc *c, uint16_t node) {
    mr_jschema *sc = c->sc;
    if (sc->n_alt == c->cap_alt) {
        int cap = c->cap_alt ? 2 * c->cap_alt : 16;
        uint16_t *q = mr_realloc(sc->alt, sizeof *q * (size_t)cap);
        if (!q) return fail(c, "out of memory");
        sc->alt = q;
        c->cap_alt = cap;
    }
    sc->alt[sc->n_alt++] = node;
    return 0;
}

/* byte order, a prefix before its extensions: the entries sharing a prefix are contiguous */
static int lit_cmp(const void *a, const void *b, void *ctx) {
    const mr_jslit *x = a, *y = b;
    const char *bytes = ctx;
    const uint32_t n = x->len < y->len ? x->len : y->len;
    const int r = memcmp(bytes + x->off, bytes + y->off, n);
    return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* sort lit[first..) and drop repeated values; returns the count left */
static uint32_t lits_sort(cc *c, uint32_t first) {
    mr_jschema *sc = c->sc;
    uint32_t n = (uint32_t)sc->n_lit - first, m = 0;
    qsort_r(sc->lit + first, n, sizeof sc->lit[0], lit_cmp, sc->bytes);
    for (uint32_t i = 0; i < n; i++)
        if (!m || lit_cmp(&sc->lit[first + m - 1], &sc->lit[first + i], sc->bytes)) sc->lit[first + m++] = sc->lit[first + i];
    sc->n_lit = (int)(first + m);
    return m;
}

static size_t path_push(cc *c, const char *seg) {
    const size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, "%s%s", n ? "/" : "#/", seg);
    return n;
}

static int compile(cc *c, const mr_json *j);

/* the schema a $ref names */
static const mr_json *ref_target(cc *c, const char *ref) {
    if (!strcmp(ref, "#")) return c->root;
    const char *name = NULL;
    const mr_json *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) { defs = mr_json_get(c->root, "$defs"); name = ref + 8; }
    else if (!strncmp(ref, "#/definitions/", 14)) { defs = mr_json_get(c->root, "definitions"); name = ref + 14; }
    if (!name) { fail(c, "'$ref' must be \"#\", \"#/$defs/NAME\" or \"#/definitions/NAME\""); return NULL; }
    char key[256];
    size_t k = 0;
    for (const char *p = name; *p; p++) { /* JSON pointer: ~1 is '/', ~0 is '~' */
        if (k + 1 >= sizeof key || *p == '/') { fail(c, "'$ref' names no definition"); return NULL; }
        if (*p == '~' && (p[1] == '0' || p[1] == '1')) { key[k++] = p[1] == '1' ? '/' : '~'; p++; }
        else key[k++] = *p;
    }
    key[k] = 0;
    const mr_json *t = mr_json_get(defs, key);
    if (!t) { fail(c, "'$ref' names no definition"); return NULL; }
    return t;
}

static int json_is(const mr_json *v, const char *type) {
    if (!strcmp(type, "string")) return v->type == MR_JSON_STR;
    if (!strcmp(type, "number")) return v->type == MR_JSON_NUM;
    /* an integer a double holds exactly, as the recogniser's integers are (json_prefix.h) */
    if (!strcmp(type, "integer")) return v->type == MR_JSON_NUM && v->num == floor(v->num) && fabs(v->num) <= 9007199254740992.0;
    if (!strcmp(type, "boolean")) return v->type == MR_JSON_BOOL;
    if (!strcmp(type, "null")) return v->type == MR_JSON_NULL;
    if (!strcmp(type, "object")) return v->type == MR_JSON_OBJ;
    if (!strcmp(type, "array")) return v->type == MR_JSON_ARR;
    return 0;
}

static int type_known(const char *t) {
    static const char *const names[] = {"string", "number", "integer", "boolean", "null", "object", "array"};
    return in_list(t, names, sizeof names / sizeof *names);
}

/* the value matches the schema's "type" (any of a list; true when there is none) */
static int type_ok(const mr_json *type, const mr_json *v) {
    if (!type) return 1;
    if (type->type == MR_JSON_STR) return json_is(v, type->str);
    for (const mr_json *t = type->child; t; t = t->next)
        if (t->type == MR_JSON_STR && json_is(v, t->str)) return 1;
    return 0;
}

/* enum / const: the values as literals */
static int compile_lits(cc *c, const mr_json *j, int idx) {
    const mr_json *en = mr_json_get(j, "enum"), *co = mr_json_get(j, "const"), *type = mr_json_get(j, "type");
    if (en && co) return fail(c, "'enum' beside 'const' is not supported");
    if (en && en->type != MR_JSON_ARR) return fail(c, "'enum' must be an array");
    const uint32_t first = (uint32_t)c->sc->n_lit;
    for (const mr_json *v = en ? en->child : co; v; v = en ? v->next : NULL) {
        if (!type_ok(type, v)) continue;
        char *t = mr_json_dump(v);
        if (!t) return fail(c, "out of memory");
        int rc = lit_add(c, t, strlen(t), JS_NONE);
        free(t);
        if (rc) return -1;
    }
    const uint32_t n = lits_sort(c, first);
    if (!n) return fail(c, en ? "no value of 'enum' has the schema's type" : "'const' does not have the schema's type");
    c->sc->node[idx] = (mr_jsnode){.kind = JS_LIT, .a = JS_NONE, .first = first, .count = n};
    return 0;
}

static int compile_object(cc *c, const mr_json *j, int idx) {
    const int dsml = c->dsml_next; /* this object only, not the ones inside it */
    c->dsml_next = 0;
    const mr_json *props = mr_json_get(j, "properties"), *req = mr_json_get(j, "required");
    const mr_json *add = mr_json_get(j, "additionalProperties");
    if (props && props->type != MR_JSON_OBJ) return fail(c, "'properties' must be an object");
    if (req && req->type != MR_JSON_ARR) return fail(c, "'required' must be an array");
    const size_t np = props ? props->len : 0;
    if (np > MR_JSONP_MAX_PROPS) return fail(c, "more than 64 properties in an object");
    int a = JS_NONE;
    if (add) {
        size_t l = path_push(c, "additionalProperties");
        if (add->type == MR_JSON_BOOL) a = add->num ? JS_NODE_ANY : JS_NONE;
        else if ((a = compile(c, add)) < 0) return -1;
        c->path[l] = 0;
    } else if (!np) {
        a = JS_NODE_ANY;
    }
    if (!np && !(req && req->len) && a == JS_NODE_ANY && !dsml) { /* an object of anything (keys may use escapes) */
        c->sc->node[idx] = (mr_jsnode){.kind = JS_ANY, .flags = JS_OBJ_ONLY, .a = JS_NONE};
        return 0;
    }
    uint16_t kids[MR_JSONP_MAX_PROPS];
    size_t k = 0;
    for (const mr_json *p = props ? props->child : NULL; p; p = p->next, k++) {
        for (const mr_json *q = props->child; q != p; q = q->next)
            if (!strcmp(q->key, p->key)) return fail(c, "a property is named twice");
        size_t l = path_push(c, "properties/");
        snprintf(c->path + strlen(c->path), sizeof c->path - strlen(c->path), "%s", p->key);
        int n = compile(c, p);
        if (n < 0) return -1;
        kids[k] = (uint16_t)n;
        c->path[l] = 0;
    }
    /* the names, contiguous after everything the property schemas added */
    const uint32_t first = (uint32_t)c->sc->n_lit;
    k = 0;
    for (const mr_json *p = props ? props->child : NULL; p; p = p->next, k++) {
        mr_sbuf b = {0};
        if (dsml) mr_sbuf_printf(&b, "\"%s\"", p->key); /* DSML names are written as they are */
        else mr_sbuf_json_str(&b, p->key, strlen(p->key));
        int rc = b.oom ? fail(c, "out of memory") : lit_add(c, b.p + 1, b.n - 2, kids[k]);
        mr_sbuf_free(&b);
        if (rc) return -1;
    }
    if (lits_sort(c, first) != np) return fail(c, "a property is named twice");
    uint64_t required = 0;
    for (const mr_json *r = req ? req->child : NULL; r; r = r->next) {
        if (r->type != MR_JSON_STR) return fail(c, "'required' must list strings");
        mr_sbuf b = {0};
        if (dsml) mr_sbuf_printf(&b, "\"%s\"", r->str);
        else mr_sbuf_json_str(&b, r->str, r->len);
        if (b.oom) return fail(c, "out of memory");
        size_t i = 0;
        for (; i < np; i++) {
            const mr_jslit *l = &c->sc->lit[first + i];
            if (l->len == b.n - 2 && !memcmp(c->sc->bytes + l->off, b.p + 1, l->len)) break;
        }
        mr_sbuf_free(&b);
        if (i == np) return fail(c, "'required' names a property that 'properties' does not have");
        required |= (uint64_t)1 << i;
    }
    c->sc->node[idx] = (mr_jsnode){.kind = JS_OBJ, .flags = dsml ? JS_DSML : 0, .a = (uint16_t)a, .first = first,
                                   .count = (uint32_t)np, .required = required};
    return 0;
}

static int count_of(cc *c, const mr_json *v, const char *name, uint32_t *out) {
    if (!v) return 0;
    if (v->type != MR_JSON_NUM || !(v->num >= 0 && v->num < 4294967295.0) || v->num != (double)(uint32_t)v->num)
        return mr_set_error("json_schema: '%s' must be a non-negative integer (at %s)", name, c->path[0] ? c->path : "#"), -1;
    *out = (uint32_t)v->num;
    return 0;
}

static int compile_array(cc *c, const mr_json *j, int idx) {
    const mr_json *items = mr_json_get(j, "items");
    uint32_t mn = 0, mx = UINT32_MAX;
    if (count_of(c, mr_json_get(j, "minItems"), "minItems", &mn) || count_of(c, mr_json_get(j, "maxItems"), "maxItems", &mx)) return -1;
    if (mn > mx) return fail(c, "'minItems' is above 'maxItems'");
    int it = JS_NODE_ANY;
    if (items) {
        if (items->type == MR_JSON_ARR) return fail(c, "'items' as a list (tuples) is not supported");
        size_t l = path_push(c, "items");
        if ((it = compile(c, items)) < 0) return -1;
        c->path[l] = 0;
    }
    c->sc->node[idx] = (mr_jsnode){.kind = JS_ARR, .a = (uint16_t)it, .min = mn, .max = mx};
    return 0;
}

static int compile_type(cc *c, const mr_json *j, const char *type, int idx) {
    if (!strcmp(type, "object")) return compile_object(c, j, idx);
    if (!strcmp(type, "array")) return compile_array(c, j, idx);
    mr_jsnode *n = &c->sc->node[idx];
    if (!strcmp(type, "string")) { n->kind = JS_STR; return 0; }
    if (!strcmp(type, "number")) { n->kind = JS_NUM; return 0; }
    if (!strcmp(type, "integer")) { n->kind = JS_INT; return 0; }
    /* null: the literal of any value; boolean: false, true */
    if (!strcmp(type, "null")) { *n = (mr_jsnode){.kind = JS_LIT, .a = JS_NONE, .first = 1, .count = 1}; return 0; }
    const uint32_t first = (uint32_t)c->sc->n_lit;
    if (lit_add(c, "false", 5, JS_NONE) || lit_add(c, "true", 4, JS_NONE)) return -1;
    c->sc->node[idx] = (mr_jsnode){.kind = JS_LIT, .a = JS_NONE, .first = first, .count = 2};
    return 0;
}

/* the schema j into node idx */
static int compile_into(cc *c, const mr_json *j, int idx) {
    if (j->type == MR_JSON_BOOL) {
        if (!j->num) return fail(c, "the schema false accepts nothing");
        c->sc->node[idx].kind = JS_ANY;
        return 0;
    }
    if (j->type != MR_JSON_OBJ) return fail(c, "a schema must be an object or a boolean");
    int n_kw = 0;
    for (const mr_json *k = j->child; k; k = k->next) {
        if (in_list(k->key, annotations, sizeof annotations / sizeof *annotations)) continue;
        if (!in_list(k->key, keywords, sizeof keywords / sizeof *keywords)) {
            char msg[160];
            snprintf(msg, sizeof msg, "keyword '%.100s' is not supported", k->key);
            return fail(c, msg);
        }
        n_kw++;
    }
    const mr_json *ref = mr_json_get(j, "$ref"), *any = mr_json_get(j, "anyOf"), *type = mr_json_get(j, "type");
    if (ref) {
        if (n_kw > 1) return fail(c, "'$ref' beside other keywords is not supported");
        if (ref->type != MR_JSON_STR) return fail(c, "'$ref' must be a string");
        const mr_json *t = ref_target(c, ref->str);
        if (!t) return -1;
        snprintf(c->path, sizeof c->path, "%.250s", ref->str); /* messages name the definition (compile restores the path) */
        int n = compile(c, t);
        if (n < 0) return -1;
        c->sc->node[idx].kind = JS_REF;
        c->sc->node[idx].a = (uint16_t)n;
        return 0;
    }
    if (any) {
        if (n_kw > 1) return fail(c, "'anyOf' beside other keywords is not supported");
        if (any->type != MR_JSON_ARR || !any->len) return fail(c, "'anyOf' must be a non-empty array");
        size_t l = path_push(c, "anyOf");
        uint16_t kids[64];
        size_t k = 0;
        for (const mr_json *a = any->child; a; a = a->next) {
            if (k == 64) return fail(c, "more than 64 alternatives");
            int n = compile(c, a);
            if (n < 0) return -1;
            kids[k++] = (uint16_t)n;
        }
        c->path[l] = 0;
        c->sc->node[idx].kind = JS_ANYOF;
        c->sc->node[idx].first = (uint32_t)c->sc->n_alt;
        c->sc->node[idx].count = (uint32_t)k;
        for (size_t i = 0; i < k; i++)
            if (alt_add(c, kids[i])) return -1;
        return 0;
    }
    if (type && type->type != MR_JSON_STR && type->type != MR_JSON_ARR) return fail(c, "'type' must be a name or a list of names");
    for (const mr_json *t = type && type->type == MR_JSON_ARR ? type->child : type; t; t = type->type == MR_JSON_ARR ? t->next : NULL)
        if (t->type != MR_JSON_STR || !type_known(t->str)) return fail(c, "'type' names an unknown type");
    if (mr_json_get(j, "enum") || mr_json_get(j, "const")) return compile_lits(c, j, idx);
    if (!type) { /* the type the keywords imply */
        if (mr_json_get(j, "properties") || mr_json_get(j, "required") || mr_json_get(j, "additionalProperties")) return compile_object(c, j, idx);
        if (mr_json_get(j, "items") || mr_json_get(j, "minItems") || mr_json_get(j, "maxItems")) return compile_array(c, j, idx);
        c->sc->node[idx].kind = JS_ANY;
        return 0;
    }
    if (type->type == MR_JSON_STR) return compile_type(c, j, type->str, idx);
    if (!type->len) return fail(c, "'type' is an empty list");
    if (type->len > MR_JSONP_MAX_ALT) return fail(c, "'type' lists too many types");
    uint16_t kids[MR_JSONP_MAX_ALT];
    size_t k = 0;
    for (const mr_json *t = type->child; t; t = t->next) {
        int n = node_new(c);
        if (n < 0 || compile_type(c, j, t->str, n)) return -1;
        kids[k++] = (uint16_t)n;
    }
    c->sc->node[idx].kind = JS_ANYOF;
    c->sc->node[idx].first = (uint32_t)c->sc->n_alt;
    c->sc->node[idx].count = (uint32_t)k;
    for (size_t i = 0; i < k; i++)
        if (alt_add(c, kids[i])) return -1;
    return 0;
}

/* a node for the schema j; a schema reached twice (through $ref) is one node, so recursion works */
static int compile(cc *c, const mr_json *j) {
    for (int i = 0; i < c->n_memo; i++)
        if (c->memo[i].j == j) return c->memo[i].node;
    int idx = node_new(c);
    if (idx < 0) return -1;
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? 2 * c->cap_memo : 16;
        struct memo *m = mr_realloc(c->memo, sizeof *m * (size_t)cap);
        if (!m) return fail(c, "out of memory");
        c->memo = m;
        c->cap_memo = cap;
    }
    c->memo[c->n_memo++] = (struct memo){j, (uint16_t)idx};
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    int rc = compile_into(c, j, idx);
    memcpy(c->path, saved, sizeof saved);
    return rc ? -1 : idx;
}

/* follow $ref to a node that is not one */
static int resolve(cc *c, int idx) {
    for (int steps = 0; idx != JS_NONE && c->sc->node[idx].kind == JS_REF; steps++) {
        if (steps > c->sc->n_node) return fail(c, "'$ref' cycle that names no schema");
        idx = c->sc->node[idx].a;
    }
    return idx;
}

/* anyOf to a list of concrete alternatives (nested anyOf and $ref expanded, repeats dropped) */
static int flatten(cc *c, int idx) {
    mr_jschema *sc = c->sc;
    if (c->state[idx] == 2) return 0;
    if (c->state[idx] == 1) return fail(c, "'anyOf' / '$ref' cycle that reads no input");
    c->state[idx] = 1;
    uint16_t out[MR_JSONP_MAX_ALT];
    int n = 0;
    for (uint32_t i = 0; i < sc->node[idx].count; i++) {
        int a = resolve(c, sc->alt[sc->node[idx].first + i]);
        if (a < 0) return -1;
        if (sc->node[a].kind == JS_ANYOF && flatten(c, a)) return -1;
        const int sub = sc->node[a].kind == JS_ANYOF;
        const uint32_t f = sub ? sc->node[a].first : 0, cnt = sub ? sc->node[a].count : 1;
        for (uint32_t k = 0; k < cnt; k++) {
            const uint16_t x = sub ? sc->alt[f + k] : (uint16_t)a;
            int seen = 0;
            for (int m = 0; m < n; m++) seen |= out[m] == x;
            if (seen) continue;
            if (n == MR_JSONP_MAX_ALT) return fail(c, "'anyOf' with more than 8 alternatives");
            out[n++] = x;
        }
    }
    sc->node[idx].first = (uint32_t)sc->n_alt;
    sc->node[idx].count = (uint32_t)n;
    for (int m = 0; m < n; m++)
        if (alt_add(c, out[m])) return -1;
    c->state[idx] = 2;
    return 0;
}

static int link(cc *c) {
    mr_jschema *sc = c->sc;
    c->path[0] = 0;
    int r = resolve(c, sc->root);
    if (r < 0) return -1;
    sc->root = (uint16_t)r;
    for (int i = 0; i < sc->n_node; i++) {
        mr_jsnode *n = &sc->node[i];
        if ((n->kind == JS_OBJ || n->kind == JS_ARR) && n->a != JS_NONE) {
            if ((r = resolve(c, n->a)) < 0) return -1;
            sc->node[i].a = (uint16_t)r;
        }
        if (sc->node[i].kind == JS_OBJ || (sc->node[i].kind == JS_LIT && (sc->node[i].flags & JS_PICKS)))
            for (uint32_t k = 0; k < sc->node[i].count; k++) {
                if ((r = resolve(c, sc->lit[sc->node[i].first + k].node)) < 0) return -1;
                sc->lit[sc->node[i].first + k].node = (uint16_t)r;
            }
    }
    c->state = mr_calloc((size_t)sc->n_node, 1);
    if (!c->state) return fail(c, "out of memory");
    for (int i = 0; i < sc->n_node; i++)
        if (sc->node[i].kind == JS_ANYOF && flatten(c, i)) return -1;
    return 0;
}

void mr_jschema_free(mr_jschema *sc) {
    if (!sc) return;
    free(sc->node); free(sc->lit); free(sc->bytes); free(sc->alt);
    free(sc);
}

mr_jschema *mr_jschema_compile(const char *text, size_t len) {
    mr_json *j = mr_json_parse(text, len);
    if (!j) {
        char why[200];
        snprintf(why, sizeof why, "%s", mr_get_error());
        mr_set_error("json_schema: not JSON: %s", why);
        return NULL;
    }
    cc c = {0};
    c.root = j;
    c.sc = mr_calloc(1, sizeof *c.sc);
    if (!c.sc) { mr_set_error("json_schema: out of memory"); goto fail; }
    /* the nodes every schema has: any value, and false / null / true */
    if (node_new(&c) != JS_NODE_ANY || node_new(&c) != JS_NODE_TFN) goto fail;
    if (lit_add(&c, "false", 5, JS_NONE) || lit_add(&c, "null", 4, JS_NONE) || lit_add(&c, "true", 4, JS_NONE)) goto fail;
    c.sc->node[JS_NODE_TFN] = (mr_jsnode){.kind = JS_LIT, .a = JS_NONE, .first = 0, .count = 3};
    int root = compile(&c, j);
    if (root < 0) goto fail;
    c.sc->root = (uint16_t)root;
    if (link(&c)) goto fail;
    free(c.memo); free(c.state);
    mr_json_free(j);
    return c.sc;
fail:
    free(c.memo); free(c.state);
    mr_jschema_free(c.sc);
    mr_json_free(j);
    return NULL;
}

/* a JS_LIT node of the texts, each literal's node its tag (JS_NONE: none) */
static int lit_node_tagged(cc *c, const char *const *texts, const uint16_t *tags, int n) {
    const uint32_t first = (uint32_t)c->sc->n_lit;
    for (int i = 0; i < n; i++)
        if (lit_add(c, texts[i], strlen(texts[i]), tags ? tags[i] : JS_NONE)) return -1;
    const int idx = node_new(c);
    if (idx < 0) return -1;
    c->sc->node[idx] = (mr_jsnode){.kind = JS_LIT, .a = JS_NONE, .first = first, .count = lits_sort(c, first)};
    return idx;
}

#define DSML_BAR "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"
static int dsml_lits(cc *c) {
    static const char *const param = "<" DSML_BAR "parameter name=\"", *const nparam = "\n<" DSML_BAR "parameter name=\"";
    static const char *const close = "\n</" DSML_BAR "invoke>";
    const char *first[2] = {param, close}, *next[2] = {nparam, close};
    const char *t = " string=\"true\">", *f = " string=\"false\">", *term = "</" DSML_BAR "parameter>";
    static const uint16_t pc[2] = {DSML_TAG_PARAM, DSML_TAG_CLOSE}, tt = DSML_TAG_TRUE, tf = DSML_TAG_FALSE;
    int r[9];
    r[DL_FIRST] = lit_node_tagged(c, first, pc, 2);
    r[DL_FIRST_PARAM] = lit_node_tagged(c, first, pc, 1);
    r[DL_FIRST_CLOSE] = lit_node_tagged(c, first + 1, pc + 1, 1);
    r[DL_NEXT] = lit_node_tagged(c, next, pc, 2);
    r[DL_NEXT_PARAM] = lit_node_tagged(c, next, pc, 1);
    r[DL_NEXT_CLOSE] = lit_node_tagged(c, next + 1, pc + 1, 1);
    r[DL_TRUE] = lit_node_tagged(c, &t, &tt, 1);
    r[DL_FALSE] = lit_node_tagged(c, &f, &tf, 1);
    r[DL_TERM] = lit_node_tagged(c, &term, NULL, 1);
    for (int i = 0; i < 9; i++) {
        if (r[i] < 0) return -1;
        c->sc->dsml[i] = (uint16_t)r[i];
    }
    return 0;
}

static int compile_call_args(cc *c, const char *schema, int dsml) {
    const char *text = schema ? schema : "{\"type\": \"object\"}";
    mr_json *j = mr_json_parse(text, strlen(text));
    if (!j) return fail(c, "a tool's parameters are not JSON");
    /* kept to the end: the memo holds pointers into it */
    if (c->n_trees == c->cap_trees) {
        int cap = c->cap_trees ? 2 * c->cap_trees : 8;
        mr_json **t = mr_realloc(c->trees, sizeof *t * (size_t)cap);
        if (!t) { mr_json_free(j); return fail(c, "out of memory"); }
        c->trees = t;
        c->cap_trees = cap;
    }
    c->trees[c->n_trees++] = j;
    c->root = j; /* "#" in a tool's schema is that schema */
    if (!dsml) return compile(c, j);
    /* DSML: the parameters are the members of an object schema (not memoized: a "#" inside is JSON) */
    const mr_json *type = mr_json_get(j, "type");
    const int any = j->type == MR_JSON_BOOL ? j->num != 0 : !type && !mr_json_get(j, "properties");
    if (!any && !(type && type->type == MR_JSON_STR && !strcmp(type->str, "object")))
        return fail(c, "DSML tool calls need an object schema for the parameters");
    int idx = node_new(c);
    if (idx < 0) return -1;
    c->dsml_next = 1;
    if (any) {
        static const char any_obj[] = "{\"additionalProperties\": true}";
        mr_json *a = mr_json_parse(any_obj, sizeof any_obj - 1);
        int rc = a ? compile_object(c, a, idx) : fail(c, "out of memory");
        mr_json_free(a);
        return rc ? -1 : idx;
    }
    return compile_into(c, j, idx) ? -1 : idx;
}

mr_jschema *mr_jschema_compile_calls(const mr_gen_calls *calls) {
    cc c = {0};
    c.sc = mr_calloc(1, sizeof *c.sc);
    if (!c.sc) { mr_set_error("json_schema: out of memory"); return NULL; }
    if (calls->n <= 0 || calls->n > 4096) { fail(&c, "a tool call needs 1..4096 functions"); goto fail; }
    if (node_new(&c) != JS_NODE_ANY || node_new(&c) != JS_NODE_TFN) goto fail;
    if (lit_add(&c, "false", 5, JS_NONE) || lit_add(&c, "null", 4, JS_NONE) || lit_add(&c, "true", 4, JS_NONE)) goto fail;
    c.sc->node[JS_NODE_TFN] = (mr_jsnode){.kind = JS_LIT, .a = JS_NONE, .first = 0, .count = 3};
    if (calls->dsml && dsml_lits(&c)) goto fail;
    uint16_t args[4096];
    for (int i = 0; i < calls->n; i++) {
        snprintf(c.path, sizeof c.path, "tool %.200s", calls->names[i] ? calls->names[i] : "?");
        int a = compile_call_args(&c, calls->schemas ? calls->schemas[i] : NULL, calls->dsml);
        if (a < 0) goto fail;
        args[i] = (uint16_t)a;
    }
    c.path[0] = 0;
    /* the names, each with the text between it and the arguments; their node: the arguments */
    const uint32_t first = (uint32_t)c.sc->n_lit;
    const char *mid = calls->middle ? calls->middle : "";
    for (int i = 0; i < calls->n; i++) {
        mr_sbuf b = {0};
        mr_sbuf_printf(&b, "%s%s", calls->names[i] ? calls->names[i] : "", mid);
        int rc = b.oom ? fail(&c, "out of memory") : !b.n ? fail(&c, "a function without a name") : lit_add(&c, b.p, b.n, args[i]);
        mr_sbuf_free(&b);
        if (rc) goto fail;
    }
    if ((int)lits_sort(&c, first) != calls->n) { fail(&c, "a function is named twice"); goto fail; }
    int names = node_new(&c), pick = names < 0 ? -1 : node_new(&c);
    if (pick < 0) goto fail;
    c.sc->node[names] = (mr_jsnode){.kind = JS_LIT, .flags = JS_PICKS, .a = JS_NONE, .first = first, .count = (uint32_t)calls->n};
    c.sc->node[pick].kind = JS_PICK;
    int parts[4], np = 0;
    if (calls->prefix && *calls->prefix && (parts[np++] = lit_node_tagged(&c, &calls->prefix, NULL, 1)) < 0) goto fail;
    parts[np++] = names;
    parts[np++] = pick;
    if (calls->suffix && *calls->suffix && (parts[np++] = lit_node_tagged(&c, &calls->suffix, NULL, 1)) < 0) goto fail;
    int seq = node_new(&c);
    if (seq < 0) goto fail;
    c.sc->node[seq] = (mr_jsnode){.kind = JS_SEQ, .a = JS_NONE, .first = (uint32_t)c.sc->n_alt, .count = (uint32_t)np};
    for (int i = 0; i < np; i++)
        if (alt_add(&c, (uint16_t)parts[i])) goto fail;
    c.sc->root = (uint16_t)seq;
    if (link(&c)) goto fail;
    for (int i = 0; i < c.n_trees; i++) mr_json_free(c.trees[i]);
    free(c.trees); free(c.memo); free(c.state);
    return c.sc;
fail:
    for (int i = 0; i < c.n_trees; i++) mr_json_free(c.trees[i]);
    free(c.trees); free(c.memo); free(c.state);
    mr_jschema_free(c.sc);
    return NULL;
}

int mr_json_schema_check(const char *schema, size_t len) {
    mr_jschema *sc = mr_jschema_compile(schema, len);
    mr_jschema_free(sc);
    return sc ? 0 : -1;
}

int mr_gen_calls_check(const mr_gen_calls *calls) {
    mr_jschema *sc = mr_jschema_compile_calls(calls);
    mr_jschema_free(sc);
    return sc ? 0 : -1;
}
