/* JSON prefix recogniser (json_prefix.h): a pushdown automaton over bytes. Each thread's stack holds
 * the root frame, one frame per open container and one for the scalar or key being read; each frame's
 * mode says what the next byte may be. A scalar that can end without a closing byte (a number, a
 * literal that a longer one extends) ends at the first byte that cannot continue it, which is then
 * read by the frame below. */
#include "gen/json_prefix.h"

#include <string.h>

enum jp_mode {
    JP_ROOT,      /* root: the value, from the first byte */
    JP_DONE,      /* root: the value is complete: whitespace only */
    JP_OBJ_FIRST, /* after '{': a key or '}' */
    JP_OBJ_KEY,   /* after ',' in an object: a key */
    JP_COLON,     /* after a key: ':' */
    JP_OBJ_VALUE, /* after ':': the value */
    JP_OBJ_AFTER, /* after a member: ',' or '}' */
    JP_ARR_FIRST, /* after '[': an item or ']' */
    JP_ARR_VALUE, /* after ',' in an array: an item */
    JP_ARR_AFTER, /* after an item: ',' or ']' */
    JP_SEQ,       /* a sequence (a tool call): part u.count starts next */
    /* DSML parameters (an object written as <parameter name="K" string="true|false">V</parameter>
     * separated by newlines, up to </invoke>); _OPEN: the literal or raw text named is on top */
    JP_D_FIRST, JP_D_NEXT, JP_D_OPEN, /* the first parameter or the close; one after a parameter */
    JP_D_KEY, JP_D_ATTR, JP_D_ATTR_OPEN, /* the name is on top; after it: string="..." */
    JP_D_VALUE, JP_D_VALUE_END, JP_D_TERM_OPEN, JP_D_RAW_OPEN, /* a JSON value and its closing tag; raw text */
    JP_STR, JP_STR_ESC, JP_STR_HEX, /* in a string; after '\'; in \uXXXX (aux hex digits to go) */
    JP_NUM_MINUS, JP_NUM_ZERO, JP_NUM_INT, JP_NUM_DOT, JP_NUM_FRAC, JP_NUM_E, JP_NUM_E_SIGN, JP_NUM_EXP,
    JP_LIT,       /* inside a literal of a JS_LIT node: candidates lit[lo..hi) matched for pos bytes */
    JP_KEY,       /* inside a key of a schema object (a JS_LIT-like match of its property names) */
    JP_RAW        /* DSML raw text up to the parameter's closing tag (u.m.pos of its bytes matched) */
};
#define KEY_OTHER 1   /* aux of JP_KEY: the key may still be an additional property */
#define KEY_ESC 2     /* aux of JP_KEY: the last byte was a '\' of a property name's escape */
#define KEY_RAW 4     /* aux of JP_KEY: a DSML name, written as it is (no escapes) */
#define KEY_GUARD 8   /* aux of JP_KEY: inside a DSML parameter: an additional key has no '<' */
#define STR_GUARD 0x80 /* aux of JP_STR..JP_STR_HEX: inside a DSML parameter: the text must not contain
                        * its closing tag (u.m.pos: bytes of it matched) */
#define OTHER 0xffffu /* cur of an object frame: an additional property's value is read */

/* The schema of json_object: any value, the literals of any value, and an object of anything. */
static const mr_jsnode obj_nodes[3] = {
    {.kind = JS_ANY}, {.kind = JS_LIT, .first = 0, .count = 3}, {.kind = JS_ANY, .flags = JS_OBJ_ONLY},
};
static const mr_jslit obj_lits[3] = {{0, 5, 0}, {5, 4, 0}, {9, 4, 0}};
static const mr_jschema obj_schema = {
    .node = (mr_jsnode *)obj_nodes, .n_node = 3, .lit = (mr_jslit *)obj_lits, .n_lit = 3,
    .bytes = (char *)"falsenulltrue", .root = 2,
};

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

