/* Session scratch memory (base.h): one block per session that grows to the largest batch the
 * session has evaluated; every later eval carves its buffers out of it without allocating. */
#include "base/base.h"

#include <stdint.h>
#include <stdlib.h>

#define MR_SCRATCH_ALIGN 64 /* a cache line: buffers never share one (threads write different buffers) */

/* an arena's overflow allocation: this header, then the buffer at MR_SCRATCH_ALIGN */
struct mr_scratch_extra { mr_scratch_extra *next; };

static void scratch_free_extras(mr_scratch *s) {
    while (s->extra) {
        mr_scratch_extra *e = s->extra;
        s->extra = e->next;
        mr_aligned_free(e);
    }
}

void mr_scratch_begin(mr_scratch *s) {
    scratch_free_extras(s);
    s->used = 0;
    s->need = 0;
}

void *mr_scratch_take(mr_scratch *s, size_t bytes) {
    const size_t r = (bytes + MR_SCRATCH_ALIGN - 1) / MR_SCRATCH_ALIGN * MR_SCRATCH_ALIGN;
    if (r < bytes || s->need + r < s->need) { s->need = SIZE_MAX; return NULL; } /* overflow */
    s->need += r;
    if (!s->p || s->used + r > s->cap) return NULL; /* mr_scratch_end grows the block; the caller takes again */
    void *p = (char *)s->p + s->used;
    s->used += r;
    return p;
}

int mr_scratch_end(mr_scratch *s) {
    if (s->need <= s->cap) return 0;
    if (s->need == SIZE_MAX) { mr_set_error("scratch: size overflow"); return -1; }
    mr_aligned_free(s->p);
    s->cap = 0;
    s->p = mr_aligned_alloc(MR_SCRATCH_ALIGN, s->need);
    if (!s->p) { mr_set_error("out of memory for %zu bytes of scratch", s->need); return -1; }
    s->cap = s->need;
    return 1;
}

void mr_scratch_reset(mr_scratch *s) {
    if (s->extra) {
        scratch_free_extras(s);
        if (s->need > s->cap && s->need != SIZE_MAX) {
            /* one block of last time's total; without memory for it the extras serve again */
            mr_aligned_free(s->p);
            s->cap = 0;
            if ((s->p = mr_aligned_alloc(MR_SCRATCH_ALIGN, s->need))) s->cap = s->need;
        }
    }
    s->used = 0;
    s->need = 0;
}

void *mr_scratch_alloc(mr_scratch *s, size_t bytes) {
    const size_t r = (bytes + MR_SCRATCH_ALIGN - 1) / MR_SCRATCH_ALIGN * MR_SCRATCH_ALIGN;
    if (r < bytes || r > SIZE_MAX - MR_SCRATCH_ALIGN) { mr_set_error("scratch: size overflow"); return NULL; }
    s->need = s->need + r < s->need ? SIZE_MAX : s->need + r;
    if (s->p && s->used + r <= s->cap) {
        void *p = (char *)s->p + s->used;
        s->used += r;
        return p;
    }
    mr_scratch_extra *e = mr_aligned_alloc(MR_SCRATCH_ALIGN, MR_SCRATCH_ALIGN + r);
    if (!e) { mr_set_error("out of memory for %zu bytes of scratch", bytes); return NULL; }
    e->next = s->extra;
    s->extra = e;
    return (char *)e + MR_SCRATCH_ALIGN;
}

void mr_scratch_free(mr_scratch *s) {
    scratch_free_extras(s);
    mr_aligned_free(s->p);
    s->p = NULL;
    s->cap = s->used = s->need = 0;
}
