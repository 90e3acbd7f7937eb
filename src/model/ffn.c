/* The FFN half of a layer: dense FFN and the MoE block (see ffn.h). */
#include "model/ffn.h"
#include "model/moe_approx.h"
#include "model/moe_select.h"
#include "model/ops.h"
#include "base/prof.h"
#include "quant/matmul.h"

#include <stdlib.h>
#include <string.h>

int mr_ffn(mr_model *m, const mr_weight *gate, const mr_weight *up, const mr_weight *down, const float *h, int n,
           float *g, float *u, float *out) {
    const int budget = mr_approx_ffn_budget(m, MR_FFN_DENSE);
    if (budget) {
        if (mr_approx_ffn_act(m, budget, gate, up, h, n, g, u, 0.0f)) return -1;
    } else {
        MR_PROF_BEGIN(tf);
        const mr_matmul_task tk[2] = {{.w = up, .X = h, .ncols = n, .Y = u}, {.w = gate, .X = h, .ncols = n, .Y = g}};
        if (mr_model_matmul_many(m, tk, 2)) return -1;
        MR_PROF_END(tf, "mm ffn_up+gate");
        mr_swiglu(g, g, u, n * gate->rows, 0.0f, 1.0f);
    }
    return mr_model_matmul(m, down, g, n, out);
}

/* the shared expert's SwiGLU of token t (rows are independent: any split gives the same bits) */
typedef struct { float *g; const float *u; int64_t Fs; float lim; } moe_sh_job;
static void moe_sh_swiglu(void *arg, long t) {
    const moe_sh_job *j = arg;
    mr_swiglu(j->g + t * j->Fs, j->g + t * j->Fs, j->u + t * j->Fs, j->Fs, j->lim, 1.0f);
}

/* the selected experts (as floats) and their weights, for --dump */
static void moe_dump_route(mr_model *m, int layer, const mr_moe_cfg *c, const mr_moe_layer *ly, const mr_moe_buf *b,
                           int n) {
    const int64_t nk = (int64_t)n * c->n_used;
    float *tf = mr_malloc(sizeof(float) * (size_t)nk);
    if (tf) { /* a debug tap: without memory it is left out */
        for (int64_t i = 0; i < nk; i++) tf[i] = (float)b->sel[i];
        mr_model_dump(m, ly->tok_experts ? "ffn_moe_hash_topk" : "ffn_moe_topk", layer, tf, c->n_used, n);
        free(tf);
    }
    mr_model_dump(m, "ffn_moe_weights_scaled", layer, b->w, c->n_used, n);
}

int mr_moe_block(mr_model *m, int layer, const mr_moe_cfg *c, const mr_moe_layer *ly, const float *h, int n,
                 const mr_moe_buf *b, float *out, float *x) {
    const int64_t d = m->n_embd, E = c->n_expert, K = c->n_used;
    const int shared = ly->sh_up != NULL;
    const int64_t Fs = shared ? ly->sh_up->rows : 0;
    /* the router and the shared expert's gate and up in one dispatch (h converted once); the router
     * alone when the shared expert has a row budget (its gate goes first there) */
    const int sh_budget = shared ? mr_approx_ffn_budget(m, MR_FFN_SHARED) : 0;
    MR_PROF_BEGIN(ti);
    const mr_matmul_task tk[3] = {{.w = ly->router, .X = h, .ncols = n, .Y = b->logits},
                                  {.w = ly->sh_gate, .X = h, .ncols = n, .Y = b->g},
                                  {.w = ly->sh_up, .X = h, .ncols = n, .Y = b->u}};
    if (mr_model_matmul_many(m, tk, shared && !sh_budget ? 3 : 1)) return -1;
    MR_PROF_END(ti, "mm ffn_in");
    if (ly->router_b)
        for (int t = 0; t < n; t++)
            for (int64_t e = 0; e < E; e++) b->logits[t * E + e] += ly->router_b[e];
    mr_model_dump(m, "ffn_moe_logits", layer, b->logits, E, n);

    MR_PROF_BEGIN(tr);
    if (ly->tok_experts) /* hash layers: the token's experts; their weights still come from the logits */
        for (int t = 0; t < n; t++) memcpy(b->sel + t * K, ly->tok_experts + (int64_t)ly->tok[t] * K, sizeof(int32_t) * (size_t)K);
    if (mr_moe_route(c, b->logits, ly->tok_experts ? NULL : ly->sel_bias, ly->tok_experts ? b->sel : NULL, n, b->sel, b->w))
        return -1;
    if (mr_approx_cache_select(m, layer, c, b->logits, ly->tok_experts ? NULL : ly->sel_bias, n, b->sel, b->w)) return -1;
    MR_PROF_END(tr, "moe_route");
    if (mr_model_dumping(m)) moe_dump_route(m, layer, c, ly, b, n);

    if (shared) {
        MR_PROF_BEGIN(ts);
        if (sh_budget) {
            if (mr_approx_ffn_act(m, sh_budget, ly->sh_gate, ly->sh_up, h, n, b->g, b->u, ly->sh_clamp)) return -1;
        } else {
            moe_sh_job sj = {b->g, b->u, Fs, ly->sh_clamp};
            mr_pool_run_chunks(n > 1 ? m->pool : NULL, moe_sh_swiglu, &sj, n);
        }
        MR_PROF_END(ts, "swiglu_shexp");
    }
    /* the routed experts, with the shared expert's down product in their down dispatch */
    const mr_moe_extra shexp = {ly->sh_down, b->g, b->sh};
    MR_PROF_BEGIN(te);
    if (mr_moe_experts(m, layer, c, h, n, b->sel, b->w, shared ? &shexp : NULL, shared, b->ws, out)) return -1;
    MR_PROF_END(te, "moe_experts");
    mr_model_dump(m, "ffn_moe_out", layer, out, d, n);
    if (shared) {
        mr_model_dump(m, "ffn_shexp", layer, b->sh, d, n);
        if (ly->sh_gate_inp) {
            for (int t = 0; t < n; t++) {
                const float sg = mr_sigmoid(mr_dot(ly->sh_gate_inp, h + t * d, d));
                for (int64_t i = 0; i < d; i++) out[t * d + i] += b->sh[t * d + i] * sg;
            }
        } else mr_add(out, out, b->sh, n * d);
    }
    mr_model_dump(m, "ffn_out", layer, out, d, n);
    if (x) mr_add(x, out, x, n * d);
    return 0;
}
