/* Expert pager (see pager.h): a slot arena under a byte budget, the replacement policy of
 * policy.c, and a pool of I/O threads doing pread (O_DIRECT where possible) into the slots.
 *
 * Threads: every mr_pager_* call comes from one thread (the model's); the I/O threads only read into
 * slots and update the slots' load state under p->mu. The cache directory (mr_cache) is touched only
 * by the calling thread. A slot being read is pinned by its batch; if a batch is released before its
 * reads finish, the slot is waited for before it is reused. */
#include "pager/pager.h"
#include "pager/policy.h"
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ull
#define TRACE_CAP (1ll << 22) /* recorded accesses for the Belady comparison (16 MiB; ~64 MiB to evaluate) */

enum { SLOT_EMPTY = 0, SLOT_LOADING, SLOT_READY, SLOT_ERROR };
enum { B_QUEUED = 0, B_PINNED, B_SERVED, B_DONE };
enum { FAULT_NONE = 0, FAULT_EIO, FAULT_SHORT };

typedef struct {
    int state, pending, layer, expert;
    int by_hint; /* read because of a hint, not used since */
    uint64_t bytes; /* bytes its read transfers (whole pages with O_DIRECT) */
    uint64_t delta[MR_PAGER_MATS]; /* data offset inside the mat's area (O_DIRECT alignment) */
    char err[320];
} slot_io;

/* One read: [off, off + len) of the file into dst. A slice is read as one job or, with chunking, as
 * several page-aligned pieces that complete into the same slot (the slot's pending count). With
 * O_DIRECT the pieces cover the whole pages around the slice; the last one may end past EOF, so a
 * piece is complete when its first `need` bytes arrived. */
typedef struct {
    int slot, fd, dfd;          /* dfd: O_DIRECT descriptor or -1 (then off/len/dst are the slice's own) */
    uint64_t off, len, need;
    uint8_t *dst;
    uint64_t slice_off, slice_len; /* the whole slice, for error messages */
    const char *name, *path;
    int expert;
} io_job;

/* a FIFO of read jobs (a ring with room for every job of every slot) */
typedef struct {
    io_job *j;
    int cap, head, len;
} jobq;

typedef struct {
    int active, n, cap;
    int *ids, *slot;
    unsigned char *st;
} batch;

struct mr_pager {
    const mr_gguf *g;
    int n_layers, paging, e_max, floor_slots;
    mr_pager_layer *layers;
    uint64_t mat_off[MR_PAGER_MATS], slot_bytes;
    int n_slots;
    uint8_t *arena;
    int arena_mapped, arena_huge; /* mr_big_alloc'ed (pre-faulted), with transparent huge pages */
    int n_shards, *dfd, any_direct;
    mr_cache *cache;
    slot_io *sl;
    batch *b;
    int last_layer;
    /* I/O */
    pthread_t *th;
    int n_io, n_th, stop;
    uint64_t chunk;        /* bytes per read job (a multiple of PAGE); 0 = one job per slice */
    int in_flight;         /* jobs being read (for the I/O busy time) */
    double busy_t0;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    int mu_init;
    /* demanded reads, and reads of guesses: a guess job starts only while no demanded job is queued or
     * in flight, at most GUESS_IN_FLIGHT at once, so a demanded read never queues behind a guess */
    jobq dq, gq;
    int demand_busy, guess_busy;
    int fault_kind;
    uint64_t fault_at, read_seq;
    int slow_ms;              /* fault slow:MS */
    mr_pager_convert_fn conv; /* mr_pager_set_convert: run on each expert's slices once read */
    void *conv_ctx;
    uint64_t conv_max;        /* bytes of the largest slice (each converting I/O thread's staging) */
    /* statistics */
    mr_pager_counters cnt;
    uint64_t *l_hits, *l_miss;
    int32_t *trace;
    int64_t n_trace, cap_trace;
    int trace_trunc;
    /* hints (mr_pager_hint): hinted[key] = 1 from the hint's read until the key's layer is prefetched;
     * soon = the same array, given to the policy so hinted experts are evicted last */
    int guess;                /* read ahead on guesses (mr_pager_params.no_guess off) */
    int guess_keep;           /* guesses per hint (the first ones, most likely first), set by the waste */
    double waste_ema;         /* share of a decode eval's bytes read for guesses never used (running) */
    uint8_t *hinted;
    int **hint_keys, *n_hint; /* per layer: the keys hinted for its next batch */
    /* the evaluation in progress (mr_pager_eval_begin): decode or not, its start and counters then */
    int ev_decode;
    double ev_t0;
    uint64_t ev_miss0, ev_read0;
    double ev_busy0;
};

/* guess jobs in flight at once; the waste share decode aims under (guesses per hint shrink above
 * GUESS_WASTE_HIGH and grow back below GUESS_WASTE_LOW) */
#define GUESS_IN_FLIGHT 2
#define GUESS_WASTE_HIGH 0.04
#define GUESS_WASTE_LOW 0.02
#define GUESS_KEEP_MAX 64

