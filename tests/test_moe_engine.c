/* The expert engine's hook for experts computed elsewhere (moe.h, mr_moe_remote): a "remote" that
 * computes its experts here with plain mr_matmul products must give the logits of the local engine
 * byte for byte (prefill and decode, with and without paging, with the deepseek4 weight before the
 * down product and its shared expert as an extra product), and a failing remote fails the eval with
 * its message. */
#include "test.h"
#include "golden_logits.h"
#include "moerun.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/ops.h"
#include "quant/matmul.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOK 24

typedef struct {
    mr_model *m;
    int calls, rows, fail;
} remote;

static int rt_owns(void *ctx, int layer, int e) { (void)ctx; return (e + layer) % 3 == 1; }

/* slice e of a 3-D expert tensor */
static const void *slice(const mr_gguf_tensor *t, int e) {
    return (const uint8_t *)t->data + (size_t)e * mr_row_size(t->type, t->ne[0]) * (size_t)t->ne[1];
}

static int rt_compute(void *ctx, int layer, int e, const mr_moe_cfg *c, const float *x, int64_t d, const int *tok,
                      int cnt, const float *w, float *y) {
    remote *r = ctx;
    if (r->fail) { mr_set_error("remote: host 3 unreachable"); return -1; }
    const mr_pager_layer *pl = &r->m->exp_layers[layer];
    const mr_gguf_tensor *tg = pl->mat[MR_PAGER_GATE], *tu = pl->mat[MR_PAGER_UP], *td = pl->mat[MR_PAGER_DOWN];
    const int64_t F = tu->ne[1];
    float *xs = malloc(sizeof(float) * (size_t)(cnt * d)), *g = malloc(sizeof(float) * (size_t)(cnt * F));
    float *u = malloc(sizeof(float) * (size_t)(cnt * F));
    int rc = -1;
    if (!xs || !g || !u) { mr_set_error("remote: out of memory"); goto done; }
    for (int i = 0; i < cnt; i++) memcpy(xs + i * d, x + tok[i] * d, sizeof(float) * (size_t)d);
    if (mr_matmul(r->m->pool, slice(tu, e), tu->type, F, d, xs, cnt, u)) goto done;
    if (tg && mr_matmul(r->m->pool, slice(tg, e), tg->type, F, d, xs, cnt, g)) goto done;
    for (int i = 0; i < cnt; i++)
        mr_swiglu(u + i * F, tg ? g + i * F : NULL, u + i * F, F, c->clamp, c->weight_before_down ? w[i] : 1.0f);
    if (mr_matmul(r->m->pool, slice(td, e), td->type, d, F, u, cnt, y)) goto done;
    r->calls++;
    r->rows += cnt;
    rc = 0;
done:
    free(xs); free(g); free(u);
    return rc;
}

/* The submit/collect form: jobs are kept at submit and computed (by rt_compute) only at collect,
 * after the engine's local experts, as a transport that overlaps them would. */
static struct { remote *r; int layer; const mr_moe_cfg *c; const float *x; int64_t d; mr_moe_job jobs[64]; int n; } pend;
static int rt_submit(void *ctx, int layer, const mr_moe_cfg *c, const float *x, int64_t d, const mr_moe_job *jobs, int n) {
    if (n > 64) { mr_set_error("remote: too many jobs"); return -1; }
    pend.r = ctx; pend.layer = layer; pend.c = c; pend.x = x; pend.d = d; pend.n = n;
    memcpy(pend.jobs, jobs, sizeof *jobs * (size_t)n);
    return 0;
}
static int rt_collect(void *ctx) {
    int rc = 0;
    for (int j = 0; j < pend.n && !rc; j++)
        rc = rt_compute(ctx, pend.layer, pend.jobs[j].e, pend.c, pend.x, pend.d, pend.jobs[j].tok, pend.jobs[j].cnt,
                        pend.jobs[j].w, pend.jobs[j].y);
    pend.n = 0;
    return rc;
}

static mr_model *load(const char *model, uint64_t budget) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s.gguf", model);
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    mp.ram_budget = budget;
    return mr_model_load(t_shared(rel), &mp);
}

static void test_remote_identical(void) {
    static const char *models[] = {"tiny-qwen3moe", "tiny-mixtral-q4_k_m", "kjv-moe-q8_0", "tiny-deepseek4",
                                   "tiny-deepseek4-iq3s-mxfp4"};
    int n = 0;
    int32_t *ids = tg_read_ids("tokens-32.txt", &n);
    CHECK(ids && n >= MAX_TOK, "tokens");
    if (!ids) return;
    n = MAX_TOK;
    for (int paged = 0; paged < 2; paged++)
        for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
            mr_model *m = load(models[mi], 0);
            CHECK(m, "%s: %s", models[mi], mr_last_error());
            if (!m) continue;
            mr_pager_model_info info;
            char rel[256];
            snprintf(rel, sizeof rel, "models/%s.gguf", models[mi]);
            if (paged) {
                CHECK(mr_pager_model_sizes(t_shared(rel), &info) == 0, "%s", mr_last_error());
                mr_model_free(m);
                m = load(models[mi], info.min_budget);
                CHECK(m, "%s: %s", models[mi], mr_last_error());
                if (!m) continue;
            }
            const size_t bytes = sizeof(float) * (size_t)n * (size_t)mr_model_n_vocab(m);
            for (int mode = 0; mode < 4; mode++) { /* decode or prefill x compute or submit/collect */
                const int decode = mode & 1, deferred = mode >> 1;
                float *ref = tg_eval(m, ids, n, decode);
                remote r = {.m = m};
                const mr_moe_remote ops = {.ctx = &r, .owns = rt_owns, .compute = deferred ? NULL : rt_compute,
                                           .submit = deferred ? rt_submit : NULL, .collect = deferred ? rt_collect : NULL};
                mr_moe_set_remote(m, &ops);
                float *got = tg_eval(m, ids, n, decode);
                mr_moe_set_remote(m, NULL);
                CHECK(ref && got, "%s: %s", models[mi], mr_last_error());
                if (ref && got)
                    CHECK(!memcmp(ref, got, bytes), "%s %s%s%s: logits with remote experts differ", models[mi],
                          decode ? "decode" : "prefill", paged ? " (paging)" : "", deferred ? " (submit/collect)" : "");
                CHECK(r.calls > 0 && r.rows >= r.calls, "%s: the remote computed nothing", models[mi]);
                free(ref);
                free(got);
            }
            /* a failing remote fails the eval with its message */
            remote r = {.m = m, .fail = 1};
            const mr_moe_remote ops = {.ctx = &r, .owns = rt_owns, .compute = rt_compute};
            mr_moe_set_remote(m, &ops);
            float *bad = tg_eval(m, ids, n, 0);
            mr_moe_set_remote(m, NULL);
            CHECK(!bad && strstr(mr_last_error(), "host 3 unreachable"), "%s: remote failure: %s", models[mi],
                  bad ? "eval succeeded" : mr_last_error());
            free(bad);
            mr_model_free(m);
        }
    free(ids);
}

int main(void) {
    RUN(test_remote_identical);
    return t_finish();
}
