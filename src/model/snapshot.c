/* Session snapshots (moerun.h mr_session_save / mr_session_restore, docs/SNAPSHOTS.md).
 *
 * Layout (native byte order; x86-64 and AArch64 are both little-endian):
 *   snap_header (96 bytes)
 *   body: [n_past] int32 token ids (when has_tokens), then the state regions in the order the
 *         architecture's state_io hands them out (model.h), state_bytes in all
 * body_hash is mr_hash64 chained over consecutive SNAP_CHUNK pieces of the body, so the file writer
 * and reader can hash while they stream and the buffer functions hash it in one pass. Restoring checks
 * everything that can be checked before the state is touched: the header's own hash, magic, version,
 * model identity, context, the exact sizes the model's state_io expects for n_past, and (for a buffer)
 * the body hash; a file's body hash is checked as it is read, and a mismatch resets the session. */
#include "model/model.h"
#include "base/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_MAGIC "moerunSS"
#define SNAP_CHUNK ((size_t)1 << 20)

typedef struct {
    char magic[8];
    uint32_t version;       /* MR_SNAPSHOT_VERSION */
    uint32_t header_bytes;  /* sizeof(snap_header) */
    uint64_t model_id;      /* mr_model_identity */
    int32_t n_past;
    uint32_t has_tokens;    /* 1: the body starts with n_past token ids */
    uint64_t state_bytes;   /* the state regions after the token ids */
    uint64_t body_hash;
    char arch[40];          /* general.architecture, for the error message of a foreign snapshot */
    uint64_t header_hash;   /* mr_hash64 of the bytes above */
} snap_header;
_Static_assert(sizeof(snap_header) == 96, "snapshot header layout");

/* ---- model identity ---- */

static uint64_t hash_str(const char *s, uint64_t h) { return mr_hash64(s, strlen(s) + 1, h); }

/* What the snapshot's meaning depends on: the GGUF's metadata and tensor table (names, types, shapes,
 * offsets), its shard sizes, the first bytes of every tensor that is not a routed expert (those are
 * read by every eval anyway; sampling the experts would cost a disk read each on a paged model), and
 * the load settings that change the state's layout or values (kv_f32, graph, ds4_prefill_f32).
 * Not the ISA, the threads or the RAM budget: they give the same state. */
static uint64_t model_identity(const mr_model *m) {
    const mr_gguf *g = m->gguf;
    uint64_t h = hash_str(m->arch_name, 0x6d6f6572756e4944ull);
    const int64_t set[3] = {m->params.kv_f32, m->params.graph, m->params.ds4_prefill_f32};
    h = mr_hash64(set, sizeof set, h);
    for (int i = 0; i < mr_gguf_n_shards(g); i++) h = mr_hash64_u64(mr_gguf_shard_size(g, i), h);
    for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
        const mr_gguf_kv *kv = mr_gguf_kv_at(g, i);
        h = hash_str(kv->key, h);
        const uint64_t t[3] = {(uint64_t)kv->type, (uint64_t)kv->arr_type, kv->n};
        h = mr_hash64(t, sizeof t, h);
        if (kv->type == MR_GGUF_STRING) h = hash_str(kv->v.str, h);
        else if (kv->type != MR_GGUF_ARRAY) h = mr_hash64(&kv->v, sizeof kv->v, h);
        else if (kv->arr_type == MR_GGUF_STRING)
            for (uint64_t k = 0; k < kv->n; k++) h = mr_hash64(((char **)kv->arr)[k], kv->arr_str_len[k], h);
        else h = mr_hash64(kv->arr, (size_t)kv->n * (size_t)mr_gguf_vtype_size(kv->arr_type), h);
    }
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        h = hash_str(t->name, h);
        const int64_t d[8] = {t->type, t->n_dims, t->ne[0], t->ne[1], t->ne[2], t->ne[3], t->shard, (int64_t)t->offset};
        h = mr_hash64(d, sizeof d, h);
        if (!mr_gguf_is_routed_expert(t->name) && t->data)
            h = mr_hash64(t->data, t->nbytes < 64 ? (size_t)t->nbytes : 64, h);
    }
    return h ? h : 1; /* 0 means "not computed yet" below */
}

