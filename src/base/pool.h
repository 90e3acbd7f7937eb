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

/* Split [0, n) into nth nearly equal parts; part ith is [*lo, *hi). */
static inline void mr_split(long n, int ith, int nth, long *lo, long *hi) {
    long q = n / nth, r = n % nth;
    *lo = ith * q + (ith < r ? ith : r);
    *hi = *lo + q + (ith < r ? 1 : 0);
}
#endif
