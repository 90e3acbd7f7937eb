/* A persistent thread pool: workers stay alive between jobs and spin briefly before sleeping,
 * so a decode step can hand out many small jobs cheaply. The calling thread is worker 0. */
#ifndef MR_POOL_H
#define MR_POOL_H

typedef struct mr_pool mr_pool;
/* fn(ctx, ith, nth): ith in [0, nth). Every thread runs fn exactly once per mr_pool_run. */
typedef void (*mr_pool_fn)(void *ctx, int ith, int nth);

mr_pool *mr_pool_create(int n_threads); /* NULL + mr_set_error on failure; n_threads >= 1 */
void mr_pool_free(mr_pool *p);
int mr_pool_size(const mr_pool *p);
void mr_pool_run(mr_pool *p, mr_pool_fn fn, void *ctx); /* p may be NULL: runs fn(ctx, 0, 1) */
/* Barrier for use inside fn: all nth threads of the current job must call it. */
void mr_pool_barrier(mr_pool *p);

/* fn(ctx, i) for every chunk i in [0, n_chunks), each exactly once, on the calling thread and
 * whichever workers are free (chunks are claimed one at a time). Returns when all chunks are done;
 * unlike mr_pool_run it does not wait for workers that never got to the job (busy or descheduled on
 * a shared machine), so it suits many short jobs such as decode matmuls. fn must not use the
 * barrier. p may be NULL (runs every chunk on the calling thread). */
typedef void (*mr_pool_chunk_fn)(void *ctx, long chunk);
void mr_pool_run_chunks(mr_pool *p, mr_pool_chunk_fn fn, void *ctx, long n_chunks);
/* Inside a chunk of mr_pool_run_chunks(p, ...): the running thread's index in [0, mr_pool_size(p))
 * (0 the calling thread, i worker i), so no two chunks running at once share one; a chunk can use
 * a per-thread buffer the caller prepared. 0 on a thread that runs no pool's job. */
int mr_pool_worker_id(void);

/* Split [0, n) into nth nearly equal parts; part ith is [*lo, *hi). */
static inline void mr_split(long n, int ith, int nth, long *lo, long *hi) {
    long q = n / nth, r = n % nth;
    *lo = ith * q + (ith < r ? ith : r);
    *hi = *lo + q + (ith < r ? 1 : 0);
}
#endif