void mr_jsonp_init_schema(mr_jsonp *s, const mr_jschema *sc) {
    s->sc = sc;
    s->n = 1;
    mr_jsonp_thread *t = &s->t[0];
    t->depth = 1;
    t->ws = 0;
    memset(&t->f[0], 0, sizeof t->f[0]);
    t->f[0].node = sc->root;
    t->f[0].mode = JP_ROOT;
}

void mr_jsonp_init(mr_jsonp *s) { mr_jsonp_init_schema(s, &obj_schema); }

static void thread_copy(mr_jsonp_thread *d, const mr_jsonp_thread *t) {
    d->depth = t->depth;
    d->ws = t->ws;
    memcpy(d->f, t->f, sizeof t->f[0] * t->depth);
}

void mr_jsonp_copy(mr_jsonp *dst, const mr_jsonp *src) {
    dst->sc = src->sc;
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) thread_copy(&dst->t[i], &src->t[i]);
}

static mr_jsonp_frame *top(mr_jsonp_thread *t) { return &t->f[t->depth - 1]; }

static mr_jsonp_frame *push(mr_jsonp_thread *t, uint16_t node, uint8_t mode) {
    mr_jsonp_frame *f = &t->f[t->depth++];
    memset(f, 0, sizeof *f); /* whole, padding too: threads are compared with memcmp */
    f->node = node;
    f->mode = mode;
    return f;
}

static int ws_take(mr_jsonp_thread *t) { return ++t->ws > MR_JSONP_MAX_WS ? -1 : 0; }

static int key_start(const mr_jschema *sc, mr_jsonp_thread *t);

/* the frame on top (a container, a sequence or the root) has a complete value in it; a sequence
 * whose last part that was is complete itself */
static void value_end(const mr_jschema *sc, mr_jsonp_thread *t) {
    for (;;) {
        mr_jsonp_frame *f = top(t);
        switch (f->mode) {
        case JP_ROOT: f->mode = JP_DONE; return;
        case JP_OBJ_VALUE: f->mode = JP_OBJ_AFTER; return;
        case JP_D_VALUE: f->mode = JP_D_VALUE_END; return;
        case JP_SEQ:
            if (++f->u.count < sc->node[f->node].count) return;
            t->depth--;
            continue;
        default: f->u.count++; f->mode = JP_ARR_AFTER; return; /* an array's item */
        }
    }
}

/* the scalar on top is complete: pop it. A key makes its object wait for ':' (JSON) or string="..."
 * (DSML); a literal of DSML syntax moves its object on by its tag; a name in a sequence says what
 * the sequence's JS_PICK part is. */
static void pop_scalar(const mr_jschema *sc, mr_jsonp_thread *t) {
    const mr_jsonp_frame *k = top(t);
    const uint16_t tag = k->mode == JP_LIT ? sc->lit[k->u.m.lo].node : JS_NONE;
    t->depth--;
    mr_jsonp_frame *f = top(t);
    switch (f->mode) {
    case JP_OBJ_FIRST: case JP_OBJ_KEY: f->mode = JP_COLON; break;
    case JP_D_OPEN:
        if (tag == DSML_TAG_CLOSE) { t->depth--; value_end(sc, t); break; }
        f->mode = JP_D_KEY;
        key_start(sc, t);
        break;
    case JP_D_KEY: f->mode = JP_D_ATTR; break;
    case JP_D_ATTR_OPEN:
        if (tag == DSML_TAG_TRUE) { f->mode = JP_D_RAW_OPEN; push(t, f->node, JP_RAW); }
        else f->mode = JP_D_VALUE;
        break;
    case JP_D_TERM_OPEN: case JP_D_RAW_OPEN: f->mode = JP_D_NEXT; break;
    case JP_SEQ:
        if (tag != JS_NONE) f->pick = tag;
        value_end(sc, t);
        break;
    default: value_end(sc, t);
    }
}

static int feed_thread(mr_jsonp *s, mr_jsonp_thread *t, unsigned char c);