uint64_t mr_model_identity(const mr_model *m) {
    /* computed once; two threads racing compute the same value */
    uint64_t v = atomic_load_explicit(&((mr_model *)m)->identity, memory_order_relaxed);
    if (!v) {
        v = model_identity(m);
        atomic_store_explicit(&((mr_model *)m)->identity, v, memory_order_relaxed);
    }
    return v;
}

/* ---- the state regions ---- */

static int io_count(mr_state_io *io, void *data, size_t bytes) {
    (void)data;
    *(uint64_t *)io->user += bytes;
    return 0;
}

/* bytes of the state regions of m at n_past */
static int state_bytes(mr_session *s, int n_past, uint64_t *out) {
    if (!s->m->arch->state_io) { mr_set_error("snapshot: %s sessions cannot be saved", s->m->arch->name); return -1; }
    *out = 0;
    mr_state_io io = {.restore = 0, .fn = io_count, .user = out};
    return s->m->arch->state_io(s->m, s->st, n_past, &io);
}

static uint64_t body_hash(const unsigned char *p, size_t n) {
    uint64_t h = 0;
    for (size_t off = 0; off < n; off += SNAP_CHUNK) h = mr_hash64(p + off, n - off < SNAP_CHUNK ? n - off : SNAP_CHUNK, h);
    return h;
}

static void header_fill(snap_header *hd, mr_session *s, int has_tokens, uint64_t sbytes) {
    memset(hd, 0, sizeof *hd);
    memcpy(hd->magic, SNAP_MAGIC, 8);
    hd->version = MR_SNAPSHOT_VERSION;
    hd->header_bytes = sizeof *hd;
    hd->model_id = mr_model_identity(s->m);
    hd->n_past = s->n_past;
    hd->has_tokens = has_tokens ? 1 : 0;
    hd->state_bytes = sbytes;
    snprintf(hd->arch, sizeof hd->arch, "%.39s", s->m->arch_name);
}

static void header_seal(snap_header *hd) { hd->header_hash = mr_hash64(hd, offsetof(snap_header, header_hash), 0); }

static uint64_t body_bytes(const snap_header *hd) { return (hd->has_tokens ? (uint64_t)hd->n_past * 4 : 0) + hd->state_bytes; }

/* The header alone: its hash, magic, version and plausible fields. what names the source in errors. */
static int header_check(const snap_header *hd, const char *what) {
    if (memcmp(hd->magic, SNAP_MAGIC, 8)) { mr_set_error("%s: not a moerun snapshot", what); return -1; }
    if (hd->header_hash != mr_hash64(hd, offsetof(snap_header, header_hash), 0)) {
        mr_set_error("%s: the snapshot header is corrupted (checksum)", what);
        return -1;
    }
    if (hd->version != MR_SNAPSHOT_VERSION || hd->header_bytes != sizeof *hd) {
        mr_set_error("%s: snapshot format version %u, this build reads version %d", what, hd->version, MR_SNAPSHOT_VERSION);
        return -1;
    }
    if (hd->n_past < 0 || hd->has_tokens > 1 || hd->state_bytes > ((uint64_t)1 << 48) || memchr(hd->arch, 0, sizeof hd->arch) == NULL) {
        mr_set_error("%s: the snapshot header is inconsistent", what);
        return -1;
    }
    return 0;
}

/* The header against the session it is restored into (before anything is touched). */
static int header_fits(const snap_header *hd, mr_session *s, const char *what, int max_tokens, int want_tokens) {
    if (hd->model_id != mr_model_identity(s->m)) {
        mr_set_error("%s: the snapshot is of another model (%s, identity %016llx; this is %s, %016llx) or of other "
                     "kv_f32/graph settings", what, hd->arch, (unsigned long long)hd->model_id, s->m->arch_name,
                     (unsigned long long)mr_model_identity(s->m));
        return -1;
    }
    if (hd->n_past > s->n_ctx) {
        mr_set_error("%s: the snapshot holds %d positions, the session's context is %d", what, hd->n_past, s->n_ctx);
        return -1;
    }
    uint64_t want = 0;
    if (state_bytes(s, hd->n_past, &want)) return -1;
    if (want != hd->state_bytes) {
        mr_set_error("%s: the snapshot's state is %llu bytes, this model's state at %d positions is %llu", what,
                     (unsigned long long)hd->state_bytes, hd->n_past, (unsigned long long)want);
        return -1;
    }
    if (want_tokens && !hd->has_tokens) { mr_set_error("%s: the snapshot holds no token ids", what); return -1; }
    if (want_tokens && max_tokens < hd->n_past) {
        mr_set_error("%s: the snapshot holds %d token ids, room for %d", what, hd->n_past, max_tokens);
        return -1;
    }
    return 0;
}

