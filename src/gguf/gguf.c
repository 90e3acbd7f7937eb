/* GGUF reader (versions 2 and 3, split models).
 *
 * Layout of one file (all little-endian):
 *   u32 magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x { string key, u32 type, value },
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
 *   padding to general.alignment (default 32), tensor data (offsets relative to here).
 * A string is u64 length + bytes (no NUL). An array value is u32 element type, u64 n, n elements.
 *
 * The whole file is mapped read-only and parsed in place through a bounds-checked cursor: every
 * length or count is compared with the bytes left in the file before anything is allocated, so no
 * allocation exceeds a small multiple of the file size. */
#include "gguf/gguf.h"
#include "base/base.h"
#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */

typedef struct {
    char *path;
    int fd;                 /* -1 for an in-memory buffer */
    uint64_t size;
    const uint8_t *base;
    int mapped;             /* base is our mmap (munmap on close) */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    uint64_t n_tensors;
} gg_shard;

struct mr_gguf {
    int n_shards;
    gg_shard *shards;
    uint64_t n_kv;
    mr_gguf_kv *kv;
    uint64_t n_tensors, cap_tensors;
    mr_gguf_tensor *tensors;
    uint64_t *kv_index, kv_mask;  /* open addressing: entry = item index + 1, 0 = empty */
    uint64_t *t_index, t_mask;
};

