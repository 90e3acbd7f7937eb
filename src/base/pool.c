#include "base/pool.h"
#include "base/base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MR_POOL_SPIN 200000 /* spins before a worker sleeps on the condition variable */

struct mr_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mr_pool_fn fn;
    void *ctx;
    atomic_uint gen;      /* bumped once per job */
    atomic_int n_done;    /* workers finished with the current job */
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
#endif
}

static void *mr_pool_worker(void *arg) {
    struct mr_worker_arg *wa = arg;
    mr_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !atomic_load(&p->stop)) {
            if (++spins < MR_POOL_SPIN) { mr_cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        p->fn(p->ctx, ith, p->n);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel);
    }
    return NULL;
}

mr_pool *mr_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    mr_pool *p = calloc(1, sizeof *p);
    if (!p) { mr_set_error("out of memory creating thread pool"); return NULL; }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) goto fail;
    for (int i = 1; i < n_threads; i++) {
        struct mr_worker_arg *wa = malloc(sizeof *wa);
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

void mr_pool_run(mr_pool *p, mr_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->n_done, 0);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    while (atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n - 1) mr_cpu_relax();
}

void mr_pool_barrier(mr_pool *p) {
    if (!p || p->n == 1) return;
    int sense = atomic_load(&p->bar_sense);
    if (atomic_fetch_add(&p->bar_count, 1) == p->n - 1) {
        atomic_store(&p->bar_count, 0);
        atomic_store(&p->bar_sense, !sense);
    } else {
        while (atomic_load(&p->bar_sense) == sense) mr_cpu_relax();
    }
}