size_t mr_session_save_size(mr_session *s, int with_tokens) {
    uint64_t sb = 0;
    if (state_bytes(s, s->n_past, &sb)) return 0;
    return sizeof(snap_header) + (with_tokens ? (size_t)s->n_past * 4 : 0) + (size_t)sb;
}

/* ---- to and from a buffer ---- */

typedef struct { unsigned char *p; size_t left; } mem_cursor;

static int io_mem(mr_state_io *io, void *data, size_t bytes) {
    mem_cursor *c = io->user;
    if (bytes > c->left) { mr_set_error("snapshot: the state is larger than announced"); return -1; }
    if (io->restore) memcpy(data, c->p, bytes);
    else memcpy(c->p, data, bytes);
    c->p += bytes;
    c->left -= bytes;
    return 0;
}

int mr_session_save(mr_session *s, const int32_t *tokens, void *buf, size_t size) {
    uint64_t sb = 0;
    if (state_bytes(s, s->n_past, &sb)) return -1;
    snap_header hd;
    header_fill(&hd, s, tokens != NULL, sb);
    const size_t need = sizeof hd + (size_t)body_bytes(&hd);
    if (size < need) { mr_set_error("snapshot: %zu bytes of room, %zu needed", size, need); return -1; }
    unsigned char *body = (unsigned char *)buf + sizeof hd;
    mem_cursor c = {body, need - sizeof hd};
    if (tokens) { memcpy(c.p, tokens, (size_t)s->n_past * 4); c.p += (size_t)s->n_past * 4; c.left -= (size_t)s->n_past * 4; }
    mr_state_io io = {.restore = 0, .fn = io_mem, .user = &c};
    if (s->m->arch->state_io(s->m, s->st, s->n_past, &io)) return -1;
    if (c.left) { mr_set_error("snapshot: the state is smaller than announced"); return -1; }
    hd.body_hash = body_hash(body, need - sizeof hd);
    header_seal(&hd);
    memcpy(buf, &hd, sizeof hd);
    return 0;
}

int mr_snapshot_peek(const void *buf, size_t size, mr_snapshot_info *info) {
    snap_header hd;
    if (size < sizeof hd) { mr_set_error("snapshot: %zu bytes, shorter than its header", size); return -1; }
    memcpy(&hd, buf, sizeof hd);
    if (header_check(&hd, "snapshot")) return -1;
    memset(info, 0, sizeof *info);
    info->version = (int)hd.version;
    info->n_past = hd.n_past;
    info->has_tokens = (int)hd.has_tokens;
    info->model_id = hd.model_id;
    info->bytes = sizeof hd + body_bytes(&hd);
    return 0;
}

int mr_snapshot_peek_file(const char *path, mr_snapshot_info *info, int32_t **tokens) {
    *tokens = NULL;
    snap_header hd;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { mr_set_error("%s: cannot open: %s", path, strerror(errno)); return -1; }
    int rc = -1;
    struct stat stt;
    ssize_t k = pread(fd, &hd, sizeof hd, 0);
    if (k != (ssize_t)sizeof hd) { mr_set_error("%s: %s", path, k < 0 ? strerror(errno) : "shorter than a snapshot header (truncated)"); goto done; }
    if (header_check(&hd, path)) goto done;
    if (fstat(fd, &stt) || (uint64_t)stt.st_size != sizeof hd + body_bytes(&hd)) {
        mr_set_error("%s: %lld bytes, the header says %llu (truncated or padded)", path, (long long)stt.st_size,
                     (unsigned long long)(sizeof hd + body_bytes(&hd)));
        goto done;
    }
    memset(info, 0, sizeof *info);
    info->version = (int)hd.version;
    info->n_past = hd.n_past;
    info->has_tokens = (int)hd.has_tokens;
    info->model_id = hd.model_id;
    info->bytes = sizeof hd + body_bytes(&hd);
    if (hd.has_tokens && hd.n_past > 0) {
        const size_t nb = (size_t)hd.n_past * 4;
        if (!(*tokens = mr_malloc(nb))) { mr_set_error("%s: out of memory", path); goto done; }
        if (pread(fd, *tokens, nb, sizeof hd) != (ssize_t)nb) {
            mr_set_error("%s: cannot read the token ids", path);
            free(*tokens);
            *tokens = NULL;
            goto done;
        }
    }
    rc = 0;
done:
    close(fd);
    return rc;
}