/* lit[lo..hi) narrowed to the entries whose byte pos is c (sorted, so they are contiguous) */
static int narrow(const mr_jschema *sc, mr_jsonp_frame *f, unsigned char c) {
    uint32_t lo = f->u.m.lo, hi = f->hi, pos = f->u.m.pos;
    while (lo < hi && (sc->lit[lo].len <= pos || (unsigned char)sc->bytes[sc->lit[lo].off + pos] < c)) lo++;
    uint32_t e = lo;
    while (e < hi && (unsigned char)sc->bytes[sc->lit[e].off + pos] == c) e++;
    if (e == lo) return -1;
    f->u.m.lo = lo;
    f->hi = e;
    f->u.m.pos = pos + 1;
    return 0;
}

/* a literal (enum / const value, true / false / null) takes c */
static int lit_feed(mr_jsonp *s, mr_jsonp_thread *t, unsigned char c) {
    mr_jsonp_frame *f = top(t);
    const mr_jschema *sc = s->sc;
    const int whole = sc->lit[f->u.m.lo].len == f->u.m.pos; /* the shortest candidate sorts first */
    if (narrow(sc, f, c)) {
        if (!whole) return -1;
        pop_scalar(sc, t); /* c follows the literal */
        return feed_thread(s, t, c);
    }
    if (f->hi - f->u.m.lo == 1 && sc->lit[f->u.m.lo].len == f->u.m.pos) pop_scalar(sc, t);
    return 0;
}

/* properties of the object frame o that are absent and in lit[lo..hi) (bits from the node's first) */
static uint64_t absent_in(const mr_jschema *sc, const mr_jsonp_frame *o, uint32_t lo, uint32_t hi) {
    const mr_jsnode *n = &sc->node[o->node];
    const uint32_t k = hi - lo, sh = lo - n->first;
    const uint64_t range = k >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1) << sh;
    const uint64_t all = n->count >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n->count) - 1;
    return range & all & ~o->u.seen;
}

/* a key of a schema object may start: an absent property or an additional one */
static int key_possible(const mr_jschema *sc, const mr_jsonp_frame *o) {
    const mr_jsnode *n = &sc->node[o->node];
    return n->a != JS_NONE || absent_in(sc, o, n->first, n->first + n->count) != 0;
}

/* the thread reads a DSML parameter's JSON value: its strings must not hold the closing tag */
static int in_dsml(const mr_jsonp_thread *t) {
    for (int i = t->depth; i-- > 0;)
        if (t->f[i].mode == JP_D_VALUE) return 1;
    return 0;
}

static void push_str(mr_jsonp_thread *t, uint16_t node) {
    mr_jsonp_frame *f = push(t, node, JP_STR);
    if (in_dsml(t)) f->aux = STR_GUARD;
}

static int key_start(const mr_jschema *sc, mr_jsonp_thread *t) {
    mr_jsonp_frame *o = top(t);
    const mr_jsnode *n = &sc->node[o->node];
    if (n->kind == JS_ANY) { push_str(t, JS_NODE_ANY); return 0; }
    if (!key_possible(sc, o)) return -1;
    mr_jsonp_frame *k = push(t, o->node, JP_KEY);
    k->u.m.lo = n->first;
    k->hi = n->first + n->count;
    k->aux = (uint8_t)((n->a != JS_NONE ? KEY_OTHER : 0) | (n->flags & JS_DSML ? KEY_RAW : 0) | (in_dsml(t) ? KEY_GUARD : 0));
    return 0;
}

/* a byte of a schema object's key: property names are matched as written (their JSON escapes);
 * an additional property's key is any text without escapes (so that it cannot spell a property's
 * name another way) */
