/* GGUF writer (version 3 by default). Metadata values are serialized when set; tensor data is
 * taken at write time either from a caller buffer or, for models larger than RAM, from a fill
 * callback called on bounded row chunks, so memory stays O(chunk) whatever the model size.
 * Split output: shard 1 holds all metadata and no tensors, shards 2..N hold the tensors
 * (balanced by bytes, in insertion order) and only the split.* keys (+ general.alignment). */
#include "gguf/gguf.h"
#include "base/base.h"
#include "quant/quant.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILL_CHUNK_BYTES (8u << 20) /* rows per fill callback: about this many bytes */

typedef struct { uint8_t *p; size_t n, cap; int err; } wbuf;

static void wb_put(wbuf *b, const void *src, size_t n) {
    if (b->err || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = mr_realloc(b->p, cap);
        if (!p) { b->err = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void wb_u32(wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb_put(b, &v, 8); }
static void wb_str(wbuf *b, const char *s, uint64_t len) { wb_u64(b, len); wb_put(b, s, (size_t)len); }

typedef struct {
    char *key;
    wbuf val;  /* u32 type + value, as in the file */
} wkv;

typedef struct {
    char *name;
    int type, n_dims;
    int64_t ne[MR_GGUF_MAX_DIMS];
    uint64_t nbytes, row_bytes, n_rows;
    const void *data;
    mr_gguf_fill_fn fill;
    void *user;
    int shard;
    uint64_t offset;
} wtensor;

struct mr_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint32_t version;
};

mr_gguf_writer *mr_gguf_writer_new(void) {
    mr_gguf_writer *w = mr_calloc(1, sizeof *w);
    if (!w) { mr_set_error("gguf writer: out of memory"); return NULL; }
    w->version = 3;
    return w;
}

void mr_gguf_writer_free(mr_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].val.p); }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

int mr_gguf_writer_set_version(mr_gguf_writer *w, uint32_t version) {
    if (version != 2 && version != 3) { mr_set_error("gguf writer: version %u not supported", version); return -1; }
    w->version = version;
    return 0;
}

/* Stores (replacing an earlier value of the same key) an already serialized value. */
static int put_kv(mr_gguf_writer *w, const char *key, wbuf *val) {
    if (val->err) { free(val->p); mr_set_error("gguf writer: out of memory"); return -1; }
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) { free(w->kv[i].val.p); w->kv[i].val = *val; return 0; }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *k = mr_realloc(w->kv, cap * sizeof *k);
        if (!k) { free(val->p); mr_set_error("gguf writer: out of memory"); return -1; }
        w->kv = k;
        w->cap_kv = cap;
    }
    char *kc = mr_strdup(key);
    if (!kc) { free(val->p); mr_set_error("gguf writer: out of memory"); return -1; }
    w->kv[w->n_kv].key = kc;
    w->kv[w->n_kv].val = *val;
    w->n_kv++;
    return 0;
}

static int check_key(const char *key) {
    if (!key || !*key) { mr_set_error("gguf writer: empty metadata key"); return -1; }
    return 0;
}

/* Scalars: data points at one value of the type's natural C type (bool: uint8_t); strings: data
 * is the NUL-terminated string itself. Arrays: n elements; string arrays: const char *[n]. */
int mr_gguf_writer_set_kv(mr_gguf_writer *w, const char *key, int type, int arr_type, uint64_t n, const void *data) {
    wbuf b = {0};
    if (check_key(key)) return -1;
    if (type < 0 || type >= MR_GGUF_VTYPE_COUNT) { mr_set_error("gguf writer: key '%s': bad type %d", key, type); return -1; }
    wb_u32(&b, (uint32_t)type);
    if (type == MR_GGUF_STRING) {
        const char *s = data ? data : "";
        wb_str(&b, s, strlen(s));
    } else if (type == MR_GGUF_ARRAY) {
        if (arr_type < 0 || arr_type >= MR_GGUF_VTYPE_COUNT || arr_type == MR_GGUF_ARRAY) {
            free(b.p);
            mr_set_error("gguf writer: key '%s': bad array element type %d", key, arr_type);
            return -1;
        }
        if (n && !data) { free(b.p); mr_set_error("gguf writer: key '%s': no data", key); return -1; }
        wb_u32(&b, (uint32_t)arr_type);
        wb_u64(&b, n);
        if (arr_type == MR_GGUF_STRING) {
            const char *const *s = data;
            for (uint64_t i = 0; i < n; i++) wb_str(&b, s[i] ? s[i] : "", s[i] ? strlen(s[i]) : 0);
        } else {
            uint64_t bytes;
            if (!mr_mul_ok(n, (uint64_t)mr_gguf_vtype_size(arr_type), &bytes) || bytes > SIZE_MAX) {
                free(b.p);
                mr_set_error("gguf writer: key '%s': array too large", key);
                return -1;
            }
            wb_put(&b, data, (size_t)bytes);
        }
    } else {
        if (!data) { free(b.p); mr_set_error("gguf writer: key '%s': no data", key); return -1; }
        wb_put(&b, data, (size_t)mr_gguf_vtype_size(type));
    }
    return put_kv(w, key, &b);
}