static const int vt_size[MR_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vt_names[MR_GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

const char *mr_gguf_vtype_name(int type) {
    return type >= 0 && type < MR_GGUF_VTYPE_COUNT ? vt_names[type] : "?";
}

int mr_gguf_vtype_size(int type) { return type >= 0 && type < MR_GGUF_VTYPE_COUNT ? vt_size[type] : 0; }

int mr_gguf_vtype_is_int(int type) {
    return type == MR_GGUF_U8 || type == MR_GGUF_I8 || type == MR_GGUF_U16 || type == MR_GGUF_I16 ||
           type == MR_GGUF_U32 || type == MR_GGUF_I32 || type == MR_GGUF_U64 || type == MR_GGUF_I64;
}

static int vt_is_signed(int type) {
    return type == MR_GGUF_I8 || type == MR_GGUF_I16 || type == MR_GGUF_I32 || type == MR_GGUF_I64;
}

/* A printable, bounded copy of an untrusted name for error messages. */
static const char *pname(const char *s, uint64_t len, char buf[80]) {
    uint64_t n = len < 64 ? len : 64, j = 0;
    for (uint64_t i = 0; i < n; i++) buf[j++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
    if (len > 64) { buf[j++] = '.'; buf[j++] = '.'; buf[j++] = '.'; }
    buf[j] = 0;
    return buf;
}

/* ---- bounds-checked cursor over the mapped file ---- */
typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    const char *path;
} rd;

static uint64_t rd_left(const rd *r) { return r->size - r->pos; }

static int rd_bytes(rd *r, uint64_t n, const uint8_t **out, const char *what) {
    if (n > rd_left(r)) {
        mr_set_error("%s: truncated: %s at offset %" PRIu64 " needs %" PRIu64 " bytes but only %" PRIu64
                     " remain", r->path, what, r->pos, n, rd_left(r));
        return -1;
    }
    *out = r->p + r->pos;
    r->pos += n;
    return 0;
}

static int rd_u32(rd *r, uint32_t *v, const char *what) {
    const uint8_t *b;
    if (rd_bytes(r, 4, &b, what)) return -1;
    memcpy(v, b, 4);
    return 0;
}

static int rd_u64(rd *r, uint64_t *v, const char *what) {
    const uint8_t *b;
    if (rd_bytes(r, 8, &b, what)) return -1;
    memcpy(v, b, 8);
    return 0;
}

static int rd_str(rd *r, const char **s, uint64_t *len, const char *what) {
    uint64_t at = r->pos;
    if (rd_u64(r, len, what)) return -1;
    if (*len > rd_left(r)) {
        mr_set_error("%s: %s at offset %" PRIu64 ": string length %" PRIu64 " exceeds the %" PRIu64
                     " bytes left in the file", r->path, what, at, *len, rd_left(r));
        return -1;
    }
    *s = (const char *)r->p + r->pos;
    r->pos += *len;
    return 0;
}

static char *dupn(const char *s, uint64_t n) {
    char *d = mr_malloc((size_t)n + 1);
    if (!d) return NULL;
    memcpy(d, s, (size_t)n);
    d[n] = 0;
    return d;
}

static void free_kv(mr_gguf_kv *kv) {
    free(kv->key);
    if (kv->type == MR_GGUF_STRING) free(kv->v.str);
    if (kv->type == MR_GGUF_ARRAY) {
        if (kv->arr_type == MR_GGUF_STRING && kv->arr && kv->n > 0) free(((char **)kv->arr)[0]); /* the blob */
        free(kv->arr);
        free(kv->arr_str_len);
    }
    memset(kv, 0, sizeof *kv);
}

static void free_kvs(mr_gguf_kv *kv, uint64_t n) {
    if (!kv) return;
    for (uint64_t i = 0; i < n; i++) free_kv(&kv[i]);
    free(kv);
}

static void widen_scalar(mr_gguf_kv *kv, const uint8_t *b) {
    switch (kv->type) {
    case MR_GGUF_U8: kv->v.u64 = b[0]; break;
    case MR_GGUF_I8: kv->v.i64 = (int8_t)b[0]; break;
    case MR_GGUF_BOOL: kv->v.u64 = b[0] != 0; break;
    case MR_GGUF_U16: { uint16_t x; memcpy(&x, b, 2); kv->v.u64 = x; break; }
    case MR_GGUF_I16: { int16_t x; memcpy(&x, b, 2); kv->v.i64 = x; break; }
    case MR_GGUF_U32: { uint32_t x; memcpy(&x, b, 4); kv->v.u64 = x; break; }
    case MR_GGUF_I32: { int32_t x; memcpy(&x, b, 4); kv->v.i64 = x; break; }
    case MR_GGUF_F32: { float x; memcpy(&x, b, 4); kv->v.f64 = x; break; }
    case MR_GGUF_U64: { uint64_t x; memcpy(&x, b, 8); kv->v.u64 = x; break; }
    case MR_GGUF_I64: { int64_t x; memcpy(&x, b, 8); kv->v.i64 = x; break; }
    case MR_GGUF_F64: { double x; memcpy(&x, b, 8); kv->v.f64 = x; break; }
    default: break;
    }
}

static int oom(const char *path) {
    mr_set_error("%s: out of memory", path);
    return -1;
}

static int parse_kv(rd *r, mr_gguf_kv *kv, uint64_t idx) {
    char what[160], nb[80];
    const char *s;
    uint64_t len;
    snprintf(what, sizeof what, "key of metadata entry #%" PRIu64, idx);
    if (rd_str(r, &s, &len, what)) return -1;
    if (len == 0) { mr_set_error("%s: metadata entry #%" PRIu64 " has an empty key", r->path, idx); return -1; }
    if (memchr(s, 0, (size_t)len)) {
        mr_set_error("%s: metadata key '%s' (entry #%" PRIu64 ") contains a NUL byte", r->path, pname(s, len, nb), idx);
        return -1;
    }
    if (!(kv->key = dupn(s, len))) return oom(r->path);
    pname(s, len, nb);
    uint32_t t;
    snprintf(what, sizeof what, "value type of key '%s'", nb);
    if (rd_u32(r, &t, what)) return -1;
    if (t >= MR_GGUF_VTYPE_COUNT) {
        mr_set_error("%s: key '%s': unknown value type %u", r->path, nb, t);
        return -1;
    }
    kv->type = (int)t;
    kv->n = 1;
    snprintf(what, sizeof what, "value of key '%s'", nb);
    if (t == MR_GGUF_STRING) {
        if (rd_str(r, &s, &len, what)) return -1;
        if (!(kv->v.str = dupn(s, len))) return oom(r->path);
        return 0;
    }
    if (t != MR_GGUF_ARRAY) {
        const uint8_t *b;
        if (rd_bytes(r, (uint64_t)vt_size[t], &b, what)) return -1;
        widen_scalar(kv, b);
        return 0;
    }
    uint32_t at;
    uint64_t n;
    snprintf(what, sizeof what, "array element type of key '%s'", nb);
    if (rd_u32(r, &at, what)) return -1;
    if (at >= MR_GGUF_VTYPE_COUNT) {
        mr_set_error("%s: key '%s': unknown array element type %u", r->path, nb, at);
        return -1;
    }
    if (at == MR_GGUF_ARRAY) {
        mr_set_error("%s: key '%s': nested arrays are not supported", r->path, nb);
        return -1;
    }
    kv->arr_type = (int)at;
    snprintf(what, sizeof what, "array length of key '%s'", nb);
    if (rd_u64(r, &n, what)) return -1;
    uint64_t left = rd_left(r);
    if (at == MR_GGUF_STRING) {
        /* each string is at least its 8-byte length */
        if (n > left / 8) {
            mr_set_error("%s: key '%s': array of %" PRIu64 " strings cannot fit in the %" PRIu64
                         " bytes left in the file", r->path, nb, n, left);
            return -1;
        }
        /* pass 1: validate every length and total the bytes; pass 2: copy into one blob */
        uint64_t save = r->pos, total = 0;
        snprintf(what, sizeof what, "string in array '%s'", nb);
        for (uint64_t i = 0; i < n; i++) {
            if (rd_str(r, &s, &len, what)) return -1;
            total += len + 1; /* <= file size + n: cannot overflow */
        }
        kv->n = n;
        kv->arr = mr_malloc(n ? (size_t)n * sizeof(char *) : 1);
        kv->arr_str_len = mr_malloc(n ? (size_t)n * sizeof(uint64_t) : 1);
        char *blob = mr_malloc(total ? (size_t)total : 1);
        if (!kv->arr || !kv->arr_str_len || !blob) { free(blob); kv->n = 0; return oom(r->path); }
        if (n == 0) free(blob);
        r->pos = save;
        char **ptrs = kv->arr;
        for (uint64_t i = 0; i < n; i++) {
            (void)rd_str(r, &s, &len, what);  /* validated in pass 1 */
            memcpy(blob, s, (size_t)len);
            blob[len] = 0;
            ptrs[i] = blob;
            kv->arr_str_len[i] = len;
            blob += len + 1;
        }
        return 0;
    }
    uint64_t esz = (uint64_t)vt_size[at];
    if (n > left / esz) {
        mr_set_error("%s: key '%s': array of %" PRIu64 " %s values cannot fit in the %" PRIu64
                     " bytes left in the file", r->path, nb, n, vt_names[at], left);
        return -1;
    }
    const uint8_t *b;
    if (rd_bytes(r, n * esz, &b, what)) return -1;
    kv->n = n;
    kv->arr = mr_malloc(n ? (size_t)(n * esz) : 1);
    if (!kv->arr) { kv->n = 0; return oom(r->path); }
    memcpy(kv->arr, b, (size_t)(n * esz));
    return 0;
}

/* ---- name index (open addressing, FNV-1a) over an array of structs whose first member is a char * ---- */
static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

#define NAME_AT(items, stride, i) (*(char *const *)((const char *)(items) + (size_t)(i) * (stride)))

/* Builds the index; returns -1 on out-of-memory, or 1 with *dup set to a duplicated item. */
static int build_index(const void *items, uint64_t n, size_t stride, uint64_t **index, uint64_t *mask, uint64_t *dup) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint64_t *ix = mr_calloc((size_t)cap, sizeof *ix);
    if (!ix) return -1;
    for (uint64_t i = 0; i < n; i++) {
        const char *name = NAME_AT(items, stride, i);
        uint64_t h = hash_str(name) & (cap - 1);
        while (ix[h]) {
            if (!strcmp(NAME_AT(items, stride, ix[h] - 1), name)) { *dup = i; free(ix); return 1; }
            h = (h + 1) & (cap - 1);
        }
        ix[h] = i + 1;
    }
    free(*index);
    *index = ix;
    *mask = cap - 1;
    return 0;
}

static uint64_t index_find(const void *items, size_t stride, const uint64_t *ix, uint64_t mask, const char *name) {
    if (!ix || !name) return 0;
    uint64_t h = hash_str(name) & mask;
    while (ix[h]) {
        if (!strcmp(NAME_AT(items, stride, ix[h] - 1), name)) return ix[h];
        h = (h + 1) & mask;
    }
    return 0;
}

static const mr_gguf_kv *kv_find_linear(const mr_gguf_kv *kv, uint64_t n, const char *key) {
    for (uint64_t i = 0; i < n; i++)
        if (!strcmp(kv[i].key, key)) return &kv[i];
    return NULL;
}

/* Integer value of a kv as (negative?, magnitude / signed value). -1 if not an integer. */
static int kv_int(const mr_gguf_kv *kv, int *neg, uint64_t *u, int64_t *i) {
    if (!mr_gguf_vtype_is_int(kv->type)) return -1;
    if (vt_is_signed(kv->type)) { *i = kv->v.i64; *neg = kv->v.i64 < 0; *u = *neg ? 0 : (uint64_t)kv->v.i64; }
    else { *u = kv->v.u64; *neg = 0; *i = 0; }
    return 0;
}

/* Reads an integer key from a shard's metadata, if present: 0 absent, 1 present, -1 bad. */
static int shard_int_key(const char *path, const mr_gguf_kv *kv, uint64_t n, const char *key, uint64_t max, uint64_t *out) {
    const mr_gguf_kv *k = kv_find_linear(kv, n, key);
    if (!k) return 0;
    int neg; uint64_t u; int64_t i;
    if (kv_int(k, &neg, &u, &i)) {
        mr_set_error("%s: key '%s' has type %s, expected an integer", path, key,
                     k->type == MR_GGUF_ARRAY ? "array" : mr_gguf_vtype_name(k->type));
        return -1;
    }
    if (neg || u > max) {
        if (neg) mr_set_error("%s: key '%s' = %" PRId64 " is out of range (0..%" PRIu64 ")", path, key, i, max);
        else mr_set_error("%s: key '%s' = %" PRIu64 " is out of range (0..%" PRIu64 ")", path, key, u, max);
        return -1;
    }
    *out = u;
    return 1;
}

static int cmp_u64pair(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Magic, version and the two counts, each bounded by what the file could hold. */
static int parse_header(gg_shard *sh, rd *r, uint64_t *n_tensors, uint64_t *n_kv) {
    uint32_t magic, version;
    if (sh->size < 4) {
        mr_set_error("%s: not a GGUF file (only %" PRIu64 " bytes)", sh->path, sh->size);
        return -1;
    }
    memcpy(&magic, sh->base, 4);
    if (magic != GGUF_MAGIC) {
        mr_set_error("%s: not a GGUF file (bad magic %02x %02x %02x %02x)", sh->path, sh->base[0], sh->base[1],
                     sh->base[2], sh->base[3]);
        return -1;
    }
    r->pos = 4;
    if (rd_u32(r, &version, "version")) return -1;
    if (version == 1) {
        mr_set_error("%s: GGUF version 1 is not supported (only versions 2 and 3)", sh->path);
        return -1;
    }
    if (version == 0x02000000u || version == 0x03000000u) {
        mr_set_error("%s: big-endian GGUF is not supported", sh->path);
        return -1;
    }
    if (version != 2 && version != 3) {
        mr_set_error("%s: unsupported GGUF version %u (only versions 2 and 3)", sh->path, version);
        return -1;
    }
    sh->version = version;
    if (rd_u64(r, n_tensors, "tensor count") || rd_u64(r, n_kv, "metadata count")) return -1;
    /* smallest metadata entry: 8-byte key length + 1 key byte + 4-byte type + 1-byte value */
    if (*n_kv > rd_left(r) / 14) {
        mr_set_error("%s: metadata count %" PRIu64 " cannot fit in a file of %" PRIu64 " bytes", sh->path, *n_kv, sh->size);
        return -1;
    }
    /* smallest tensor info: 8 + 1 (name) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset) */
    if (*n_tensors > rd_left(r) / 33) {
        mr_set_error("%s: tensor count %" PRIu64 " cannot fit in a file of %" PRIu64 " bytes", sh->path, *n_tensors,
                     sh->size);
        return -1;
    }
    return 0;
}

/* The n_kv metadata entries into *kv_out (owned by the caller even on failure: *n_done of them are
 * filled); duplicate keys are refused. The array grows as entries are actually parsed, so a count that
 * lies costs no memory. */
static int parse_kvs(const gg_shard *sh, rd *r, uint64_t n_kv, mr_gguf_kv **kv_out, uint64_t *n_done) {
    char nb[80];
    uint64_t kv_cap = n_kv < 256 ? n_kv : 256, *ix = NULL, ix_mask = 0, dup = 0;
    mr_gguf_kv *kv = mr_calloc(kv_cap ? (size_t)kv_cap : 1, sizeof *kv);
    *kv_out = kv;
    *n_done = 0;
    if (!kv) return oom(sh->path);
    for (; *n_done < n_kv; ++*n_done) {
        if (*n_done == kv_cap) {
            uint64_t cap = kv_cap * 2 < n_kv ? kv_cap * 2 : n_kv;
            mr_gguf_kv *k = mr_realloc(kv, (size_t)cap * sizeof *k);
            if (!k) return oom(sh->path);
            memset(k + kv_cap, 0, (size_t)(cap - kv_cap) * sizeof *k);
            *kv_out = kv = k;
            kv_cap = cap;
        }
        if (parse_kv(r, &kv[*n_done], *n_done)) { ++*n_done; return -1; }
    }
    int rc = build_index(kv, n_kv, sizeof *kv, &ix, &ix_mask, &dup);
    free(ix);
    if (rc < 0) return oom(sh->path);
    if (rc > 0) {
        mr_set_error("%s: duplicate metadata key '%s'", sh->path, pname(kv[dup].key, strlen(kv[dup].key), nb));
        return -1;
    }
    return 0;
}

/* general.alignment: a power of two (ggml stores it as u32); 32 when absent. */
static int read_alignment(gg_shard *sh, const mr_gguf_kv *kv, uint64_t n_kv) {
    sh->alignment = 32;
    const mr_gguf_kv *a = kv_find_linear(kv, n_kv, "general.alignment");
    if (!a) return 0;
    int neg; uint64_t u; int64_t i;
    if (kv_int(a, &neg, &u, &i)) {
        mr_set_error("%s: general.alignment has type %s, expected u32", sh->path, mr_gguf_vtype_name(a->type));
        return -1;
    }
    if (neg || u == 0 || (u & (u - 1)) || u > (1u << 30)) {
        mr_set_error("%s: general.alignment = %" PRId64 " is not a power of two in 1..2^30", sh->path,
                     neg ? i : (int64_t)u);
        return -1;
    }
    sh->alignment = u;
    return 0;
}

/* One tensor info (#ti of shard si) appended to g->tensors: name, dims, type, size, offset. */
static int parse_tensor_info(mr_gguf *g, int si, rd *r, uint64_t ti, uint64_t last) {
    const gg_shard *sh = &g->shards[si];
    char what[160], nb[80];
    if (g->n_tensors == g->cap_tensors) {
        uint64_t left = last - g->n_tensors, cap = g->cap_tensors + (left < 256 ? left : 256);
        if (cap < 2 * g->cap_tensors && 2 * g->cap_tensors <= last) cap = 2 * g->cap_tensors;
        mr_gguf_tensor *nt = mr_realloc(g->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return oom(sh->path);
        g->tensors = nt;
        g->cap_tensors = cap;
    }
    mr_gguf_tensor *t = &g->tensors[g->n_tensors];
    const char *s;
    uint64_t len;
    memset(t, 0, sizeof *t);
    snprintf(what, sizeof what, "name of tensor #%" PRIu64, ti);
    if (rd_str(r, &s, &len, what)) return -1;
    if (len == 0) { mr_set_error("%s: tensor #%" PRIu64 " has an empty name", sh->path, ti); return -1; }
    pname(s, len, nb);
    if (memchr(s, 0, (size_t)len)) {
        mr_set_error("%s: tensor name '%s' (#%" PRIu64 ") contains a NUL byte", sh->path, nb, ti);
        return -1;
    }
    if (!(t->name = dupn(s, len))) return oom(sh->path);
    g->n_tensors++; /* owned from here on */
    uint32_t n_dims, type;
    snprintf(what, sizeof what, "dimension count of tensor '%s'", nb);
    if (rd_u32(r, &n_dims, what)) return -1;
    if (n_dims == 0 || n_dims > MR_GGUF_MAX_DIMS) {
        mr_set_error("%s: tensor '%s' has %u dimensions (must be 1..%d)", sh->path, nb, n_dims, MR_GGUF_MAX_DIMS);
        return -1;
    }
    t->n_dims = (int)n_dims;
    uint64_t nel = 1;
    for (int d = 0; d < MR_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        snprintf(what, sizeof what, "dimension %u of tensor '%s'", d, nb);
        if (rd_u64(r, &ne, what)) return -1;
        if (ne == 0) { mr_set_error("%s: tensor '%s': dimension %u is 0", sh->path, nb, d); return -1; }
        if (ne > (uint64_t)INT64_MAX || !mr_mul_ok(nel, ne, &nel) || nel > (uint64_t)INT64_MAX) {
            mr_set_error("%s: tensor '%s': element count overflows at dimension %u (%" PRIu64 ")", sh->path, nb, d, ne);
            return -1;
        }
        t->ne[d] = (int64_t)ne;
    }
    snprintf(what, sizeof what, "type of tensor '%s'", nb);
    if (rd_u32(r, &type, what)) return -1;
    const mr_type_traits *tt = mr_type_get((int)type);
    if (type > INT32_MAX || !tt) {
        mr_set_error("%s: tensor '%s' has unknown type %u", sh->path, nb, type);
        return -1;
    }
    t->type = (int)type;
    if (t->ne[0] % tt->block_size) {
        mr_set_error("%s: tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %d", sh->path,
                     nb, t->ne[0], tt->name, tt->block_size);
        return -1;
    }
    uint64_t row_bytes;
    if (!mr_mul_ok((uint64_t)(t->ne[0] / tt->block_size), tt->type_size, &row_bytes) ||
        !mr_mul_ok(row_bytes, nel / (uint64_t)t->ne[0], &t->nbytes)) {
        mr_set_error("%s: tensor '%s': byte size overflows", sh->path, nb);
        return -1;
    }
    snprintf(what, sizeof what, "data offset of tensor '%s'", nb);
    if (rd_u64(r, &t->offset, what)) return -1;
    t->shard = si;
    return 0;
}

/* Data section of a shard's tensors [first_t, first_t + n): aligned start, every tensor aligned,
 * inside the file, no overlaps; sets each tensor's file offset and pointer. */
static int place_tensors(mr_gguf *g, gg_shard *sh, uint64_t first_t, uint64_t n, uint64_t header_end) {
    char nb[80];
    uint64_t *order = NULL;
    sh->data_offset = (header_end + sh->alignment - 1) / sh->alignment * sh->alignment;
    if (n) {
        order = mr_malloc((size_t)n * 2 * sizeof *order);
        if (!order) return oom(sh->path);
    }
    for (uint64_t ti = 0; ti < n; ti++) {
        mr_gguf_tensor *t = &g->tensors[first_t + ti];
        pname(t->name, strlen(t->name), nb);
        uint64_t start, end;
        if (t->offset % sh->alignment) {
            mr_set_error("%s: tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                         sh->path, nb, t->offset, sh->alignment);
            goto fail;
        }
        if (!mr_add_ok(sh->data_offset, t->offset, &start) || !mr_add_ok(start, t->nbytes, &end) || end > sh->size) {
            mr_set_error("%s: tensor '%s': data (offset %" PRIu64 ", %" PRIu64 " bytes) extends past the end of the "
                         "file (data section at %" PRIu64 ", file size %" PRIu64 ")",
                         sh->path, nb, t->offset, t->nbytes, sh->data_offset, sh->size);
            goto fail;
        }
        t->file_offset = start;
        t->data = sh->base + start;
        order[2 * ti] = t->offset;
        order[2 * ti + 1] = first_t + ti;
    }
    if (n > 1) {
        qsort(order, (size_t)n, 2 * sizeof *order, cmp_u64pair);
        for (uint64_t k = 1; k < n; k++) {
            const mr_gguf_tensor *a = &g->tensors[order[2 * (k - 1) + 1]], *b = &g->tensors[order[2 * k + 1]];
            if (a->offset + a->nbytes > b->offset) {
                char nb2[80];
                mr_set_error("%s: tensors '%s' and '%s' overlap in the data section", sh->path,
                             pname(a->name, strlen(a->name), nb), pname(b->name, strlen(b->name), nb2));
                goto fail;
            }
        }
    }
    free(order);
    return 0;
fail:
    free(order);
    return -1;
}

/* Parses shard `si`: header, metadata (returned in *kv_out) and tensor infos (appended to g->tensors). */
static int parse_shard(mr_gguf *g, int si, mr_gguf_kv **kv_out, uint64_t *n_kv_out) {
    gg_shard *sh = &g->shards[si];
    rd r = {sh->base, sh->size, 0, sh->path};
    uint64_t n_tensors, n_kv, kv_done = 0, first_t = g->n_tensors;
    mr_gguf_kv *kv = NULL;

    *kv_out = NULL;
    *n_kv_out = 0;
    if (parse_header(sh, &r, &n_tensors, &n_kv)) return -1;
    if (parse_kvs(sh, &r, n_kv, &kv, &kv_done) || read_alignment(sh, kv, n_kv)) goto fail;
    for (uint64_t ti = 0; ti < n_tensors; ti++)
        if (parse_tensor_info(g, si, &r, ti, first_t + n_tensors)) goto fail;
    sh->n_tensors = n_tensors;
    if (place_tensors(g, sh, first_t, n_tensors, r.pos)) goto fail;
    *kv_out = kv;
    *n_kv_out = n_kv;
    return 0;
fail:
    free_kvs(kv, kv_done);
    return -1;
}

static int map_shard(gg_shard *sh, const char *path) {
    struct stat st;
    sh->fd = -1;
    if (!(sh->path = mr_strdup(path))) return oom(path);
    sh->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (sh->fd < 0) { mr_set_error("%s: cannot open: %s", path, strerror(errno)); return -1; }
    if (fstat(sh->fd, &st) != 0) { mr_set_error("%s: cannot stat: %s", path, strerror(errno)); return -1; }
    if (!S_ISREG(st.st_mode)) { mr_set_error("%s: not a regular file", path); return -1; }
    sh->size = (uint64_t)st.st_size;
    if (sh->size == 0) { mr_set_error("%s: not a GGUF file (empty)", path); return -1; }
    if (sh->size > SIZE_MAX) { mr_set_error("%s: file too large to map", path); return -1; }
    void *m = mmap(NULL, (size_t)sh->size, PROT_READ, MAP_SHARED, sh->fd, 0);
    if (m == MAP_FAILED) { mr_set_error("%s: cannot map: %s", path, strerror(errno)); return -1; }
    sh->base = m;
    sh->mapped = 1;
    mr_map_guard_add(m, (size_t)sh->size, sh->path, sh->fd);
    return 0;
}

int mr_gguf_check_files(const mr_gguf *g) {
    for (int i = 0; i < g->n_shards; i++) {
        const gg_shard *sh = &g->shards[i];
        struct stat st;
        if (sh->fd < 0) continue; /* an in-memory image */
        if (fstat(sh->fd, &st) != 0) { mr_set_error("%s: cannot stat: %s", sh->path, strerror(errno)); return -1; }
        if ((uint64_t)st.st_size < sh->size) {
            mr_set_error("%s: the file shrank from %" PRIu64 " to %" PRIu64 " bytes while the model is loaded (truncated "
                         "or rewritten in place); its weights are gone: load it again", sh->path, sh->size,
                         (uint64_t)st.st_size);
            return -1;
        }
    }
    return 0;
}

void mr_gguf_close(mr_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_shards; i++) {
        gg_shard *sh = &g->shards[i];
        if (sh->mapped) {
            mr_map_guard_remove(sh->base);
            munmap((void *)sh->base, (size_t)sh->size);
        }
        if (sh->fd >= 0) close(sh->fd);
        free(sh->path);
    }
    free(g->shards);
    free_kvs(g->kv, g->n_kv);
    for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    free(g->kv_index);
    free(g->t_index);
    free(g);
}

int mr_gguf_split_path(char *buf, size_t size, const char *path, int i, int n) {
    size_t len = strlen(path);
    if (len < 5 || strcmp(path + len - 5, ".gguf") != 0) {
        mr_set_error("%s: a split model path must end in .gguf", path);
        return -1;
    }
    if (n < 1 || n > 99999 || i < 1 || i > n) {
        mr_set_error("%s: bad shard %d of %d", path, i, n);
        return -1;
    }
    int w = snprintf(buf, size, "%.*s-%05d-of-%05d.gguf", (int)(len - 5), path, i, n);
    if (w < 0 || (size_t)w >= size) { mr_set_error("%s: shard path too long", path); return -1; }
    return 0;
}

/* Recognises PREFIX-00001-of-NNNNN.gguf and returns PREFIX.gguf in buf. */
static int split_prefix(char *buf, size_t size, const char *path, uint64_t count) {
    char tail[64];
    size_t len = strlen(path);
    snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", 1, (int)count);
    size_t tl = strlen(tail);
    if (len <= tl || strcmp(path + len - tl, tail) != 0) {
        mr_set_error("%s: split model (split.count = %" PRIu64 ") but the name does not end in %s", path, count, tail);
        return -1;
    }
    if (len - tl + 5 >= size) { mr_set_error("%s: path too long", path); return -1; }
    memcpy(buf, path, len - tl);
    memcpy(buf + len - tl, ".gguf", 6);
    return 0;
}

/* Split keys of one shard: split.no (0-based) and split.count; 0 if absent (single file). */
static int read_split_keys(const char *path, const mr_gguf_kv *kv, uint64_t n_kv, uint64_t *no, uint64_t *count,
                           uint64_t *tcount, int *has_tcount) {
    *no = 0;
    *count = 1;
    *has_tcount = 0;
    int a = shard_int_key(path, kv, n_kv, "split.count", 65535, count);
    if (a < 0) return -1;
    if (a > 0 && *count == 0) { mr_set_error("%s: split.count is 0", path); return -1; }
    int b = shard_int_key(path, kv, n_kv, "split.no", 65535, no);
    if (b < 0) return -1;
    int c = shard_int_key(path, kv, n_kv, "split.tensors.count", INT32_MAX, tcount);
    if (c < 0) return -1;
    *has_tcount = c > 0;
    if (*no >= *count) {
        mr_set_error("%s: split.no = %" PRIu64 " is not below split.count = %" PRIu64, path, *no, *count);
        return -1;
    }
    return 0;
}

static int finish(mr_gguf *g) {
    uint64_t dup = 0;
    char nb[80];
    int rc = build_index(g->kv, g->n_kv, sizeof *g->kv, &g->kv_index, &g->kv_mask, &dup);
    if (rc < 0) return oom(g->shards[0].path);
    rc = build_index(g->tensors, g->n_tensors, sizeof *g->tensors, &g->t_index, &g->t_mask, &dup);
    if (rc < 0) return oom(g->shards[0].path);
    if (rc > 0) {
        const mr_gguf_tensor *t = &g->tensors[dup];
        mr_set_error("%s: duplicate tensor name '%s'", g->shards[t->shard].path, pname(t->name, strlen(t->name), nb));
        return -1;
    }
    return 0;
}

static int load(mr_gguf *g, int allow_split) {
    const char *path = g->shards[0].path;
    uint64_t no, count, tcount;
    int has_tcount;
    if (parse_shard(g, 0, &g->kv, &g->n_kv)) return -1;
    if (read_split_keys(path, g->kv, g->n_kv, &no, &count, &tcount, &has_tcount)) return -1;
    if (no != 0) {
        mr_set_error("%s: this is shard %" PRIu64 " of %" PRIu64 " of a split model; open the first shard", path,
                     no + 1, count);
        return -1;
    }
    if (count > 1) {
        char prefix[4096], sp[4200];
        if (!allow_split) { mr_set_error("%s: split models cannot be opened from memory", path); return -1; }
        if (split_prefix(prefix, sizeof prefix, path, count)) return -1;
        gg_shard *s = mr_realloc(g->shards, (size_t)count * sizeof *s);
        if (!s) return oom(path);
        g->shards = s;
        for (uint64_t i = 1; i < count; i++) {
            gg_shard *sh = &g->shards[i];
            memset(sh, 0, sizeof *sh);
            sh->fd = -1;
            g->n_shards = (int)i + 1;
            if (mr_gguf_split_path(sp, sizeof sp, prefix, (int)i + 1, (int)count)) return -1;
            if (map_shard(sh, sp)) return -1;
            mr_gguf_kv *kv;
            uint64_t n_kv, no2, count2, tc2;
            int has2;
            if (parse_shard(g, (int)i, &kv, &n_kv)) return -1;
            int bad = read_split_keys(sp, kv, n_kv, &no2, &count2, &tc2, &has2);
            free_kvs(kv, n_kv);
            if (bad) return -1;
            if (no2 != i || count2 != count) {
                mr_set_error("%s: split.no = %" PRIu64 ", split.count = %" PRIu64 "; expected %" PRIu64 " and %" PRIu64,
                             sp, no2, count2, i, count);
                return -1;
            }
        }
    }
    if (has_tcount && tcount != g->n_tensors) {
        mr_set_error("%s: split.tensors.count = %" PRIu64 " but the shards hold %" PRIu64 " tensors", path, tcount,
                     g->n_tensors);
        return -1;
    }
    return finish(g);
}

static mr_gguf *new_gguf(void) {
    mr_gguf *g = mr_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->shards = mr_calloc(1, sizeof *g->shards);
    if (!g->shards) { free(g); return NULL; }
    g->shards[0].fd = -1;
    g->n_shards = 1;
    return g;
}

mr_gguf *mr_gguf_open(const char *path) {
    mr_gguf *g = new_gguf();
    if (!g) { mr_set_error("%s: out of memory", path); return NULL; }
    if (map_shard(&g->shards[0], path) || load(g, 1)) { mr_gguf_close(g); return NULL; }
    return g;
}

mr_gguf *mr_gguf_open_memory(const void *data, size_t size, const char *name) {
    if (!name) name = "<memory>";
    mr_gguf *g = new_gguf();
    if (!g || !(g->shards[0].path = mr_strdup(name))) { mr_gguf_close(g); mr_set_error("%s: out of memory", name); return NULL; }
    g->shards[0].base = data;
    g->shards[0].size = size;
    if (load(g, 0)) { mr_gguf_close(g); return NULL; }
    return g;
}

/* ---- accessors ---- */
uint32_t mr_gguf_version(const mr_gguf *g) { return g->shards[0].version; }
uint64_t mr_gguf_alignment(const mr_gguf *g) { return g->shards[0].alignment; }
int mr_gguf_n_shards(const mr_gguf *g) { return g->n_shards; }
static const gg_shard *shard(const mr_gguf *g, int i) { return i >= 0 && i < g->n_shards ? &g->shards[i] : NULL; }
const char *mr_gguf_shard_path(const mr_gguf *g, int i) { const gg_shard *s = shard(g, i); return s ? s->path : NULL; }
int mr_gguf_shard_fd(const mr_gguf *g, int i) { const gg_shard *s = shard(g, i); return s ? s->fd : -1; }
uint64_t mr_gguf_shard_size(const mr_gguf *g, int i) { const gg_shard *s = shard(g, i); return s ? s->size : 0; }
uint64_t mr_gguf_shard_data_offset(const mr_gguf *g, int i) { const gg_shard *s = shard(g, i); return s ? s->data_offset : 0; }
uint64_t mr_gguf_shard_n_tensors(const mr_gguf *g, int i) { const gg_shard *s = shard(g, i); return s ? s->n_tensors : 0; }

uint64_t mr_gguf_n_kv(const mr_gguf *g) { return g->n_kv; }
const mr_gguf_kv *mr_gguf_kv_at(const mr_gguf *g, uint64_t i) { return i < g->n_kv ? &g->kv[i] : NULL; }
const mr_gguf_kv *mr_gguf_find_kv(const mr_gguf *g, const char *key) {
    uint64_t i = index_find(g->kv, sizeof *g->kv, g->kv_index, g->kv_mask, key);
    return i ? &g->kv[i - 1] : NULL;
}

uint64_t mr_gguf_n_tensors(const mr_gguf *g) { return g->n_tensors; }
const mr_gguf_tensor *mr_gguf_tensor_at(const mr_gguf *g, uint64_t i) { return i < g->n_tensors ? &g->tensors[i] : NULL; }
const mr_gguf_tensor *mr_gguf_find_tensor(const mr_gguf *g, const char *name) {
    uint64_t i = index_find(g->tensors, sizeof *g->tensors, g->t_index, g->t_mask, name);
    return i ? &g->tensors[i - 1] : NULL;
}

/* ---- typed getters ---- */
static const char *kv_type_desc(const mr_gguf_kv *kv, char buf[32]) {
    if (kv->type == MR_GGUF_ARRAY) snprintf(buf, 32, "array of %s", mr_gguf_vtype_name(kv->arr_type));
    else snprintf(buf, 32, "%s", mr_gguf_vtype_name(kv->type));
    return buf;
}

static const mr_gguf_kv *need(const mr_gguf *g, const char *key) {
    const mr_gguf_kv *kv = mr_gguf_find_kv(g, key);
    if (!kv) mr_set_error("%s: metadata key '%s' not found", g->shards[0].path, key);
    return kv;
}

static int wrong_type(const mr_gguf *g, const mr_gguf_kv *kv, const char *want) {
    char b[32];
    mr_set_error("%s: metadata key '%s' has type %s, expected %s", g->shards[0].path, kv->key, kv_type_desc(kv, b), want);
    return -1;
}

/* integer in [lo, hi] (lo <= 0 <= hi) */
static int get_int_range(const mr_gguf *g, const char *key, const char *want, int64_t lo, uint64_t hi, int *neg,
                         uint64_t *u, int64_t *i) {
    const mr_gguf_kv *kv = need(g, key);
    if (!kv) return -1;
    if (kv_int(kv, neg, u, i)) return wrong_type(g, kv, want);
    if (*neg ? *i < lo : *u > hi) {
        if (*neg) mr_set_error("%s: metadata key '%s' = %" PRId64 " does not fit in %s", g->shards[0].path, key, *i, want);
        else mr_set_error("%s: metadata key '%s' = %" PRIu64 " does not fit in %s", g->shards[0].path, key, *u, want);
        return -1;
    }
    return 0;
}

int mr_gguf_get_u32(const mr_gguf *g, const char *key, uint32_t *out) {
    int neg; uint64_t u; int64_t i;
    if (get_int_range(g, key, "u32", 0, UINT32_MAX, &neg, &u, &i)) return -1;
    *out = (uint32_t)u;
    return 0;
}

int mr_gguf_get_i32(const mr_gguf *g, const char *key, int32_t *out) {
    int neg; uint64_t u; int64_t i;
    if (get_int_range(g, key, "i32", INT32_MIN, INT32_MAX, &neg, &u, &i)) return -1;
    *out = neg ? (int32_t)i : (int32_t)u;
    return 0;
}

int mr_gguf_get_u64(const mr_gguf *g, const char *key, uint64_t *out) {
    int neg; uint64_t u; int64_t i;
    if (get_int_range(g, key, "u64", 0, UINT64_MAX, &neg, &u, &i)) return -1;
    *out = u;
    return 0;
}

int mr_gguf_get_i64(const mr_gguf *g, const char *key, int64_t *out) {
    int neg; uint64_t u; int64_t i;
    if (get_int_range(g, key, "i64", INT64_MIN, INT64_MAX, &neg, &u, &i)) return -1;
    *out = neg ? i : (int64_t)u;
    return 0;
}

int mr_gguf_get_f32(const mr_gguf *g, const char *key, float *out) {
    const mr_gguf_kv *kv = need(g, key);
    if (!kv) return -1;
    if (kv->type != MR_GGUF_F32 && kv->type != MR_GGUF_F64) return wrong_type(g, kv, "f32");
    *out = (float)kv->v.f64;
    return 0;
}

int mr_gguf_get_bool(const mr_gguf *g, const char *key, int *out) {
    const mr_gguf_kv *kv = need(g, key);
    if (!kv) return -1;
    if (kv->type != MR_GGUF_BOOL) return wrong_type(g, kv, "bool");
    *out = kv->v.u64 != 0;
    return 0;
}

int mr_gguf_get_str(const mr_gguf *g, const char *key, const char **out) {
    const mr_gguf_kv *kv = need(g, key);
    if (!kv) return -1;
    if (kv->type != MR_GGUF_STRING) return wrong_type(g, kv, "string");
    *out = kv->v.str;
    return 0;
}

int mr_gguf_get_arr(const mr_gguf *g, const char *key, int elem_type, const void **data, uint64_t *n) {
    const mr_gguf_kv *kv = need(g, key);
    if (!kv) return -1;
    if (kv->type != MR_GGUF_ARRAY || kv->arr_type != elem_type) {
        char want[32];
        snprintf(want, sizeof want, "array of %s", mr_gguf_vtype_name(elem_type));
        return wrong_type(g, kv, want);
    }
    *data = kv->arr;
    *n = kv->n;
    return 0;
}