static void session_clear(mr_session *s) {
    s->m->arch->state_reset(s->m, s->st);
    s->n_past = 0;
}

int mr_session_restore(mr_session *s, const void *buf, size_t size, int32_t *tokens, int max_tokens) {
    snap_header hd;
    session_clear(s);
    if (size < sizeof hd) { mr_set_error("snapshot: %zu bytes, shorter than its header (truncated)", size); return -1; }
    memcpy(&hd, buf, sizeof hd);
    if (header_check(&hd, "snapshot") || header_fits(&hd, s, "snapshot", max_tokens, tokens != NULL)) return -1;
    const uint64_t nb = body_bytes(&hd);
    if (size - sizeof hd != nb) {
        mr_set_error("snapshot: %zu bytes, the header says %llu (truncated or padded)", size, (unsigned long long)(sizeof hd + nb));
        return -1;
    }
    const unsigned char *body = (const unsigned char *)buf + sizeof hd;
    if (body_hash(body, (size_t)nb) != hd.body_hash) { mr_set_error("snapshot: the body is corrupted (checksum)"); return -1; }
    mem_cursor c = {(unsigned char *)body, (size_t)nb};
    if (hd.has_tokens) {
        if (tokens) memcpy(tokens, c.p, (size_t)hd.n_past * 4);
        c.p += (size_t)hd.n_past * 4;
        c.left -= (size_t)hd.n_past * 4;
    }
    mr_state_io io = {.restore = 1, .fn = io_mem, .user = &c};
    if (s->m->arch->state_io(s->m, s->st, hd.n_past, &io) || c.left) {
        if (c.left) mr_set_error("snapshot: the state is smaller than announced");
        session_clear(s);
        return -1;
    }
    s->n_past = hd.n_past;
    return hd.n_past;
}

/* ---- to and from a file, streamed through one SNAP_CHUNK buffer ---- */

typedef struct {
    int fd;
    const char *path;
    unsigned char *buf;
    size_t fill, pos;   /* writer: bytes in buf; reader: bytes in buf and the next one to hand out */
    uint64_t left;      /* reader: body bytes not yet read from the file */
    uint64_t h;
} file_stream;

static int write_all(int fd, const void *p, size_t n, const char *path) {
    const unsigned char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { mr_set_error("%s: cannot write: %s", path, k < 0 ? strerror(errno) : "no progress"); return -1; }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int stream_flush(file_stream *f) {
    if (!f->fill) return 0;
    f->h = mr_hash64(f->buf, f->fill, f->h);
    if (write_all(f->fd, f->buf, f->fill, f->path)) return -1;
    f->fill = 0;
    return 0;
}

static int stream_put(file_stream *f, const void *data, size_t bytes) {
    const unsigned char *p = data;
    while (bytes) {
        size_t k = SNAP_CHUNK - f->fill < bytes ? SNAP_CHUNK - f->fill : bytes;
        memcpy(f->buf + f->fill, p, k);
        f->fill += k; p += k; bytes -= k;
        if (f->fill == SNAP_CHUNK && stream_flush(f)) return -1;
    }
    return 0;
}

static int io_file_put(mr_state_io *io, void *data, size_t bytes) { return stream_put(io->user, data, bytes); }

static int stream_get(file_stream *f, void *data, size_t bytes) {
    unsigned char *p = data;
    while (bytes) {
        if (f->pos == f->fill) {
            const size_t want = f->left < SNAP_CHUNK ? (size_t)f->left : SNAP_CHUNK;
            size_t got = 0;
            while (got < want) {
                ssize_t k = read(f->fd, f->buf + got, want - got);
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0) { mr_set_error("%s: %s", f->path, k < 0 ? strerror(errno) : "the file ends early (truncated)"); return -1; }
                got += (size_t)k;
            }
            if (!want) { mr_set_error("%s: the state is larger than announced", f->path); return -1; }
            f->h = mr_hash64(f->buf, want, f->h);
            f->left -= want;
            f->fill = want;
            f->pos = 0;
        }
        size_t k = f->fill - f->pos < bytes ? f->fill - f->pos : bytes;
        if (p) { memcpy(p, f->buf + f->pos, k); p += k; }
        f->pos += k;
        bytes -= k;
    }
    return 0;
}