static int key_feed(const mr_jschema *sc, mr_jsonp_thread *t, unsigned char c) {
    mr_jsonp_frame *k = top(t), *o = k - 1;
    const mr_jsnode *n = &sc->node[o->node];
    if (c == '"' && !(k->aux & KEY_ESC)) { /* (a DSML name's '"' is followed by string="...") */
        const int exact = k->u.m.lo < k->hi && sc->lit[k->u.m.lo].len == k->u.m.pos;
        if (exact) {
            const uint64_t bit = (uint64_t)1 << (k->u.m.lo - n->first);
            if (o->u.seen & bit) return -1; /* twice */
            o->u.seen |= bit;
            o->cur = (uint16_t)(k->u.m.lo - n->first);
        } else if (k->aux & KEY_OTHER) {
            o->cur = OTHER;
        } else {
            return -1;
        }
        pop_scalar(sc, t);
        return 0;
    }
    if (c < 0x20) return -1;
    if (c == '<' && (k->aux & KEY_GUARD)) k->aux &= (uint8_t)~KEY_OTHER;
    if (!(k->aux & KEY_RAW)) {
        k->aux = (uint8_t)(c == '\\' && !(k->aux & KEY_ESC) ? (k->aux | KEY_ESC) : (k->aux & ~KEY_ESC));
        if (c == '\\') k->aux &= (uint8_t)~KEY_OTHER;
    }
    if (k->u.m.lo < k->hi && narrow(sc, k, c)) k->u.m.lo = k->hi; /* no property has this name */
    const int named = k->u.m.lo < k->hi && absent_in(sc, o, k->u.m.lo, k->hi) != 0;
    return named || (k->aux & KEY_OTHER) ? 0 : -1;
}

static int start_number(mr_jsonp_thread *t, uint16_t node, unsigned char c) {
    if (c == '-') push(t, node, JP_NUM_MINUS);
    else if (c == '0') push(t, node, JP_NUM_ZERO)->u.m.pos = 1;
    else if (c >= '1' && c <= '9') push(t, node, JP_NUM_INT)->u.m.pos = 1;
    else return -1;
    return 0;
}

/* digits a number's part may have (the part being read in mode m) */
static uint32_t digits_max(uint8_t m) {
    return m == JP_NUM_FRAC ? MR_JSONP_MAX_FRAC_DIGITS : m == JP_NUM_EXP ? MR_JSONP_MAX_EXP_DIGITS : MR_JSONP_MAX_INT_DIGITS;
}

static int start_lit(mr_jsonp *s, mr_jsonp_thread *t, uint16_t node, unsigned char c) {
    const mr_jsnode *n = &s->sc->node[node];
    mr_jsonp_frame *f = push(t, node, JP_LIT);
    f->u.m.lo = n->first;
    f->hi = n->first + n->count;
    return lit_feed(s, t, c);
}

/* a value of schema node `node` starts with c (the frame that holds it is on top) */
static int start_value(mr_jsonp *s, mr_jsonp_thread *t, uint16_t node, unsigned char c) {
    const mr_jsnode *n = &s->sc->node[node];
    switch (n->kind) {
    case JS_ANY:
        if (c == '{') node = JS_NODE_ANY;
        else if (n->flags & JS_OBJ_ONLY) return -1;
        else if (c == '[') node = JS_NODE_ANY;
        else if (c == '"') { push_str(t, node); return 0; }
        else if (c == 't' || c == 'f' || c == 'n') return start_lit(s, t, JS_NODE_TFN, c);
        else return start_number(t, node, c);
        break;
    case JS_OBJ: if (c != '{' && !(n->flags & JS_DSML)) return -1; break;
    case JS_ARR: if (c != '[') return -1; break;
    case JS_STR: if (c != '"') return -1; push_str(t, node); return 0;
    case JS_NUM: case JS_INT: return start_number(t, node, c);
    case JS_LIT: return start_lit(s, t, node, c);
    case JS_SEQ: break;
    case JS_ANYOF: {
        /* alternatives after the first go to new threads, copies of this one before c */
        for (uint32_t i = n->count; i-- > 1;) {
            if (s->n >= MR_JSONP_MAX_ALT) continue; /* dropped: the language shrinks */
            mr_jsonp_thread *u = &s->t[s->n];
            thread_copy(u, t);
            if (!start_value(s, u, s->sc->alt[n->first + i], c)) s->n++;
        }
        return start_value(s, t, s->sc->alt[n->first], c);
    }
    default: return -1;
    }
    /* a container or a sequence */
    if (t->depth - 1 >= MR_JSONP_MAX_DEPTH) return -1; /* frames below the top: the root and containers */
    if (n->kind == JS_SEQ || (n->flags & JS_DSML)) { /* no bracket of its own: c starts its first part */
        push(t, node, n->kind == JS_SEQ ? JP_SEQ : JP_D_FIRST);
        return feed_thread(s, t, c);
    }
    push(t, node, c == '{' ? JP_OBJ_FIRST : JP_ARR_FIRST);
    return 0;
}

