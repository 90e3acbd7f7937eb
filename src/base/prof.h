/* Per-operator profiler: forward passes bracket their operators with MR_PROF_BEGIN/END (main thread
 * only; worker time is inside the bracket). Totals are kept per phase (prefill vs decode) together
 * with the number of tokens, so the report can give ms/token. Off unless mr_profile_enable(1). */
#ifndef MR_PROF_H
#define MR_PROF_H
#include <stdint.h>
#include "base/base.h"

extern int mr_prof_on;
/* op: any string (copied, up to 31 chars). "parent/child" is a sub-operator timed inside the
 * parent's bracket: the report lists it under the parent and leaves it out of the totals. */
void mr_prof_add(const char *op, double sec);
/* Time of a weight product, named after its tensor: "blk.3.attn_q.weight" -> "mm attn_q". */
void mr_prof_add_matmul(const char *tensor_name, double sec);
void mr_prof_tokens(int phase, int n_tokens);      /* phase 0 prefill, 1 decode: tokens evaluated */
void mr_prof_set_phase(int phase);

#define MR_PROF_BEGIN(t) double t = mr_prof_on ? mr_now() : 0.0
#define MR_PROF_END(t, op) do { if (mr_prof_on) mr_prof_add(op, mr_now() - (t)); } while (0)
#endif