static void jobq_push(jobq *q, const io_job *j) { q->j[(q->head + q->len++) % q->cap] = *j; }
static io_job jobq_pop(jobq *q) {
    io_job j = q->j[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return j;
}
/* remove slot s's jobs from q, appending them to `to` (NULL: drop them); returns how many */
static int jobq_take_slot(jobq *q, int s, jobq *to) {
    int kept = 0, moved = 0;
    for (int i = 0; i < q->len; i++) {
        io_job j = q->j[(q->head + i) % q->cap];
        if (j.slot == s) {
            if (to) jobq_push(to, &j);
            moved++;
            continue;
        }
        q->j[(q->head + kept) % q->cap] = j;
        kept++;
    }
    q->len = kept;
    return moved;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int n_experts_of(const mr_pager_layer *l) {
    for (int m = 0; m < MR_PAGER_MATS; m++)
        if (l->mat[m]) return (int)l->mat[m]->ne[2];
    return 0;
}

/* checks the layers; per-mat area sizes (max over layers and experts of the aligned read) */
static int layout(const mr_gguf *g, const mr_pager_layer *layers, int n_layers, uint64_t area[MR_PAGER_MATS],
                  int *e_max) {
    memset(area, 0, sizeof(uint64_t) * MR_PAGER_MATS);
    *e_max = 0;
    for (int l = 0; l < n_layers; l++) {
        const mr_pager_layer *pl = &layers[l];
        int E = n_experts_of(pl);
        if (!E && !pl->mat[0] && !pl->mat[1] && !pl->mat[2]) continue;
        for (int m = 0; m < MR_PAGER_MATS; m++) {
            const mr_gguf_tensor *t = pl->mat[m];
            if (!t) continue;
            if (t->ne[2] != E || E < 1 || E > 65536 || t->nbytes % (uint64_t)E) {
                mr_set_error("pager: %s: %lld experts / %llu bytes do not match the layer's %d experts", t->name,
                             (long long)t->ne[2], (unsigned long long)t->nbytes, E);
                return -1;
            }
            if (g && (t->shard < 0 || t->shard >= mr_gguf_n_shards(g) ||
                      t->file_offset + t->nbytes > mr_gguf_shard_size(g, t->shard))) {
                mr_set_error("pager: %s lies outside its file", t->name);
                return -1;
            }
            uint64_t slice = t->nbytes / (uint64_t)E;
            for (int e = 0; e < E; e++) {
                uint64_t off = t->file_offset + slice * (uint64_t)e;
                uint64_t need = align_up(off % PAGE + slice, PAGE);
                if (need > area[m]) area[m] = need;
            }
        }
        if (E > *e_max) *e_max = E;
    }
    return 0;
}

uint64_t mr_pager_slot_bytes(const mr_gguf *g, const mr_pager_layer *layers, int n_layers) {
    uint64_t area[MR_PAGER_MATS];
    int e_max;
    if (layout(g, layers, n_layers, area, &e_max)) return 0;
    return area[0] + area[1] + area[2];
}

uint64_t mr_pager_expert_bytes(const mr_pager_layer *layers, int n_layers) {
    uint64_t s = 0;
    for (int l = 0; l < n_layers; l++)
        for (int m = 0; m < MR_PAGER_MATS; m++)
            if (layers[l].mat[m]) s += layers[l].mat[m]->nbytes;
    return s;
}

/* experts used per token: the layers' n_used, else ARCH.expert_used_count, else 1 */
static int floor_slots(const mr_gguf *g, const mr_pager_layer *layers, int n_layers) {
    int k = 0;
    for (int l = 0; l < n_layers; l++)
        if (layers[l].n_used > k && n_experts_of(&layers[l])) k = layers[l].n_used;
    if (k == 0 && g) {
        const char *arch = NULL;
        uint32_t v = 0;
        char key[128];
        const mr_gguf_kv *kv = mr_gguf_find_kv(g, "general.architecture");
        if (kv && kv->type == MR_GGUF_STRING) arch = kv->v.str;
        if (arch) {
            snprintf(key, sizeof key, "%s.expert_used_count", arch);
            if (mr_gguf_find_kv(g, key) && mr_gguf_get_u32(g, key, &v) == 0) k = (int)v;
        }
    }
    return k < 1 ? 1 : k;
}

uint64_t mr_pager_min_budget(const mr_gguf *g, const mr_pager_layer *layers, int n_layers) {
    return mr_pager_slot_bytes(g, layers, n_layers) * (uint64_t)floor_slots(g, layers, n_layers);
}

static void fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.1f MiB", (double)b / (1ull << 20));
    else snprintf(buf, n, "%.1f KiB", (double)b / 1024);
}

/* ---- I/O threads ---- */
/* pread until len bytes or EOF; returns 0 or errno, *got = bytes read */
static int read_full(int fd, uint8_t *dst, uint64_t len, uint64_t off, uint64_t *got) {
    *got = 0;
    while (*got < len) {
        ssize_t r = pread(fd, dst + *got, (size_t)(len - *got), (off_t)(off + *got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (r == 0) break;
        *got += (uint64_t)r;
    }
    return 0;
}

/* one job: returns 0 or errno; *ok = the job's bytes are all in place; *bytes = bytes transferred */
static int run_job(const io_job *j, int fault, int *ok, uint64_t *bytes) {
    uint64_t got = 0;
    int err = 0;
    *ok = 0;
    *bytes = 0;
    if (fault == FAULT_EIO) return EIO;
    if (fault == FAULT_SHORT) { /* half the bytes, and the job counts as short whatever it needed */
        err = read_full(j->fd, j->dst, j->len / 2, j->off, &got);
        *bytes = got;
        return err;
    }
    if (j->dfd >= 0) {
        err = read_full(j->dfd, j->dst, j->len, j->off, &got);
        *bytes = got;
        if (!err) { *ok = got >= j->need; return 0; }
        if (err != EINVAL) return err;
        /* the file system refused O_DIRECT for this read: read the same range buffered */
    }
    err = read_full(j->fd, j->dst, j->len, j->off, &got);
    *bytes += got;
    *ok = !err && got >= j->need;
    return err;
}

/* mr_pager_set_convert's conversion of slot s's slices (its reads all done); 0 or -1 with the
 * message in err. *staging: this thread's room, allocated at its first use. */
static int convert_slot(mr_pager *p, int s, uint8_t **staging, char *err, size_t n_err) {
    const slot_io *io = &p->sl[s];
    if (!*staging && !(*staging = mr_malloc((size_t)p->conv_max))) {
        snprintf(err, n_err, "pager: out of memory converting expert %d of layer %d", io->expert, io->layer);
        return -1;
    }
    uint8_t *base = p->arena + (size_t)s * p->slot_bytes;
    for (int m = 0; m < MR_PAGER_MATS; m++)
        if (p->layers[io->layer].mat[m] && p->conv(p->conv_ctx, io->layer, m, base + p->mat_off[m] + io->delta[m], *staging)) {
            snprintf(err, n_err, "pager: expert %d of layer %d: %s", io->expert, io->layer, mr_get_error());
            return -1;
        }
    return 0;
}

int mr_pager_set_convert(mr_pager *p, mr_pager_convert_fn fn, void *ctx) {
    if (!p->paging) return 0;
    p->conv_max = 0;
    for (int l = 0; l < p->n_layers; l++)
        for (int m = 0; m < MR_PAGER_MATS; m++) {
            const mr_gguf_tensor *t = p->layers[l].mat[m];
            const uint64_t slice = t ? t->nbytes / (uint64_t)t->ne[2] : 0;
            if (slice > p->conv_max) p->conv_max = slice;
        }
    pthread_mutex_lock(&p->mu);
    p->conv = fn;
    p->conv_ctx = ctx;
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static void *io_main(void *arg) {
    mr_pager *p = arg;
    uint8_t *staging = NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int can_guess;
        while (!(can_guess = p->gq.len > 0 && p->dq.len == 0 && p->demand_busy == 0 && p->guess_busy < GUESS_IN_FLIGHT) &&
               !p->stop && p->dq.len == 0)
            pthread_cond_wait(&p->cv_job, &p->mu);
        if (p->dq.len == 0 && !can_guess) break; /* stopping */
        int guess = p->dq.len == 0;
        io_job j = jobq_pop(guess ? &p->gq : &p->dq);
        if (guess) p->guess_busy++;
        else p->demand_busy++;
        uint64_t seq = ++p->read_seq;
        int fault = p->fault_kind != FAULT_NONE && seq == p->fault_at ? p->fault_kind : FAULT_NONE;
        if (p->in_flight++ == 0) p->busy_t0 = mr_now();
        pthread_mutex_unlock(&p->mu);

        int ok;
        uint64_t bytes;
        if (p->slow_ms) { /* fault slow:MS: a slow device, the bytes stay right */
            struct timespec ts = {p->slow_ms / 1000, (long)(p->slow_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        int err = run_job(&j, fault, &ok, &bytes);

        pthread_mutex_lock(&p->mu);
        if (--p->in_flight == 0) p->cnt.io_busy_s += mr_now() - p->busy_t0;
        if (guess) p->guess_busy--;
        else p->demand_busy--;
        if (p->gq.len > 0) pthread_cond_broadcast(&p->cv_job); /* the device may be free for guesses now */
        slot_io *s = &p->sl[j.slot];
        p->cnt.reads++;
        p->cnt.bytes_read += bytes;
        if (!ok) {
            if (s->state != SLOT_ERROR) {
                if (err)
                    snprintf(s->err, sizeof s->err, "pager: reading expert %d of %s (%llu bytes at offset %llu of %s) failed: %s",
                             j.expert, j.name, (unsigned long long)j.slice_len, (unsigned long long)j.slice_off, j.path, strerror(err));
                else
                    snprintf(s->err, sizeof s->err, "pager: short read of expert %d of %s (%llu bytes at offset %llu of %s)",
                             j.expert, j.name, (unsigned long long)j.slice_len, (unsigned long long)j.slice_off, j.path);
            }
            s->state = SLOT_ERROR;
        }
        if (s->pending == 1 && s->state == SLOT_LOADING && p->conv) { /* the expert's last read: convert it */
            char cerr[sizeof s->err];
            pthread_mutex_unlock(&p->mu);
            const int crc = convert_slot(p, j.slot, &staging, cerr, sizeof cerr);
            pthread_mutex_lock(&p->mu);
            if (crc) { memcpy(s->err, cerr, sizeof s->err); s->state = SLOT_ERROR; }
        }
        if (--s->pending == 0 && s->state == SLOT_LOADING) s->state = SLOT_READY;
        pthread_cond_broadcast(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    free(staging);
    return NULL;
}

/* ---- create / free ---- */
static int parse_fault(mr_pager *p, const char *f) {
    if (!f || !*f) return 0;
    const char *colon = strchr(f, ':');
    char *end = NULL;
    unsigned long long n = colon ? strtoull(colon + 1, &end, 10) : 0;
    if (colon && n >= 1 && end && !*end) {
        if (!strncmp(f, "eio:", 4)) { p->fault_kind = FAULT_EIO; p->fault_at = n; return 0; }
        if (!strncmp(f, "short:", 6)) { p->fault_kind = FAULT_SHORT; p->fault_at = n; return 0; }
        if (!strncmp(f, "slow:", 5) && n <= 10000) { p->slow_ms = (int)n; return 0; }
    }
    mr_set_error("pager fault '%s': expected eio:N or short:N (N >= 1: the N-th read fails) "
                 "or slow:MS (every read waits MS milliseconds first, MS <= 10000)", f);
    return -1;
}

/* I/O settings (mr_pager_params; zero fields = defaults). The job queue has room for every job of
 * every slot (about 80 bytes per chunk), so very small chunks cost memory: 4K exists for the tests. */
static int io_settings(mr_pager *p, const mr_pager_params *pp) {
    p->n_io = pp->io_threads ? pp->io_threads : MR_PAGER_IO_THREADS;
    if (p->n_io < 1 || p->n_io > MR_PAGER_MAX_IO_THREADS) {
        mr_set_error("pager: %d I/O threads: expected 1..%d", pp->io_threads, MR_PAGER_MAX_IO_THREADS);
        return -1;
    }
    if (pp->chunk > (int64_t)MR_PAGER_MAX_CHUNK) {
        mr_set_error("pager: read chunk of %lld bytes: at most %llu", (long long)pp->chunk,
                     (unsigned long long)MR_PAGER_MAX_CHUNK);
        return -1;
    }
    p->chunk = pp->chunk < 0 ? 0 : pp->chunk == 0 ? MR_PAGER_CHUNK : align_up((uint64_t)pp->chunk, PAGE);
    p->guess = !pp->no_guess;
    p->guess_keep = GUESS_KEEP_MAX; /* the waste of decode evals lowers it */
    return 0;
}

/* read jobs one slice of `bytes` (page-aligned area) takes */
static uint64_t jobs_for(const mr_pager *p, uint64_t bytes) {
    return p->chunk ? (bytes + p->chunk - 1) / p->chunk : 1;
}

mr_pager *mr_pager_create(const mr_gguf *g, const mr_pager_layer *layers, int n_layers, uint64_t budget_bytes,
                          const mr_pager_params *pp) {
    static const mr_pager_params defaults;
    if (!pp) pp = &defaults;
    if (n_layers < 0 || (n_layers > 0 && !layers)) { mr_set_error("pager: bad layer list"); return NULL; }
    mr_pager *p = mr_calloc(1, sizeof *p);
    if (!p) { mr_set_error("pager: out of memory"); return NULL; }
    p->g = g;
    p->n_layers = n_layers;
    p->last_layer = INT_MAX;
    p->layers = mr_calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *p->layers);
    p->b = mr_calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *p->b);
    if (!p->layers || !p->b) goto oom;
    for (int i = 0; i < n_layers; i++) p->layers[i] = layers[i];
    uint64_t area[MR_PAGER_MATS];
    if (layout(g, layers, n_layers, area, &p->e_max)) goto fail;
    if (budget_bytes == 0 || p->e_max == 0) return p; /* no paging: serve from the mmap */

    p->paging = 1;
    p->floor_slots = floor_slots(g, layers, n_layers);
    p->mat_off[0] = 0;
    p->mat_off[1] = area[0];
    p->mat_off[2] = area[0] + area[1];
    p->slot_bytes = area[0] + area[1] + area[2];
    uint64_t slots = budget_bytes / p->slot_bytes, n_keys = 0;
    for (int l = 0; l < n_layers; l++) n_keys += (uint64_t)n_experts_of(&layers[l]);
    if (slots < (uint64_t)p->floor_slots) {
        char need[32], have[32], slot[32];
        fmt_bytes(need, sizeof need, p->slot_bytes * (uint64_t)p->floor_slots);
        fmt_bytes(have, sizeof have, budget_bytes);
        fmt_bytes(slot, sizeof slot, p->slot_bytes);
        mr_set_error("pager: RAM budget %s is below the minimum %s (%llu bytes): %d expert slots of %s are needed "
                     "(the experts one token uses in one layer), the budget holds %llu",
                     have, need, (unsigned long long)(p->slot_bytes * (uint64_t)p->floor_slots), p->floor_slots, slot,
                     (unsigned long long)slots);
        goto fail;
    }
    if (slots > n_keys) slots = n_keys;
    p->n_slots = (int)slots;
    if (parse_fault(p, pp->fault) || io_settings(p, pp)) goto fail;

    int policy = pp->policy && *pp->policy ? mr_cache_policy_from_name(pp->policy) : MR_POLICY_DEFAULT;
    if (policy < 0) goto fail;
    p->cache = mr_cache_create(policy, n_layers, p->e_max, p->n_slots);
    if (!p->cache) goto fail;
    /* the arena: its own mapping, on transparent huge pages where the kernel has them, faulted in
     * now — 4 KiB faults while reading cost millions of faults and more system time than the
     * decode's own compute (no_huge: plain pages faulted on first use) */
    if (pp->no_huge) p->arena = mr_aligned_alloc(PAGE, (size_t)(p->slot_bytes * (uint64_t)p->n_slots));
    else {
        p->arena = mr_big_alloc((size_t)(p->slot_bytes * (uint64_t)p->n_slots),
                                MR_BIG_PREFAULT | (pp->huge ? 0 : MR_BIG_NO_HUGE), &p->arena_huge);
        p->arena_mapped = 1;
    }
    p->sl = mr_calloc((size_t)p->n_slots, sizeof *p->sl);
    uint64_t jobs = 0;
    for (int m = 0; m < MR_PAGER_MATS; m++) jobs += area[m] ? jobs_for(p, area[m]) : 0;
    p->dq.cap = p->gq.cap = (int)jobs * p->n_slots;
    p->dq.j = mr_malloc(sizeof(io_job) * (size_t)p->dq.cap);
    p->gq.j = mr_malloc(sizeof(io_job) * (size_t)p->gq.cap);
    p->l_hits = mr_calloc((size_t)n_layers, sizeof(uint64_t));
    p->l_miss = mr_calloc((size_t)n_layers, sizeof(uint64_t));
    if (!p->arena || !p->sl || !p->dq.j || !p->gq.j || !p->l_hits || !p->l_miss) goto oom;
    p->hinted = mr_calloc((size_t)n_layers * (size_t)p->e_max, 1);
    p->hint_keys = mr_calloc((size_t)n_layers, sizeof *p->hint_keys);
    p->n_hint = mr_calloc((size_t)n_layers, sizeof *p->n_hint);
    if (!p->hinted || !p->hint_keys || !p->n_hint) goto oom;
    mr_cache_set_hint(p->cache, p->hinted);

    /* descriptors: the reader's buffered fd, plus an O_DIRECT one per shard when the FS allows */
    p->n_shards = mr_gguf_n_shards(g);
    p->dfd = mr_malloc(sizeof(int) * (size_t)(p->n_shards > 0 ? p->n_shards : 1));
    if (!p->dfd) goto oom;
    for (int s = 0; s < p->n_shards; s++) {
        p->dfd[s] = -1;
        if (mr_gguf_shard_fd(g, s) < 0) {
            mr_set_error("pager: %s has no file descriptor (paging needs a file on disk)", mr_gguf_shard_path(g, s));
            goto fail;
        }
        if (pp->no_direct) continue;
        p->dfd[s] = open(mr_gguf_shard_path(g, s), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (p->dfd[s] >= 0) p->any_direct = 1;
    }

    if (pthread_mutex_init(&p->mu, NULL)) goto oom;
    if (pthread_cond_init(&p->cv_job, NULL)) { pthread_mutex_destroy(&p->mu); goto oom; }
    if (pthread_cond_init(&p->cv_done, NULL)) { pthread_cond_destroy(&p->cv_job); pthread_mutex_destroy(&p->mu); goto oom; }
    p->mu_init = 1;
    p->th = mr_calloc((size_t)p->n_io, sizeof *p->th);
    if (!p->th) goto oom;
    for (int i = 0; i < p->n_io; i++) {
        if (pthread_create(&p->th[i], NULL, io_main, p)) {
            mr_set_error("pager: cannot start I/O thread: %s", strerror(errno));
            goto fail;
        }
        p->n_th++;
    }
    char b1[32], b2[32];
    fmt_bytes(b1, sizeof b1, p->slot_bytes * (uint64_t)p->n_slots);
    fmt_bytes(b2, sizeof b2, p->slot_bytes);
    mr_log(2, "pager: %d slots of %s (%s, %s), policy %s, %s reads, %d I/O threads, %s\n", p->n_slots, b2, b1,
           p->arena_huge ? "huge pages, pre-faulted" : p->arena_mapped ? "pre-faulted" : "4 KiB pages",
           mr_cache_policy_name(policy), p->any_direct ? "O_DIRECT" : "buffered", p->n_io,
           p->chunk ? "chunked reads" : "one read per slice");
    return p;
oom:
    mr_set_error("pager: out of memory");
fail:
    mr_pager_free(p);
    return NULL;
}

void mr_pager_free(mr_pager *p) {
    if (!p) return;
    if (p->mu_init) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->cv_job);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_th; i++) pthread_join(p->th[i], NULL);
        pthread_cond_destroy(&p->cv_job);
        pthread_cond_destroy(&p->cv_done);
        pthread_mutex_destroy(&p->mu);
    }
    if (p->dfd)
        for (int s = 0; s < p->n_shards; s++)
            if (p->dfd[s] >= 0) close(p->dfd[s]);
    free(p->dfd);
    if (p->b)
        for (int l = 0; l < p->n_layers; l++) { free(p->b[l].ids); free(p->b[l].slot); free(p->b[l].st); }
    free(p->b);
    mr_cache_free(p->cache);
    if (p->arena_mapped) mr_big_free(p->arena, (size_t)(p->slot_bytes * (uint64_t)p->n_slots));
    else mr_aligned_free(p->arena);
    free(p->th);
    if (p->hint_keys)
        for (int l = 0; l < p->n_layers; l++) free(p->hint_keys[l]);
    free(p->hint_keys); free(p->n_hint); free(p->hinted);
    free(p->sl); free(p->dq.j); free(p->gq.j); free(p->l_hits); free(p->l_miss); free(p->trace);
    free(p->layers);
    free(p);
}

int mr_pager_paging(const mr_pager *p) { return p->paging; }
int mr_pager_cached(const mr_pager *p, int layer, int e) {
    if (!p->paging) return 1;
    if (layer < 0 || layer >= p->n_layers || e < 0 || e >= n_experts_of(&p->layers[layer])) return 0;
    return mr_cache_find(p->cache, layer * p->e_max + e) >= 0;
}
/* with few slots a guess evicts experts that are still wanted: only from 4 tokens' worth of a layer up */
int mr_pager_guessing(const mr_pager *p) { return p->paging && p->guess && p->n_slots >= 4 * p->floor_slots; }
int mr_pager_n_slots(const mr_pager *p) { return p->n_slots; }
int mr_pager_uses_direct_io(const mr_pager *p) { return p->any_direct; }
int mr_pager_huge_pages(const mr_pager *p) { return p->arena_huge; }

/* ---- slots ---- */
/* queue the reads of expert e of layer into slot s: demanded, or a guess (low priority) */
static void start_load(mr_pager *p, int s, int layer, int e, int guess) {
    const mr_pager_layer *pl = &p->layers[layer];
    slot_io *io = &p->sl[s];
    uint8_t *base = p->arena + (size_t)s * p->slot_bytes;
    pthread_mutex_lock(&p->mu);
    io->state = SLOT_LOADING;
    io->layer = layer;
    io->expert = e;
    io->pending = 0;
    io->bytes = 0;
    io->err[0] = 0;
    for (int m = 0; m < MR_PAGER_MATS; m++) {
        const mr_gguf_tensor *t = pl->mat[m];
        if (!t) continue;
        uint64_t slice = t->nbytes / (uint64_t)t->ne[2], off = t->file_offset + slice * (uint64_t)e;
        int dfd = p->dfd[t->shard];
        /* O_DIRECT: the whole pages around the slice, the data pointer lands at the in-page offset */
        uint64_t delta = dfd >= 0 ? off % PAGE : 0, a0 = off - delta;
        uint64_t alen = dfd >= 0 ? align_up(delta + slice, PAGE) : slice, step = p->chunk ? p->chunk : alen;
        io->delta[m] = delta;
        io->bytes += alen;
        for (uint64_t pos = 0; pos < alen; pos += step) {
            uint64_t len = alen - pos < step ? alen - pos : step, end = delta + slice;
            io_job j = {.slot = s, .fd = mr_gguf_shard_fd(p->g, t->shard), .dfd = dfd, .off = a0 + pos, .len = len,
                        .need = end >= pos + len ? len : end - pos, .dst = base + p->mat_off[m] + pos,
                        .slice_off = off, .slice_len = slice, .name = t->name,
                        .path = mr_gguf_shard_path(p->g, t->shard), .expert = e};
            jobq_push(guess ? &p->gq : &p->dq, &j);
            io->pending++;
        }
    }
    if (io->pending == 0) io->state = SLOT_READY;
    pthread_cond_broadcast(&p->cv_job);
    pthread_mutex_unlock(&p->mu);
}


/* wait until no read into slot s is in flight (a failed slice may finish before its siblings);
 * returns its state */
static int wait_slot(mr_pager *p, int s) {
    pthread_mutex_lock(&p->mu);
    if (p->sl[s].pending > 0) {
        double t0 = mr_now();
        while (p->sl[s].pending > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        p->cnt.stall_s += mr_now() - t0;
    }
    int st = p->sl[s].state;
    pthread_mutex_unlock(&p->mu);
    return st;
}

/* state of a resident slot for a hit: SLOT_ERROR only if a read into it has already failed
 * (reads still in flight without a failure count as loading, no wait) */
static int wait_state(mr_pager *p, int s) {
    pthread_mutex_lock(&p->mu);
    int st = p->sl[s].state;
    pthread_mutex_unlock(&p->mu);
    if (st == SLOT_ERROR) wait_slot(p, s); /* let its other slices finish before re-reading */
    return st;
}

static void record(mr_pager *p, int layer, int key, int hit) {
    if (hit) { p->cnt.hits++; p->l_hits[layer]++; }
    else { p->cnt.misses++; p->l_miss[layer]++; }
    if (p->n_trace == p->cap_trace) {
        if (p->cap_trace >= TRACE_CAP) { p->trace_trunc = 1; return; }
        int64_t cap = p->cap_trace ? 2 * p->cap_trace : 4096;
        int32_t *t = mr_realloc(p->trace, sizeof(int32_t) * (size_t)cap);
        if (!t) { p->trace_trunc = 1; return; }
        p->trace = t;
        p->cap_trace = cap;
    }
    p->trace[p->n_trace++] = key;
}

/* give batch entry i of layer a pinned slot (reading it if missing). -1 if every slot is pinned. */
static int acquire(mr_pager *p, int layer, int i) {
    batch *b = &p->b[layer];
    int e = b->ids[i], key = layer * p->e_max + e, hit, ev;
    int s = mr_cache_access(p->cache, key, &hit, &ev);
    if (s < 0) return -1;
    if (hit && wait_state(p, s) == SLOT_ERROR) hit = 0; /* an earlier read of it failed: read again */
    if (hit && p->sl[s].by_hint) { /* read ahead by a hint: a miss whose read started early */
        p->sl[s].by_hint = 0;
        pthread_mutex_lock(&p->mu); /* demanded now: its reads not yet started go first */
        if (jobq_take_slot(&p->gq, s, &p->dq)) pthread_cond_broadcast(&p->cv_job);
        pthread_mutex_unlock(&p->mu);
        p->cnt.hint_used++;
        p->cnt.miss_bytes += p->sl[s].bytes;
        record(p, layer, key, 0);
    } else record(p, layer, key, hit);
    if (!hit) {
        wait_slot(p, s); /* a released batch may still be reading into it */
        if (p->sl[s].by_hint) p->cnt.hint_wasted++; /* a guess evicted before its layer came */
        p->sl[s].by_hint = 0;
        start_load(p, s, layer, e, 0);
        p->cnt.miss_bytes += p->sl[s].bytes;
    }
    b->slot[i] = s;
    b->st[i] = B_PINNED;
    return 0;
}

/* start reads for queued entries while slots can be had */
static void fill(mr_pager *p, int layer) {
    batch *b = &p->b[layer];
    for (int i = 0; i < b->n; i++)
        if (b->st[i] == B_QUEUED && acquire(p, layer, i)) break;
}

static void unpin(mr_pager *p, batch *b, int i) {
    if (b->st[i] == B_PINNED || b->st[i] == B_SERVED) mr_cache_unpin(p->cache, b->slot[i]);
    b->st[i] = B_DONE;
}

static int check_layer(const mr_pager *p, int layer) {
    if (layer < 0 || layer >= p->n_layers || !n_experts_of(&p->layers[layer])) {
        mr_set_error("pager: layer %d has no routed experts", layer);
        return -1;
    }
    return 0;
}

static void mmap_ptrs(const mr_pager *p, int layer, int id, const void *ptrs[MR_PAGER_MATS]) {
    for (int m = 0; m < MR_PAGER_MATS; m++) {
        const mr_gguf_tensor *t = p->layers[layer].mat[m];
        ptrs[m] = t ? (const uint8_t *)t->data + t->nbytes / (uint64_t)t->ne[2] * (uint64_t)id : NULL;
    }
}

static void slot_ptrs(const mr_pager *p, int layer, int s, const void *ptrs[MR_PAGER_MATS]) {
    const uint8_t *base = p->arena + (size_t)s * p->slot_bytes;
    for (int m = 0; m < MR_PAGER_MATS; m++)
        ptrs[m] = p->layers[layer].mat[m] ? base + p->mat_off[m] + p->sl[s].delta[m] : NULL;
}

/* ---- the calls the model makes ---- */
static int batch_reserve(batch *b, int n) {
    if (n <= b->cap) return 0;
    int cap = n < 16 ? 16 : n;
    int *ids = mr_realloc(b->ids, sizeof(int) * (size_t)cap);
    if (ids) b->ids = ids;
    int *slot = mr_realloc(b->slot, sizeof(int) * (size_t)cap);
    if (slot) b->slot = slot;
    unsigned char *st = mr_realloc(b->st, (size_t)cap);
    if (st) b->st = st;
    if (!ids || !slot || !st) { mr_set_error("pager: out of memory"); return -1; }
    b->cap = cap;
    return 0;
}

/* drop the queued (not started) guess jobs of slot s; returns how many */
static int cancel_queued(mr_pager *p, int s) {
    int dropped = jobq_take_slot(&p->gq, s, NULL);
    p->sl[s].pending -= dropped;
    return dropped;
}

/* The real batch of `layer` is known: hinted experts it does not use lose their protection, and those
 * whose reads have not started are cancelled (their slots emptied), so the batch's own reads are not
 * queued behind wrong guesses. */
static void settle_hints(mr_pager *p, int layer, const int *ids, int n) {
    for (int k = 0; k < p->n_hint[layer]; k++) {
        int key = p->hint_keys[layer][k], e = key - layer * p->e_max, used = 0;
        p->hinted[key] = 0;
        for (int i = 0; i < n && !used; i++) used = ids[i] == e;
        int s = mr_cache_find(p->cache, key);
        if (used || s < 0 || !p->sl[s].by_hint || mr_cache_pinned(p->cache, s)) continue;
        pthread_mutex_lock(&p->mu);
        int started = p->sl[s].state == SLOT_LOADING && cancel_queued(p, s) > 0;
        if (started) { /* its remaining jobs were dropped: the slot holds a partial expert */
            p->sl[s].state = SLOT_EMPTY;
            p->cnt.hint_cancelled++;
        }
        pthread_mutex_unlock(&p->mu);
        if (started) mr_cache_invalidate(p->cache, s);
        else p->cnt.hint_wasted++;
        p->sl[s].by_hint = 0;
    }
    p->n_hint[layer] = 0;
}

int mr_pager_hint(mr_pager *p, int layer, const int *ids, int n) {
    if (!p->paging || n <= 0) return 0;
    if (check_layer(p, layer)) return -1;
    int E = n_experts_of(&p->layers[layer]);
    if (p->n_hint[layer] > 0) settle_hints(p, layer, NULL, 0); /* an older hint never followed */
    if (!p->hint_keys[layer] && !(p->hint_keys[layer] = mr_malloc(sizeof(int) * (size_t)E))) {
        mr_set_error("pager: out of memory");
        return -1;
    }
    for (int i = 0; i < n && i < p->guess_keep && p->n_hint[layer] < E; i++) {
        if (ids[i] < 0 || ids[i] >= E) { mr_set_error("pager: expert %d out of range [0, %d) in layer %d", ids[i], E, layer); return -1; }
        int key = layer * p->e_max + ids[i], hit, ev;
        if (p->hinted[key] || mr_cache_find(p->cache, key) >= 0) continue; /* resident or already coming */
        int s = mr_cache_reserve(p->cache, key, &hit, &ev);
        if (s < 0) return 0; /* every slot pinned: nothing to read ahead into */
        wait_slot(p, s);     /* a released batch may still be reading into it */
        if (p->sl[s].by_hint) p->cnt.hint_wasted++;
        start_load(p, s, layer, ids[i], 1);
        p->sl[s].by_hint = 1;
        mr_cache_unpin(p->cache, s);
        p->hinted[key] = 1;
        p->hint_keys[layer][p->n_hint[layer]++] = key;
        p->cnt.hint_reads++;
    }
    return 0;
}

int mr_pager_prefetch(mr_pager *p, int layer, const int *ids, int n) {
    if (check_layer(p, layer)) return -1;
    int E = n_experts_of(&p->layers[layer]);
    batch *b = &p->b[layer];
    if (b->active && b->n == n) {
        /* the same batch again, nothing served yet (an early prefetch, then the one in moe.c): no-op */
        int same = 1;
        for (int i = 0; i < n && same; i++) same = b->ids[i] == ids[i] && (b->st[i] == B_QUEUED || b->st[i] == B_PINNED);
        if (same) return 0;
    }
    if (b->active) mr_pager_release(p, layer);
    if (n < 0 || batch_reserve(b, n)) return -1;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= E) { mr_set_error("pager: expert %d out of range [0, %d) in layer %d", ids[i], E, layer); return -1; }
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i]) { mr_set_error("pager: expert %d listed twice for layer %d", ids[i], layer); return -1; }
        b->ids[i] = ids[i];
        b->st[i] = B_QUEUED;
        b->slot[i] = -1;
    }
    b->n = n;
    b->active = 1;
    if (!p->paging) return 0;
    if (layer <= p->last_layer) { mr_cache_new_round(p->cache); p->cnt.rounds++; }
    p->last_layer = layer;
    settle_hints(p, layer, ids, n);
    /* resident experts first (pinned before any eviction), then reads for the missing ones */
    for (int i = 0; i < n; i++)
        if (mr_cache_find(p->cache, layer * p->e_max + ids[i]) >= 0) acquire(p, layer, i);
    fill(p, layer);
    return 0;
}

/* serve entry i (slot assigned): wait for it; on a failed read forget the slot and return -1 */
static int serve(mr_pager *p, int layer, int i, const void *ptrs[MR_PAGER_MATS]) {
    batch *b = &p->b[layer];
    int s = b->slot[i];
    if (wait_slot(p, s) == SLOT_ERROR) {
        pthread_mutex_lock(&p->mu);
        mr_set_error("%s", p->sl[s].err);
        p->sl[s].state = SLOT_EMPTY;
        pthread_mutex_unlock(&p->mu);
        mr_cache_invalidate(p->cache, s);
        unpin(p, b, i);
        return -1;
    }
    b->st[i] = B_SERVED;
    slot_ptrs(p, layer, s, ptrs);
    return 0;
}

static int too_small(mr_pager *p, int layer) {
    mr_set_error("pager: layer %d needs more experts at once than the %d slots of the RAM budget hold "
                 "(call mr_pager_done after each expert, or raise the budget)", layer, p->n_slots);
    return -1;
}

int mr_pager_next(mr_pager *p, int layer, int *id, const void *ptrs[MR_PAGER_MATS]) {
    if (check_layer(p, layer)) return -1;
    batch *b = &p->b[layer];
    *id = -1;
    if (!b->active) { mr_set_error("pager: mr_pager_next on layer %d without mr_pager_prefetch", layer); return -1; }
    if (!p->paging) {
        for (int i = 0; i < b->n; i++)
            if (b->st[i] == B_QUEUED) {
                b->st[i] = B_SERVED;
                *id = b->ids[i];
                mmap_ptrs(p, layer, *id, ptrs);
                return 0;
            }
        mr_set_error("pager: layer %d: every expert of the batch was already served", layer);
        return -1;
    }
    for (;;) {
        int loading = -1, queued = 0;
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < b->n; i++) {
            if (b->st[i] == B_QUEUED) queued = 1;
            if (b->st[i] != B_PINNED) continue;
            if (p->sl[b->slot[i]].pending == 0) { loading = -2 - i; break; } /* ready or failed */
            if (loading == -1) loading = i;
        }
        pthread_mutex_unlock(&p->mu);
        if (loading <= -2) { /* one is resident (or failed): serve it */
            int i = -2 - loading;
            *id = b->ids[i];
            return serve(p, layer, i, ptrs);
        }
        if (loading >= 0) { /* none ready: wait for the first one still loading */
            *id = b->ids[loading];
            return serve(p, layer, loading, ptrs);
        }
        if (!queued) { mr_set_error("pager: layer %d: every expert of the batch was already served", layer); return -1; }
        int before = 0;
        for (int i = 0; i < b->n; i++) before += b->st[i] == B_PINNED;
        fill(p, layer);
        int after = 0;
        for (int i = 0; i < b->n; i++) after += b->st[i] == B_PINNED;
        if (after == before) return too_small(p, layer);
    }
}