/* the schema of the value the container frame f holds next */
static uint16_t value_node(const mr_jschema *sc, const mr_jsonp_frame *f) {
    const mr_jsnode *n = &sc->node[f->node];
    if (f->mode == JP_ROOT) return f->node;
    if (n->kind == JS_ANY) return JS_NODE_ANY;
    if (n->kind == JS_ARR) return n->a;
    return f->cur == OTHER ? n->a : sc->lit[n->first + f->cur].node;
}

static int obj_close(const mr_jschema *sc, mr_jsonp_thread *t) {
    const mr_jsonp_frame *f = top(t);
    const mr_jsnode *n = &sc->node[f->node];
    if (n->kind == JS_OBJ && (n->required & ~f->u.seen)) return -1;
    t->depth--;
    value_end(sc, t);
    return 0;
}

static int arr_close(const mr_jschema *sc, mr_jsonp_thread *t) {
    const mr_jsonp_frame *f = top(t);
    const mr_jsnode *n = &sc->node[f->node];
    if (n->kind == JS_ARR && f->u.count < n->min) return -1;
    t->depth--;
    value_end(sc, t);
    return 0;
}

/* DSML: the next parameter or the close, as the object's state allows */
static int dsml_open(mr_jsonp *s, mr_jsonp_thread *t, unsigned char c) {
    const mr_jschema *sc = s->sc;
    mr_jsonp_frame *f = top(t);
    const int first = f->mode == JP_D_FIRST, param = key_possible(sc, f), close = !(sc->node[f->node].required & ~f->u.seen);
    if (!param && !close) return -1;
    const int which = (first ? DL_FIRST : DL_NEXT) + (param && close ? 0 : param ? 1 : 2);
    f->mode = JP_D_OPEN;
    return start_lit(s, t, sc->dsml[which], c);
}

/* the DSML parameter's closing tag (lit[dsml[DL_TERM]]) matched in f->u.m.pos, one more byte: 1 when
 * it is whole. Its first byte ('<') occurs in it once: a mismatch restarts the match at 0 or 1. */
static int term_step(const mr_jschema *sc, mr_jsonp_frame *f, unsigned char c) {
    const mr_jslit *term = &sc->lit[sc->node[sc->dsml[DL_TERM]].first];
    const char *tb = sc->bytes + term->off;
    if (c == (unsigned char)tb[f->u.m.pos]) f->u.m.pos++;
    else f->u.m.pos = c == (unsigned char)tb[0];
    return f->u.m.pos == term->len;
}

/* DSML raw text: any bytes up to the closing tag */
static int raw_feed(const mr_jschema *sc, mr_jsonp_thread *t, unsigned char c) {
    if (term_step(sc, top(t), c)) pop_scalar(sc, t);
    return 0;
}

/* another item of the array frame f may start */
static int item_possible(const mr_jschema *sc, const mr_jsonp_frame *f) {
    const mr_jsnode *n = &sc->node[f->node];
    return n->kind != JS_ARR || f->u.count < n->max;
}

