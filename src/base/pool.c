#include "base/pool.h"
#include "base/base.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define MR_POOL_SPIN 200000 /* spins before a worker sleeps on the condition variable */
#define MR_WAIT_SPIN 4000   /* spins before a waiting thread starts yielding its core */

/* Chunked jobs hand out chunk indices with a CAS on one 64-bit word:
 * bits 40..63 job id (low 24 bits of the job sequence), 20..39 number of chunks, 0..19 next chunk.
 * A worker that arrives late (busy elsewhere, descheduled) finds no chunk left and is not waited for;
 * the job id stops a stale worker's CAS from succeeding on a later job's word. */
#define MR_CLAIM_MAX_CHUNKS ((1L << 20) - 1)

struct mr_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long seq;    /* jobs started (written by the calling thread only) */
    int isa;              /* the calling thread's kernel ISA (mr_isa) for the current job */
    atomic_ulong job;     /* seq << 1 | 1 for a chunked job; workers wait for it to change */
    /* mr_pool_run jobs */
    mr_pool_fn fn;
    void *ctx;
    atomic_int n_done;    /* workers finished with the current job */
    /* chunked jobs */
    mr_pool_chunk_fn cfn;
    void *cctx;
    _Atomic uint64_t claim;
    atomic_long chunks_done;
    atomic_int n_sleeping;
    atomic_int stop;
    /* sense-reversing barrier */
    atomic_int bar_count;
    atomic_int bar_sense;
};

struct mr_worker_arg { mr_pool *p; int ith; };

static inline void mr_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield"); /* the spin-wait hint (an SMT sibling may run) */
#endif
}

/* one step of a wait loop: spin for a while, then let other threads on this core run */
static inline void mr_wait_step(int *spins) {
    if (++*spins < MR_WAIT_SPIN) mr_cpu_relax();
    else sched_yield();
}

/* Claim and run chunks of the current chunked job until none is left (worker: a pool thread, which
 * takes the job's ISA; the calling thread has it already). */
static _Thread_local int mr_pool_ith; /* mr_pool_worker_id: the thread's index in the job it runs */

static void mr_pool_claim_loop(mr_pool *p, int ith) {
    const int prev = mr_pool_ith;
    mr_pool_ith = ith;
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        uint64_t next = c & 0xfffff, nch = (c >> 20) & 0xfffff;
        if (next >= nch) break;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        /* our chunk is outstanding, so the job (cfn, cctx, isa) cannot change under us */
        if (ith) mr_isa_enter(p->isa);
        p->cfn(p->cctx, (long)next);
        atomic_fetch_add_explicit(&p->chunks_done, 1, memory_order_release);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
    mr_pool_ith = prev;
}

int mr_pool_worker_id(void) { return mr_pool_ith; }

static void *mr_pool_worker(void *arg) {
    struct mr_worker_arg *wa = arg;
    mr_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned long seen = 0;
    for (;;) {
        unsigned long w;
        int spins = 0;
        while (((w = atomic_load_explicit(&p->job, memory_order_acquire)) >> 1) == seen && !atomic_load(&p->stop)) {
            if (++spins < MR_POOL_SPIN) {
                mr_cpu_relax();
                if ((spins & 1023) == 0) sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1);
            while ((atomic_load(&p->job) >> 1) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) break;
        seen = w >> 1;
        if (w & 1) {
            mr_pool_claim_loop(p, ith);
        } else {
            /* mr_pool_run waits for every worker, so fn, ctx and isa are this job's */
            mr_isa_enter(p->isa);
            p->fn(p->ctx, ith, p->n);
            atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel);
        }
    }
    return NULL;
}

mr_pool *mr_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    mr_pool *p = mr_calloc(1, sizeof *p);
    if (!p) { mr_set_error("out of memory creating thread pool"); return NULL; }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = mr_calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) goto fail;
    for (int i = 1; i < n_threads; i++) {
        struct mr_worker_arg *wa = mr_malloc(sizeof *wa);
        if (!wa) goto fail;
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, mr_pool_worker, wa) != 0) {
            free(wa);
            p->n = i; /* only i-1 workers exist */
            goto fail;
        }
    }
    return p;
fail:
    mr_set_error("cannot create %d worker threads", n_threads);
    mr_pool_free(p);
    return NULL;
}

void mr_pool_free(mr_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        if (p->threads && p->threads[i]) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int mr_pool_size(const mr_pool *p) { return p ? p->n : 1; }

/* publish job word w (seq_cst: pairs with the sleeping worker's n_sleeping increment) and wake */
static void mr_pool_publish(mr_pool *p, unsigned long w) {
    atomic_store(&p->job, w);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

void mr_pool_run(mr_pool *p, mr_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    p->isa = mr_isa();
    atomic_store(&p->n_done, 0);
    p->seq++;
    mr_pool_publish(p, p->seq << 1);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n - 1) mr_wait_step(&spins);
}

typedef struct { mr_pool_chunk_fn fn; void *ctx; long base; } mr_chunk_slice;
static void mr_chunk_slice_fn(void *arg, long i) {
    mr_chunk_slice *s = arg;
    s->fn(s->ctx, s->base + i);
}

void mr_pool_run_chunks(mr_pool *p, mr_pool_chunk_fn fn, void *ctx, long n_chunks) {
    if (n_chunks <= 0) return;
    if (!p || p->n == 1 || n_chunks == 1) {
        for (long i = 0; i < n_chunks; i++) fn(ctx, i);
        return;
    }
    if (n_chunks > MR_CLAIM_MAX_CHUNKS) {
        for (long b = 0; b < n_chunks; b += MR_CLAIM_MAX_CHUNKS) {
            mr_chunk_slice s = {fn, ctx, b};
            long n = n_chunks - b < MR_CLAIM_MAX_CHUNKS ? n_chunks - b : MR_CLAIM_MAX_CHUNKS;
            mr_pool_run_chunks(p, mr_chunk_slice_fn, &s, n);
        }
        return;
    }
    p->cfn = fn;
    p->cctx = ctx;
    p->isa = mr_isa();
    atomic_store_explicit(&p->chunks_done, 0, memory_order_relaxed);
    p->seq++;
    atomic_store_explicit(&p->claim, ((uint64_t)(p->seq & 0xffffff) << 40) | ((uint64_t)n_chunks << 20),
                          memory_order_release);
    mr_pool_publish(p, p->seq << 1 | 1);
    mr_pool_claim_loop(p, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->chunks_done, memory_order_acquire) < n_chunks) mr_wait_step(&spins);
}

void mr_pool_barrier(mr_pool *p) {
    if (!p || p->n == 1) return;
    int sense = atomic_load(&p->bar_sense);
    if (atomic_fetch_add(&p->bar_count, 1) == p->n - 1) {
        atomic_store(&p->bar_count, 0);
        atomic_store(&p->bar_sense, !sense);
    } else {
        int spins = 0;
        while (atomic_load(&p->bar_sense) == sense) mr_wait_step(&spins);
    }
}