int mr_gguf_writer_copy_kv(mr_gguf_writer *w, const mr_gguf_kv *kv) {
    wbuf b = {0};
    if (check_key(kv->key)) return -1;
    wb_u32(&b, (uint32_t)kv->type);
    switch (kv->type) {
    case MR_GGUF_STRING: wb_str(&b, kv->v.str, strlen(kv->v.str)); break;
    case MR_GGUF_ARRAY:
        wb_u32(&b, (uint32_t)kv->arr_type);
        wb_u64(&b, kv->n);
        if (kv->arr_type == MR_GGUF_STRING) {
            char *const *s = kv->arr;
            for (uint64_t i = 0; i < kv->n; i++) wb_str(&b, s[i], kv->arr_str_len ? kv->arr_str_len[i] : strlen(s[i]));
        } else {
            wb_put(&b, kv->arr, (size_t)(kv->n * (uint64_t)mr_gguf_vtype_size(kv->arr_type)));
        }
        break;
    default: {
        uint8_t v[8];
        switch (kv->type) {
        case MR_GGUF_U8: case MR_GGUF_BOOL: v[0] = (uint8_t)kv->v.u64; break;
        case MR_GGUF_I8: v[0] = (uint8_t)(int8_t)kv->v.i64; break;
        case MR_GGUF_U16: { uint16_t x = (uint16_t)kv->v.u64; memcpy(v, &x, 2); break; }
        case MR_GGUF_I16: { int16_t x = (int16_t)kv->v.i64; memcpy(v, &x, 2); break; }
        case MR_GGUF_U32: { uint32_t x = (uint32_t)kv->v.u64; memcpy(v, &x, 4); break; }
        case MR_GGUF_I32: { int32_t x = (int32_t)kv->v.i64; memcpy(v, &x, 4); break; }
        case MR_GGUF_F32: { float x = (float)kv->v.f64; memcpy(v, &x, 4); break; }
        case MR_GGUF_U64: memcpy(v, &kv->v.u64, 8); break;
        case MR_GGUF_I64: memcpy(v, &kv->v.i64, 8); break;
        case MR_GGUF_F64: memcpy(v, &kv->v.f64, 8); break;
        default: free(b.p); mr_set_error("gguf writer: key '%s': bad type %d", kv->key, kv->type); return -1;
        }
        wb_put(&b, v, (size_t)mr_gguf_vtype_size(kv->type));
    }
    }
    return put_kv(w, kv->key, &b);
}

int mr_gguf_writer_set_u32(mr_gguf_writer *w, const char *key, uint32_t v) { return mr_gguf_writer_set_kv(w, key, MR_GGUF_U32, 0, 1, &v); }
int mr_gguf_writer_set_i32(mr_gguf_writer *w, const char *key, int32_t v) { return mr_gguf_writer_set_kv(w, key, MR_GGUF_I32, 0, 1, &v); }
int mr_gguf_writer_set_u64(mr_gguf_writer *w, const char *key, uint64_t v) { return mr_gguf_writer_set_kv(w, key, MR_GGUF_U64, 0, 1, &v); }
int mr_gguf_writer_set_f32(mr_gguf_writer *w, const char *key, float v) { return mr_gguf_writer_set_kv(w, key, MR_GGUF_F32, 0, 1, &v); }
int mr_gguf_writer_set_bool(mr_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    return mr_gguf_writer_set_kv(w, key, MR_GGUF_BOOL, 0, 1, &b);
}
int mr_gguf_writer_set_str(mr_gguf_writer *w, const char *key, const char *v) { return mr_gguf_writer_set_kv(w, key, MR_GGUF_STRING, 0, 1, v); }