static int feed_thread(mr_jsonp *s, mr_jsonp_thread *t, unsigned char c) {
    const mr_jschema *sc = s->sc;
    mr_jsonp_frame *f = top(t);
    if (!is_ws(c) || f->mode >= JP_STR) t->ws = 0;
    switch (f->mode) {
    case JP_ROOT: return start_value(s, t, f->node, c);
    case JP_DONE: return is_ws(c) ? ws_take(t) : -1;
    case JP_OBJ_FIRST:
        if (is_ws(c)) return ws_take(t);
        if (c == '}') return obj_close(sc, t);
        return c == '"' ? key_start(sc, t) : -1;
    case JP_OBJ_KEY:
        if (is_ws(c)) return ws_take(t);
        return c == '"' ? key_start(sc, t) : -1;
    case JP_COLON:
        if (is_ws(c)) return ws_take(t);
        if (c != ':') return -1;
        f->mode = JP_OBJ_VALUE;
        return 0;
    case JP_OBJ_VALUE: case JP_ARR_VALUE:
        if (is_ws(c)) return ws_take(t);
        return start_value(s, t, value_node(sc, f), c);
    case JP_OBJ_AFTER:
        if (is_ws(c)) return ws_take(t);
        if (c == '}') return obj_close(sc, t);
        if (c != ',' || (sc->node[f->node].kind == JS_OBJ && !key_possible(sc, f))) return -1;
        f->mode = JP_OBJ_KEY;
        return 0;
    case JP_ARR_FIRST:
        if (is_ws(c)) return ws_take(t);
        if (c == ']') return arr_close(sc, t);
        if (!item_possible(sc, f)) return -1;
        return start_value(s, t, value_node(sc, f), c);
    case JP_ARR_AFTER:
        if (is_ws(c)) return ws_take(t);
        if (c == ']') return arr_close(sc, t);
        if (c != ',' || !item_possible(sc, f)) return -1;
        f->mode = JP_ARR_VALUE;
        return 0;
    case JP_SEQ: {
        const mr_jsnode *n = &sc->node[f->node];
        uint16_t part = sc->alt[n->first + f->u.count];
        if (sc->node[part].kind == JS_PICK) part = f->pick;
        return start_value(s, t, part, c);
    }
    case JP_D_FIRST: case JP_D_NEXT: return dsml_open(s, t, c);
    case JP_D_ATTR: {
        const int raw = sc->node[value_node(sc, f)].kind == JS_STR; /* strings as they are, the rest as JSON */
        f->mode = JP_D_ATTR_OPEN;
        return start_lit(s, t, sc->dsml[raw ? DL_TRUE : DL_FALSE], c);
    }
    case JP_D_VALUE:
        if (is_ws(c)) return ws_take(t);
        return start_value(s, t, value_node(sc, f), c);
    case JP_D_VALUE_END:
        if (is_ws(c)) return ws_take(t);
        f->mode = JP_D_TERM_OPEN;
        return start_lit(s, t, sc->dsml[DL_TERM], c);
    case JP_RAW: return raw_feed(sc, t, c);
    case JP_STR:
        if (c == '"') { pop_scalar(sc, t); return 0; }
        if (c == '\\') { f->mode = JP_STR_ESC; f->u.m.pos = 0; return 0; }
        if (c < 0x20) return -1;
        return (f->aux & STR_GUARD) && term_step(sc, f, c) ? -1 : 0;
    case JP_STR_ESC:
        if (c == 'u') { f->mode = JP_STR_HEX; f->aux = (uint8_t)((f->aux & STR_GUARD) | 4); return 0; }
        if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') { f->mode = JP_STR; return 0; }
        return -1;
    case JP_STR_HEX:
        if (!is_hex(c)) return -1;
        if ((--f->aux & 0x0f) == 0) f->mode = JP_STR;
        return 0;
    case JP_LIT: return lit_feed(s, t, c);
    case JP_KEY: return key_feed(sc, t, c);
    case JP_NUM_MINUS:
        if (!is_digit(c)) return -1;
        f->mode = c == '0' ? JP_NUM_ZERO : JP_NUM_INT;
        f->u.m.pos = 1;
        return 0;
    case JP_NUM_DOT: if (!is_digit(c)) return -1; f->mode = JP_NUM_FRAC; f->u.m.pos = 1; return 0;
    case JP_NUM_E:
        if (c == '+' || c == '-') { f->mode = JP_NUM_E_SIGN; return 0; }
        /* fall through */
    case JP_NUM_E_SIGN: if (!is_digit(c)) return -1; f->mode = JP_NUM_EXP; f->u.m.pos = 1; return 0;
    case JP_NUM_ZERO: case JP_NUM_INT: case JP_NUM_FRAC: case JP_NUM_EXP: {
        const int integer = sc->node[f->node].kind == JS_INT;
        /* a digit beyond the part's bound ends the number like any other byte (and is then refused) */
        if (is_digit(c) && f->mode != JP_NUM_ZERO && f->u.m.pos < digits_max(f->mode)) { f->u.m.pos++; return 0; }
        if (!integer && c == '.' && f->mode <= JP_NUM_INT) { f->mode = JP_NUM_DOT; f->u.m.pos = 0; return 0; }
        if (!integer && (c == 'e' || c == 'E') && f->mode != JP_NUM_EXP) { f->mode = JP_NUM_E; f->u.m.pos = 0; return 0; }
        /* the number is complete: c belongs to what follows it */
        pop_scalar(sc, t);
        return feed_thread(s, t, c);
    }
    default: return -1;
    }
}