int mr_pager_get(mr_pager *p, int layer, int id, const void *ptrs[MR_PAGER_MATS]) {
    if (check_layer(p, layer)) return -1;
    int E = n_experts_of(&p->layers[layer]);
    if (id < 0 || id >= E) { mr_set_error("pager: expert %d out of range [0, %d) in layer %d", id, E, layer); return -1; }
    if (!p->paging) { mmap_ptrs(p, layer, id, ptrs); return 0; }
    batch *b = &p->b[layer];
    int i = -1;
    if (b->active)
        for (int k = 0; k < b->n; k++)
            if (b->ids[k] == id) i = k;
    if (i < 0) { /* not prefetched: add it to the layer's batch */
        if (!b->active) {
            if (mr_pager_prefetch(p, layer, &id, 1)) return -1;
            i = 0;
        } else {
            if (batch_reserve(b, b->n + 1)) return -1;
            i = b->n++;
            b->ids[i] = id;
            b->st[i] = B_QUEUED;
        }
    }
    if (b->st[i] == B_DONE) b->st[i] = B_QUEUED; /* asked again after done: re-pin */
    if (b->st[i] == B_QUEUED && acquire(p, layer, i)) return too_small(p, layer);
    return serve(p, layer, i, ptrs);
}

void mr_pager_done(mr_pager *p, int layer, int id) {
    if (!p->paging || layer < 0 || layer >= p->n_layers) return;
    batch *b = &p->b[layer];
    if (!b->active) return;
    for (int i = 0; i < b->n; i++)
        if (b->ids[i] == id) unpin(p, b, i);
    fill(p, layer);
}