static int add_tensor(mr_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data,
                      mr_gguf_fill_fn fill, void *user) {
    const mr_type_traits *tt = mr_type_get(type);
    if (!name || !*name) { mr_set_error("gguf writer: empty tensor name"); return -1; }
    if (!tt) { mr_set_error("gguf writer: tensor '%s': unknown type %d", name, type); return -1; }
    if (n_dims < 1 || n_dims > MR_GGUF_MAX_DIMS) { mr_set_error("gguf writer: tensor '%s': %d dims", name, n_dims); return -1; }
    if (!data && !fill) { mr_set_error("gguf writer: tensor '%s': no data", name); return -1; }
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) { mr_set_error("gguf writer: duplicate tensor '%s'", name); return -1; }
    wtensor t = {0};
    uint64_t nel = 1;
    for (int d = 0; d < MR_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0 || !mr_mul_ok(nel, (uint64_t)t.ne[d], &nel) || nel > INT64_MAX) {
            mr_set_error("gguf writer: tensor '%s': bad dimension %d", name, d);
            return -1;
        }
    }
    if (t.ne[0] % tt->block_size) {
        mr_set_error("gguf writer: tensor '%s': row length %" PRId64 " not a multiple of %d", name, t.ne[0], tt->block_size);
        return -1;
    }
    t.n_rows = nel / (uint64_t)t.ne[0];
    if (!mr_mul_ok((uint64_t)(t.ne[0] / tt->block_size), tt->type_size, &t.row_bytes) ||
        !mr_mul_ok(t.row_bytes, t.n_rows, &t.nbytes)) { mr_set_error("gguf writer: tensor '%s' too large", name); return -1; }
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *p = mr_realloc(w->t, cap * sizeof *p);
        if (!p) { mr_set_error("gguf writer: out of memory"); return -1; }
        w->t = p;
        w->cap_t = cap;
    }
    if (!(t.name = mr_strdup(name))) { mr_set_error("gguf writer: out of memory"); return -1; }
    t.type = type;
    t.n_dims = n_dims;
    t.data = data;
    t.fill = fill;
    t.user = user;
    w->t[w->n_t++] = t;
    return 0;
}

int mr_gguf_writer_add_tensor(mr_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                              const void *data) {
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

int mr_gguf_writer_add_tensor_fn(mr_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                                 mr_gguf_fill_fn fill, void *user) {
    if (!fill) { mr_set_error("gguf writer: tensor '%s': no fill function", name ? name : ""); return -1; }
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, user);
}

/* general.alignment if the caller set it (must be a u32 power of two), else 32 */
static int writer_alignment(const mr_gguf_writer *w, uint64_t *align) {
    *align = 32;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment")) continue;
        uint32_t type, v;
        memcpy(&type, w->kv[i].val.p, 4);
        if (type != MR_GGUF_U32) { mr_set_error("gguf writer: general.alignment must be u32"); return -1; }
        memcpy(&v, w->kv[i].val.p + 4, 4);
        if (v == 0 || (v & (v - 1)) || v > (1u << 30)) { mr_set_error("gguf writer: general.alignment %u is not a power of two", v); return -1; }
        *align = v;
    }
    return 0;
}

static int write_all(FILE *f, const void *p, size_t n, const char *path) {
    if (n && fwrite(p, 1, n, f) != n) { mr_set_error("%s: write failed: %s", path, strerror(errno)); return -1; }
    return 0;
}

static int write_pad(FILE *f, uint64_t pos, uint64_t align, const char *path) {
    static const uint8_t zeros[4096];
    uint64_t pad = (align - pos % align) % align;
    while (pad) {
        size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if (write_all(f, zeros, n, path)) return -1;
        pad -= n;
    }
    return 0;
}

static void kv_entry(wbuf *b, const char *key, const wbuf *val) {
    wb_str(b, key, strlen(key));
    wb_put(b, val->p, val->n);
}

static void split_kv(wbuf *b, const char *key, int type, uint64_t v) {
    wbuf val = {0};
    wb_u32(&val, (uint32_t)type);
    if (type == MR_GGUF_U16) { uint16_t x = (uint16_t)v; wb_put(&val, &x, 2); }
    else { int32_t x = (int32_t)v; wb_put(&val, &x, 4); }
    if (val.err) b->err = 1;
    else kv_entry(b, key, &val);
    free(val.p);
}

static int write_tensor_data(FILE *f, const wtensor *t, const char *path) {
    if (t->data) return write_all(f, t->data, (size_t)t->nbytes, path);
    uint64_t rows = FILL_CHUNK_BYTES / t->row_bytes;
    if (rows == 0) rows = 1;
    if (rows > t->n_rows) rows = t->n_rows;
    void *buf = mr_malloc((size_t)(rows * t->row_bytes));
    if (!buf) { mr_set_error("%s: out of memory for tensor '%s'", path, t->name); return -1; }
    for (uint64_t r0 = 0; r0 < t->n_rows; r0 += rows) {
        uint64_t n = t->n_rows - r0 < rows ? t->n_rows - r0 : rows;
        mr_clear_error();
        if (t->fill(t->user, t->name, r0, n, buf) != 0) {
            free(buf);
            if (!mr_get_error()[0]) mr_set_error("%s: fill callback failed for tensor '%s'", path, t->name);
            return -1;
        }
        if (write_all(f, buf, (size_t)(n * t->row_bytes), path)) { free(buf); return -1; }
    }
    free(buf);
    return 0;
}