static int io_file_get(mr_state_io *io, void *data, size_t bytes) { return stream_get(io->user, data, bytes); }

int mr_session_save_file(mr_session *s, const int32_t *tokens, const char *path) {
    static atomic_uint seq;
    uint64_t sb = 0;
    if (state_bytes(s, s->n_past, &sb)) return -1;
    snap_header hd;
    header_fill(&hd, s, tokens != NULL, sb);
    /* a temporary name in the same directory, renamed when complete: a crash or a full disk never
     * leaves a partial file under `path` */
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.%u.tmp", path, (long)getpid(), atomic_fetch_add(&seq, 1)) >= (int)sizeof tmp) {
        mr_set_error("%s: path too long", path);
        return -1;
    }
    file_stream f = {.fd = -1, .path = tmp};
    int rc = -1;
    if (!(f.buf = mr_malloc(SNAP_CHUNK))) { mr_set_error("%s: out of memory", path); return -1; }
    f.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f.fd < 0) { mr_set_error("%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    if (write_all(f.fd, &hd, sizeof hd, tmp)) goto done;
    if (tokens && stream_put(&f, tokens, (size_t)s->n_past * 4)) goto done;
    mr_state_io io = {.restore = 0, .fn = io_file_put, .user = &f};
    if (s->m->arch->state_io(s->m, s->st, s->n_past, &io) || stream_flush(&f)) goto done;
    hd.body_hash = f.h;
    header_seal(&hd);
    if (pwrite(f.fd, &hd, sizeof hd, 0) != (ssize_t)sizeof hd) { mr_set_error("%s: cannot write the header: %s", tmp, strerror(errno)); goto done; }
    if (fsync(f.fd)) { mr_set_error("%s: cannot sync: %s", tmp, strerror(errno)); goto done; }
    if (close(f.fd)) { f.fd = -1; mr_set_error("%s: cannot close: %s", tmp, strerror(errno)); goto done; }
    f.fd = -1;
    if (rename(tmp, path)) { mr_set_error("%s: cannot rename from %s: %s", path, tmp, strerror(errno)); goto done; }
    rc = 0;
done:
    if (f.fd >= 0) close(f.fd);
    if (rc) unlink(tmp);
    free(f.buf);
    return rc;
}

int mr_session_restore_file(mr_session *s, const char *path, int32_t *tokens, int max_tokens) {
    session_clear(s);
    file_stream f = {.fd = -1, .path = path};
    snap_header hd;
    int rc = -1;
    f.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) { mr_set_error("%s: cannot open: %s", path, strerror(errno)); return -1; }
    struct stat stt;
    ssize_t k = read(f.fd, &hd, sizeof hd);
    if (k != (ssize_t)sizeof hd) {
        mr_set_error("%s: %s", path, k < 0 ? strerror(errno) : "shorter than a snapshot header (truncated)");
        goto done;
    }
    if (header_check(&hd, path) || header_fits(&hd, s, path, max_tokens, tokens != NULL)) goto done;
    if (fstat(f.fd, &stt)) { mr_set_error("%s: %s", path, strerror(errno)); goto done; }
    if ((uint64_t)stt.st_size != sizeof hd + body_bytes(&hd)) {
        mr_set_error("%s: %lld bytes, the header says %llu (truncated or padded)", path, (long long)stt.st_size,
                     (unsigned long long)(sizeof hd + body_bytes(&hd)));
        goto done;
    }
    if (!(f.buf = mr_malloc(SNAP_CHUNK))) { mr_set_error("%s: out of memory", path); goto done; }
    f.left = body_bytes(&hd);
    if (hd.has_tokens && stream_get(&f, tokens, (size_t)hd.n_past * 4)) goto done;
    mr_state_io io = {.restore = 1, .fn = io_file_get, .user = &f};
    if (s->m->arch->state_io(s->m, s->st, hd.n_past, &io)) goto done;
    if (f.left || f.pos != f.fill) { mr_set_error("%s: the state is smaller than announced", path); goto done; }
    if (f.h != hd.body_hash) { mr_set_error("%s: the snapshot body is corrupted (checksum)", path); goto done; }
    s->n_past = hd.n_past;
    rc = hd.n_past;
done:
    if (rc < 0) session_clear(s);
    close(f.fd);
    free(f.buf);
    return rc;
}