void mr_pager_release(mr_pager *p, int layer) {
    if (layer < 0 || layer >= p->n_layers) return;
    batch *b = &p->b[layer];
    if (p->paging)
        for (int i = 0; i < b->n; i++) unpin(p, b, i);
    b->active = 0;
    b->n = 0;
}

void mr_pager_eval_begin(mr_pager *p, int decode) {
    if (!p || !p->paging) return;
    p->ev_decode = decode;
    if (!decode) return;
    pthread_mutex_lock(&p->mu);
    p->ev_read0 = p->cnt.bytes_read;
    p->ev_busy0 = p->cnt.io_busy_s;
    pthread_mutex_unlock(&p->mu);
    p->ev_miss0 = p->cnt.miss_bytes;
    p->ev_t0 = mr_now();
}

void mr_pager_eval_end(mr_pager *p) {
    if (!p || !p->paging || !p->ev_decode) return;
    p->ev_decode = 0;
    double t = mr_now();
    pthread_mutex_lock(&p->mu);
    p->cnt.decode_evals++;
    p->cnt.decode_s += t - p->ev_t0;
    p->cnt.decode_miss_bytes += p->cnt.miss_bytes - p->ev_miss0;
    p->cnt.decode_bytes_read += p->cnt.bytes_read - p->ev_read0;
    p->cnt.decode_io_busy_s += p->cnt.io_busy_s - p->ev_busy0;
    uint64_t read = p->cnt.bytes_read - p->ev_read0, miss = p->cnt.miss_bytes - p->ev_miss0;
    pthread_mutex_unlock(&p->mu);
    /* the eval's bytes read for guesses never used (or not yet: the next layer's) steer how many of
     * the next guesses are read */
    double w = read > miss ? (double)(read - miss) / (double)read : 0;
    p->waste_ema = 0.8 * p->waste_ema + 0.2 * w;
    if (p->waste_ema > GUESS_WASTE_HIGH && p->guess_keep > 0) /* from one token's worth down */
        p->guess_keep = (p->guess_keep > p->floor_slots ? p->floor_slots : p->guess_keep) - 1;
    else if (p->waste_ema < GUESS_WASTE_LOW && p->guess_keep < GUESS_KEEP_MAX) p->guess_keep++;
}