/* threads in the same state are one */
static void dedup(mr_jsonp *s) {
    for (int i = 1; i < s->n; i++)
        for (int j = 0; j < i; j++) {
            const mr_jsonp_thread *a = &s->t[i], *b = &s->t[j];
            if (a->depth == b->depth && a->ws == b->ws && !memcmp(a->f, b->f, sizeof a->f[0] * a->depth)) {
                if (i != --s->n) thread_copy(&s->t[i], &s->t[s->n]);
                i--;
                break;
            }
        }
}

int mr_jsonp_feed(mr_jsonp *s, const char *p, size_t n) {
    for (size_t k = 0; k < n; k++) {
        const unsigned char c = (unsigned char)p[k];
        const int n0 = s->n;
        uint8_t live[MR_JSONP_MAX_ALT];
        for (int i = 0; i < n0; i++) live[i] = feed_thread(s, &s->t[i], c) == 0;
        for (int i = n0; i < s->n; i++) live[i] = 1; /* forks took c already */
        int m = 0;
        for (int i = 0; i < s->n; i++)
            if (live[i]) { if (m != i) thread_copy(&s->t[m], &s->t[i]); m++; }
        s->n = (uint8_t)m;
        if (!m) return -1;
        if (m > 1) dedup(s);
    }
    return 0;
}

/* the thread's text is a whole value if ending its scalar here (if any) leaves the root done */
static int thread_done(const mr_jschema *sc, const mr_jsonp_thread *t) {
    const mr_jsonp_frame *f = &t->f[t->depth - 1];
    if (t->depth == 1) return f->mode == JP_DONE;
    if (t->depth > 2) return 0;
    switch (f->mode) {
    case JP_NUM_ZERO: case JP_NUM_INT: case JP_NUM_FRAC: case JP_NUM_EXP: return 1;
    case JP_LIT: return sc->lit[f->u.m.lo].len == f->u.m.pos;
    default: return 0;
    }
}

int mr_jsonp_done(const mr_jsonp *s) {
    for (int i = 0; i < s->n; i++)
        if (thread_done(s->sc, &s->t[i])) return 1;
    return 0;
}

int mr_jsonp_closed(const mr_jsonp *s) {
    for (int i = 0; i < s->n; i++)
        if (s->t[i].depth != 1 || s->t[i].f[0].mode != JP_DONE) return 0;
    return s->n > 0;
}

int mr_jsonp_in_text(const mr_jsonp *s) {
    int str = 0, guarded = 0, raw = 0;
    for (int i = 0; i < s->n; i++) {
        const mr_jsonp_frame *f = &s->t[i].f[s->t[i].depth - 1];
        const int g = f->mode == JP_STR && (f->aux & STR_GUARD);
        str += f->mode == JP_STR && (!g || f->u.m.pos == 0);
        guarded += g;
        raw += f->mode == JP_RAW && f->u.m.pos == 0;
    }
    if (!s->n) return 0;
    if (str == s->n) return guarded ? 3 : 1; /* a guarded string's text has no '<' either */
    return raw == s->n ? 2 : 0;
}
