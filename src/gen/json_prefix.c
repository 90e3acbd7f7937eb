/* JSON-object prefix recogniser (json_prefix.h): a pushdown automaton over bytes whose stack is the
 * open containers. Each mode says what the next byte may be; a number ends at the first byte that
 * cannot continue it, which is then read in the mode after the value. */
#include "gen/json_prefix.h"

enum jp_mode {
    JP_TOP,       /* before the object: '{' */
    JP_VALUE,     /* a value (after ':' or after ',' in an array) */
    JP_ARR_FIRST, /* after '[': a value or ']' */
    JP_OBJ_FIRST, /* after '{': a key or '}' */
    JP_OBJ_KEY,   /* after ',' in an object: a key */
    JP_COLON,     /* after a key: ':' */
    JP_AFTER,     /* after a value in a container: ',' or its closing bracket */
    JP_STR, JP_STR_ESC, JP_STR_HEX, /* in a string; after '\'; in \uXXXX (lit_pos hex digits to go) */
    JP_NUM_MINUS, JP_NUM_ZERO, JP_NUM_INT, JP_NUM_DOT, JP_NUM_FRAC, JP_NUM_E, JP_NUM_E_SIGN, JP_NUM_EXP,
    JP_LIT,       /* inside true / false / null */
    JP_DONE       /* the object is complete: whitespace only */
};

static const char *const jp_lits[3] = {"true", "false", "null"};
static const uint8_t jp_lit_len[3] = {4, 5, 4};

void mr_jsonp_init(mr_jsonp *s) {
    s->mode = JP_TOP;
    s->depth = 0;
    s->lit = s->lit_pos = s->key = s->ws = 0;
}

int mr_jsonp_done(const mr_jsonp *s) { return s->mode == JP_DONE; }

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static void value_end(mr_jsonp *s) { s->mode = s->depth ? JP_AFTER : JP_DONE; }

static int push(mr_jsonp *s, char open) {
    if (s->depth >= MR_JSONP_MAX_DEPTH) return -1;
    s->stack[s->depth++] = open;
    s->mode = open == '{' ? JP_OBJ_FIRST : JP_ARR_FIRST;
    return 0;
}

static int jp_close(mr_jsonp *s, unsigned char c) {
    if (!s->depth || s->stack[s->depth - 1] != (c == '}' ? '{' : '[')) return -1;
    s->depth--;
    value_end(s);
    return 0;
}

static int start_value(mr_jsonp *s, unsigned char c) {
    switch (c) {
    case '{': case '[': return push(s, (char)c);
    case '"': s->mode = JP_STR; s->key = 0; return 0;
    case '-': s->mode = JP_NUM_MINUS; return 0;
    case '0': s->mode = JP_NUM_ZERO; return 0;
    case 't': case 'f': case 'n':
        s->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        s->lit_pos = 1;
        s->mode = JP_LIT;
        return 0;
    default:
        if (c >= '1' && c <= '9') { s->mode = JP_NUM_INT; return 0; }
        return -1;
    }
}

static int feed1(mr_jsonp *s, unsigned char c) {
    switch (s->mode) {
    case JP_TOP: return c == '{' ? push(s, '{') : -1;
    case JP_DONE: return is_ws(c) ? 0 : -1;
    case JP_VALUE: return is_ws(c) ? 0 : start_value(s, c);
    case JP_ARR_FIRST: if (is_ws(c)) return 0; return c == ']' ? jp_close(s, c) : start_value(s, c);
    case JP_OBJ_FIRST:
        if (is_ws(c)) return 0;
        if (c == '}') return jp_close(s, c);
        /* otherwise a key, as after ',' */
        /* fall through */
    case JP_OBJ_KEY:
        if (is_ws(c)) return 0;
        if (c != '"') return -1;
        s->mode = JP_STR;
        s->key = 1;
        return 0;
    case JP_COLON: if (is_ws(c)) return 0; if (c != ':') return -1; s->mode = JP_VALUE; return 0;
    case JP_AFTER:
        if (is_ws(c)) return 0;
        if (c == ',') { s->mode = s->stack[s->depth - 1] == '{' ? JP_OBJ_KEY : JP_VALUE; return 0; }
        return c == '}' || c == ']' ? jp_close(s, c) : -1;
    case JP_STR:
        if (c == '"') { if (s->key) s->mode = JP_COLON; else value_end(s); return 0; }
        if (c == '\\') { s->mode = JP_STR_ESC; return 0; }
        return c < 0x20 ? -1 : 0;
    case JP_STR_ESC:
        if (c == 'u') { s->mode = JP_STR_HEX; s->lit_pos = 4; return 0; }
        if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') { s->mode = JP_STR; return 0; }
        return -1;
    case JP_STR_HEX:
        if (!is_hex(c)) return -1;
        if (--s->lit_pos == 0) s->mode = JP_STR;
        return 0;
    case JP_LIT:
        if (c != (unsigned char)jp_lits[s->lit][s->lit_pos]) return -1;
        if (++s->lit_pos == jp_lit_len[s->lit]) value_end(s);
        return 0;
    case JP_NUM_MINUS:
        if (c == '0') { s->mode = JP_NUM_ZERO; return 0; }
        if (is_digit(c)) { s->mode = JP_NUM_INT; return 0; }
        return -1;
    case JP_NUM_DOT: if (!is_digit(c)) return -1; s->mode = JP_NUM_FRAC; return 0;
    case JP_NUM_E:
        if (c == '+' || c == '-') { s->mode = JP_NUM_E_SIGN; return 0; }
        /* fall through */
    case JP_NUM_E_SIGN: if (!is_digit(c)) return -1; s->mode = JP_NUM_EXP; return 0;
    case JP_NUM_ZERO: case JP_NUM_INT: case JP_NUM_FRAC: case JP_NUM_EXP:
        if (is_digit(c) && s->mode != JP_NUM_ZERO) return 0;
        if (c == '.' && s->mode <= JP_NUM_INT) { s->mode = JP_NUM_DOT; return 0; }
        if ((c == 'e' || c == 'E') && s->mode != JP_NUM_EXP) { s->mode = JP_NUM_E; return 0; }
        /* the number is complete: c belongs to what follows it (numbers are never the top value) */
        s->mode = JP_AFTER;
        return feed1(s, c);
    default: return -1;
    }
}

int mr_jsonp_feed(mr_jsonp *s, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        /* runs of whitespace between tokens (inside strings it is text) */
        const int text = s->mode >= JP_STR && s->mode <= JP_STR_HEX;
        if (!text && is_ws(c) && ++s->ws > MR_JSONP_MAX_WS) return -1;
        if (feed1(s, c)) return -1;
        if (text || !is_ws(c)) s->ws = 0;
    }
    return 0;
}