/* ---- statistics ---- */
void mr_pager_counters_get(const mr_pager *p, mr_pager_counters *out) {
    mr_pager *q = (mr_pager *)p;
    if (!p->paging) { memset(out, 0, sizeof *out); return; }
    pthread_mutex_lock(&q->mu);
    *out = p->cnt;
    pthread_mutex_unlock(&q->mu);
}

int mr_pager_layer_counters(const mr_pager *p, int layer, uint64_t *hits, uint64_t *misses) {
    if (layer < 0 || layer >= p->n_layers) return -1;
    *hits = p->paging ? p->l_hits[layer] : 0;
    *misses = p->paging ? p->l_miss[layer] : 0;
    return 0;
}

double mr_pager_belady_hit_rate(const mr_pager *p, int *truncated) {
    if (truncated) *truncated = p->trace_trunc;
    if (!p->paging || p->n_trace == 0) return -1;
    int64_t h = mr_cache_belady_hits(p->trace, p->n_trace, p->n_layers * p->e_max, p->n_slots);
    return h < 0 ? -1 : (double)h / (double)p->n_trace;
}

double mr_pager_static_hit_rate(const mr_pager *p, int64_t from, int *truncated) {
    if (truncated) *truncated = p->trace_trunc;
    if (!p->paging || from < 0 || from >= p->n_trace) return -1;
    int64_t h = mr_cache_static_hits(p->trace + from, p->n_trace - from, p->n_layers * p->e_max, p->n_slots);
    return h < 0 ? -1 : (double)h / (double)(p->n_trace - from);
}