/* Writes one file: header (kv entries already serialized in kvs), the tensors assigned to `shard`. */
static int write_one(mr_gguf_writer *w, const char *path, int shard, const wbuf *kvs, uint64_t n_kv, uint64_t align) {
    char tmp[4200];
    wbuf h = {0};
    uint64_t n_t = 0, off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        if (t->shard != shard) continue;
        n_t++;
        t->offset = off;
        off += (t->nbytes + align - 1) / align * align;
    }
    wb_u32(&h, 0x46554747u);
    wb_u32(&h, w->version);
    wb_u64(&h, n_t);
    wb_u64(&h, n_kv);
    wb_put(&h, kvs->p, kvs->n);
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->shard != shard) continue;
        wb_str(&h, t->name, strlen(t->name));
        wb_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) wb_u64(&h, (uint64_t)t->ne[d]);
        wb_u32(&h, (uint32_t)t->type);
        wb_u64(&h, t->offset);
    }
    if (h.err) { free(h.p); mr_set_error("%s: out of memory", path); return -1; }
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) { free(h.p); mr_set_error("%s: path too long", path); return -1; }
    FILE *f = fopen(tmp, "wb");
    if (!f) { free(h.p); mr_set_error("%s: cannot create: %s", tmp, strerror(errno)); return -1; }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    int rc = write_all(f, h.p, h.n, path) || write_pad(f, h.n, align, path);
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->shard != shard) continue;
        rc = write_tensor_data(f, t, path) || write_pad(f, t->nbytes, align, path);
    }
    free(h.p);
    if (fclose(f) != 0 && !rc) { mr_set_error("%s: write failed: %s", path, strerror(errno)); rc = 1; }
    if (!rc && rename(tmp, path) != 0) { mr_set_error("%s: cannot rename from %s: %s", path, tmp, strerror(errno)); rc = 1; }
    if (rc) { unlink(tmp); return -1; }
    return 0;
}

int mr_gguf_writer_write(mr_gguf_writer *w, const char *path, int n_shards) {
    uint64_t align;
    if (writer_alignment(w, &align)) return -1;
    if (n_shards < 1 || n_shards > 65535) { mr_set_error("%s: bad shard count %d", path, n_shards); return -1; }
    if (n_shards > 1 && w->n_t > (uint64_t)INT32_MAX) { mr_set_error("%s: too many tensors", path); return -1; }

    /* shard assignment: everything in shard 0, or tensors spread over shards 1..N-1 by bytes */
    uint64_t total = 0, acc = 0;
    for (size_t i = 0; i < w->n_t; i++) total += w->t[i].nbytes;
    int s = 1;
    for (size_t i = 0; i < w->n_t; i++) {
        if (n_shards == 1) { w->t[i].shard = 0; continue; }
        /* move on once this shard holds its share (shard s covers bytes up to s/(N-1) of the total) */
        while (s < n_shards - 1 && acc >= (double)total * s / (n_shards - 1)) s++;
        w->t[i].shard = s;
        acc += w->t[i].nbytes;
    }

    for (int sh = 0; sh < n_shards; sh++) {
        char sp[4200];
        wbuf kvs = {0};
        uint64_t n_kv = 0;
        if (n_shards == 1) snprintf(sp, sizeof sp, "%s", path);
        else if (mr_gguf_split_path(sp, sizeof sp, path, sh + 1, n_shards)) return -1;
        for (size_t i = 0; i < w->n_kv; i++) {
            const char *k = w->kv[i].key;
            if (n_shards > 1 && (!strcmp(k, "split.no") || !strcmp(k, "split.count") || !strcmp(k, "split.tensors.count")))
                continue;
            if (sh > 0 && strcmp(k, "general.alignment")) continue;
            kv_entry(&kvs, k, &w->kv[i].val);
            n_kv++;
        }
        if (n_shards > 1) {
            split_kv(&kvs, "split.no", MR_GGUF_U16, (uint64_t)sh);
            split_kv(&kvs, "split.count", MR_GGUF_U16, (uint64_t)n_shards);
            split_kv(&kvs, "split.tensors.count", MR_GGUF_I32, w->n_t);
            n_kv += 3;
        }
        if (kvs.err) { free(kvs.p); mr_set_error("%s: out of memory", sp); return -1; }
        int rc = write_one(w, sp, sh, &kvs, n_kv, align);
        free(kvs.p);
        if (rc) return -1;
    }
    return 0;
}
