/* moerun plan: what a model file needs and how fast it should run on this machine, from its metadata
 * and a few seconds of measurement (docs/GUIDE.md "Will it run, and how fast").
 *
 * The model of a decoded token (every figure per token):
 *   bytes    = dense bytes (all but the routed experts; the token embedding counts one row) +
 *              routed bytes (top-k experts of every MoE layer)
 *   resident = max(bytes / DRAM read rate, bytes / the engine's GEMV rate on each of the model's types,
 *              weights streamed from DRAM); DRAM-bound when the GEMV rate is within 15 % of the DRAM
 *              read rate, else CPU-bound
 *   paged    = resident + routed bytes x (1 - hit) / device read rate      (decode reads are waited for)
 * hit: the arena's share of all (layer, expert) pairs under uniform routing (any policy's steady
 * state), and the default policy's hit rate on a trained MoE's real routing (kjv-moe) at that share
 * as the skewed bound. A prefill is compute-bound: 2 x active weights FLOPs per token at the CPU's
 * GEMM rate (dense matrices at 64 columns, routed experts at their share of a 512-token batch); paged, each 512-token batch touches nearly every expert of a layer, whose misses are
 * read while it computes (the slower of the two). */
#include "moerun_tools.h"
#include "base/base.h"
#include "base/pool.h"
#include "gguf/gguf.h"
#include "quant/matmul.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* u32 scalar, or the largest entry of a u32/i32 array (per-layer keys); 0 if absent */
static uint32_t plan_u32(const mr_gguf *g, const char *arch, const char *suffix) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const mr_gguf_kv *kv = mr_gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->type != MR_GGUF_ARRAY) {
        uint32_t v = 0;
        return mr_gguf_get_u32(g, key, &v) ? 0 : v;
    }
    if (kv->arr_type != MR_GGUF_U32 && kv->arr_type != MR_GGUF_I32) return 0;
    uint32_t best = 0;
    for (uint64_t i = 0; i < kv->n; i++) {
        uint32_t v = ((const uint32_t *)kv->arr)[i];
        if (v > best && v < (1u << 30)) best = v;
    }
    return best;
}

/* adds a token's bytes and weights of one tensor type to the per-type table */
static void plan_add_type(mr_plan_model *pm, int type, double bytes, double params, int expert) {
    const mr_type_traits *tt = mr_type_get(type);
    if (!tt || !tt->vec_dot) return; /* not a weight matrix (deepseek4's i32 hash-routing table) */
    int i = 0;
    while (i < pm->n_types && pm->type[i] != type) i++;
    if (i == pm->n_types) {
        if (pm->n_types == 8) i = 7;
        else pm->type[pm->n_types++] = type;
    }
    pm->type_bytes[i] += bytes;
    pm->type_params[i] += params;
    if (expert) pm->type_exp_params[i] += params;
}

static int plan_layer_of(const char *name, int *layer) {
    return sscanf(name, "blk.%d.", layer) == 1 && *layer >= 0;
}

int mr_plan_read(const char *path, mr_plan_model *pm) {
    memset(pm, 0, sizeof *pm);
    mr_gguf *g = mr_gguf_open(path);
    if (!g) return -1;
    const char *arch = NULL;
    if (mr_gguf_get_str(g, "general.architecture", &arch) || !arch) {
        mr_set_error("%s: no general.architecture", path);
        mr_gguf_close(g);
        return -1;
    }
    snprintf(pm->arch, sizeof pm->arch, "%s", arch);
    pm->n_layer = (int)plan_u32(g, arch, "block_count");
    int trunk = pm->n_layer - (int)plan_u32(g, arch, "nextn_predict_layers"); /* MTP blocks are not run */
    pm->n_expert = (int)plan_u32(g, arch, "expert_count");
    pm->n_expert_used = (int)plan_u32(g, arch, "expert_used_count");
    int has_output = mr_gguf_find_tensor(g, "output.weight") != NULL;
    uint64_t moe_layers = 0; /* bit mask is not enough for 100+ layers: count layers with ffn_down_exps */
    uint64_t exp_bytes_max = 0;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        double params = 1;
        for (int d = 0; d < t->n_dims; d++) params *= (double)t->ne[d];
        pm->file_bytes += t->nbytes;
        int l = -1;
        int in_trunk = !plan_layer_of(t->name, &l) || l < trunk;
        if (strstr(t->name, "_exps.") && t->n_dims == 3) {
            pm->routed_bytes += t->nbytes;
            if (!in_trunk) continue;
            if (strstr(t->name, "ffn_down_exps.")) moe_layers++;
            uint64_t e = t->ne[2] ? t->nbytes / (uint64_t)t->ne[2] : 0;
            double ep = params / (double)(t->ne[2] ? t->ne[2] : 1) * pm->n_expert_used;
            pm->routed_per_token += (double)e * pm->n_expert_used;
            pm->active_params += ep;
            plan_add_type(pm, t->type, (double)e * pm->n_expert_used, ep, 1);
            if (t->nbytes > exp_bytes_max) { exp_bytes_max = t->nbytes; pm->expert_type = t->type; }

            continue;
        }
        pm->dense_bytes += t->nbytes;
        if (!in_trunk) continue;
        if (!strcmp(t->name, "token_embd.weight") && has_output && t->n_dims == 2 && t->ne[1] > 0) {
            pm->dense_per_token += (double)t->nbytes / (double)t->ne[1]; /* one row is read */
            continue;
        }
        pm->dense_per_token += (double)t->nbytes;
        if (t->n_dims >= 2) {
            pm->active_params += params;
            plan_add_type(pm, t->type, (double)t->nbytes, params, 0);
        }
    }
    pm->n_moe_layer = (int)moe_layers;
    snprintf(pm->expert_type_name, sizeof pm->expert_type_name, "%s", mr_type_name(pm->expert_type));
    mr_gguf_close(g);
    mr_pager_model_info mi;
    if (mr_pager_model_sizes(path, &mi)) return -1;
    pm->slot_bytes = mi.slot_bytes;
    pm->min_budget = mi.min_budget;
    return 0;
}

/* ---- measurements ---- */

static double plan_dram(mr_pool *pool, double seconds) {
    size_t bytes = 512u << 20;
    uint8_t *buf = mr_big_alloc(bytes, 1, NULL);
    if (!buf) return 0;
    memset(buf, 1, bytes);
    double best = 0, t_end = mr_now() + seconds;
    for (int r = 0; r < 2 || mr_now() < t_end; r++) {
        double t = mr_now();
        mr_dram_read_pass(pool, buf, bytes);
        t = mr_now() - t;
        if (bytes / t > best) best = bytes / t;
        if (r > 50) break;
    }
    mr_big_free(buf, bytes);
    return best / 1e9;
}

/* The engine's product with one matrix of the type (the first 2-D weight, or the first expert of a
 * 3-D one: at most 4096 rows, a multiple of 16 so that a repacked copy holds whole groups), in the
 * layout the model runs (its repacked copy when the type has one under this ISA):
 *   out[0] decode: weight bytes/s of one column over those rows tiled to 256 MiB, more than any
 *          last-level cache, so the weights stream from DRAM as a decoded token's do;
 *   out[1] prefill, dense: FLOP/s at 64 columns (a matrix's share of a 512-token batch);
 *   out[2] prefill, routed: FLOP/s at exp_cols columns (an expert's share of that batch). */
static int plan_cpu_type(const mr_gguf *g, int type, int exp_cols, mr_pool *pool, double seconds, double out[3]) {
    const mr_gguf_tensor *w = NULL;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g) && !w; i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        if (t->type == type && t->n_dims >= 2 && t->ne[1] >= 16 && strcmp(t->name, "token_embd.weight")) w = t;
    }
    out[0] = out[1] = out[2] = 0;
    if (!w) return 0;
    int64_t cols = w->ne[0], rows = (w->ne[1] > 4096 ? 4096 : w->ne[1]) / 16 * 16, nc = 64;
    size_t mat_bytes = mr_row_size(w->type, cols) * (size_t)rows;
    size_t copies = ((size_t)256 << 20) / mat_bytes + 1, big_bytes = copies * mat_bytes;
    int64_t big_rows = rows * (int64_t)copies;
    uint8_t *big = mr_big_alloc(big_bytes, 1, NULL);
    float *x = mr_malloc(sizeof(float) * (size_t)(cols * nc));
    float *y = mr_malloc(sizeof(float) * (size_t)(big_rows > rows * nc ? big_rows : rows * nc));
    mr_repacked *rp = NULL;
    int rc = -1, err = 0;
    if (!big || !x || !y) { mr_set_error("out of memory timing the %s rows", mr_type_name(type)); goto done; }
    for (size_t c = 0; c < copies; c++) memcpy(big + c * mat_bytes, w->data, mat_bytes);
    if (mr_repack_applies(type, cols) && !(rp = mr_repack_make(pool, big, type, cols, big_rows, &err)) && err) goto done;
    for (int64_t i = 0; i < cols * nc; i++) x[i] = (float)((i * 7919 % 2001) - 1000) * 1e-3f;
    /* pass 0: one column over the 256 MiB; 1: 64 columns, 2: exp_cols columns, over one copy */
    for (int pass = 0; pass < 3; pass++) {
        int64_t ncols = pass == 0 ? 1 : pass == 1 ? nc : exp_cols, r = pass ? rows : big_rows;
        mr_mat m = {.data = big, .type = type, .rows = r, .cols = cols, .name = "plan", .rp = rp};
        mr_matmul_task task = {.w = &m, .X = x, .ncols = ncols, .Y = y};
        long reps = 0;
        double t0 = mr_now(), t, slice = pass ? seconds / 4 : seconds / 2;
        do {
            if (mr_matmul_many(pool, &task, 1)) goto done;
            reps++;
            t = mr_now() - t0;
        } while (t < slice || reps < 3);
        if (pass) out[pass] = 2.0 * (double)r * (double)cols * (double)ncols * (double)reps / t / 1e9;
        else out[0] = (double)big_bytes * (double)reps / t / 1e9;
    }
    rc = 0;
done:
    mr_repack_free(rp);
    if (big) mr_big_free(big, big_bytes);
    free(x);
    free(y);
    return rc;
}

/* every type the model multiplies, then the rates weighted by the bytes / weights a token has of each */
static int plan_cpu(const char *path, const mr_plan_model *pm, mr_pool *pool, double seconds, mr_plan_machine *mc) {
    mr_gguf *g = mr_gguf_open(path);
    if (!g) return -1;
    /* a 512-token batch routes 512 x top-k rows over the experts: an expert's columns */
    double ec = pm->n_expert > 0 ? 512.0 * pm->n_expert_used / pm->n_expert : 64;
    mc->exp_cols = ec < 1 ? 1 : ec > 64 ? 64 : (int)(ec + 0.5);
    double tb = 0, tp = 0, sb = 0, sp = 0;
    for (int i = 0; i < pm->n_types; i++) {
        double r[3];
        if (plan_cpu_type(g, pm->type[i], mc->exp_cols, pool, seconds / pm->n_types, r)) {
            mr_gguf_close(g);
            return -1;
        }
        mc->gemv_gbs[i] = r[0], mc->gemm_gflops[i] = r[1], mc->gemm_exp_gflops[i] = r[2];
        if (r[0] > 0) { tb += pm->type_bytes[i] / r[0]; sb += pm->type_bytes[i]; }
        double dense = pm->type_params[i] - pm->type_exp_params[i], routed = pm->type_exp_params[i];
        if (r[1] > 0 && r[2] > 0) { tp += dense / r[1] + routed / r[2]; sp += dense + routed; }
    }
    mr_gguf_close(g);
    mc->cpu_gemv_gbs = tb > 0 ? sb / tb : 0;
    mc->cpu_gemm_gflops = tp > 0 ? sp / tp : 0;
    if (mc->cpu_gemv_gbs <= 0) { mr_set_error("%s: no weight matrix to time", path); return -1; }
    return 0;
}

int mr_plan_measure(const char *path, const mr_plan_model *pm, int threads, double seconds, mr_plan_machine *mc) {
    memset(mc, 0, sizeof *mc);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    mc->cores = ncpu > 0 ? (int)ncpu : 1;
    mc->threads = threads > 0 ? threads : mr_cpu_default_threads();
    if (mc->threads <= 0) mc->threads = 1;
    mr_pool *pool = mr_pool_create(mc->threads);
    if (!pool) return -1;
    int rc = -1;
    mc->dram_gbs = plan_dram(pool, seconds / 3);
    if (mc->dram_gbs <= 0) { mr_set_error("out of memory measuring DRAM bandwidth"); goto done; }
    if (plan_cpu(path, pm, pool, seconds / 3, mc)) goto done;
    /* the pager's reads: 1 MiB jobs, 8 I/O threads, random offsets; about a third of the time at
     * 1 GB/s, at most a quarter of the file (a small file may sit in the page cache: O_DIRECT skips it) */
    uint64_t total = (uint64_t)(seconds / 3 * 1e9);
    if (total > pm->file_bytes / 4) total = pm->file_bytes / 4;
    if (total < (64u << 20)) total = 64u << 20;
    if (mr_disk_read_rate(path, 1u << 20, 8, total, 0, 4242u, &mc->disk_gbs, NULL)) {
        mc->disk_gbs = 0; /* no O_DIRECT (tmpfs, some file systems): the paged figures are not predicted */
        snprintf(mc->disk_note, sizeof mc->disk_note, "%s", mr_last_error());
    }
    rc = 0;
done:
    mr_pool_free(pool);
    return rc;
}

/* The default replacement policy's hit rate (%) on the routing trace of the trained kjv-moe
 * (../shared/golden/routing/kjv-moe.trace.bin: 57344 tokens, 4 layers, top-4 of 32) at cache sizes
 * of 5..90 % of all pairs, as `moerun cache-sim --policy hot --sizes 5,10,...,90` printed it. */
static const double plan_skew_frac[] = {0, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100};
static const double plan_skew_hit[] = {0, 5.52, 18.18, 27.55, 36.62, 43.62, 50.09, 62.07, 72.27, 81.00, 88.29,
                                       93.30, 97.45, 100};

double mr_plan_hit_skewed(double frac) {
    double p = frac * 100;
    if (p <= 0) return 0;
    if (p >= 100) return 1;
    int i = 1;
    while (plan_skew_frac[i] < p) i++;
    double a = plan_skew_frac[i - 1], b = plan_skew_frac[i];
    return (plan_skew_hit[i - 1] + (plan_skew_hit[i] - plan_skew_hit[i - 1]) * (p - a) / (b - a)) / 100;
}

void mr_plan_predict(const mr_plan_model *pm, const mr_plan_machine *mc, uint64_t arena, mr_plan_result *r) {
    memset(r, 0, sizeof *r);
    r->arena = arena;
    double bytes = pm->dense_per_token + pm->routed_per_token;
    double t_dram = mc->dram_gbs > 0 ? bytes / (mc->dram_gbs * 1e9) : 0;
    double t_cpu = mc->cpu_gemv_gbs > 0 ? bytes / (mc->cpu_gemv_gbs * 1e9) : 0;
    double t_res = t_dram > t_cpu ? t_dram : t_cpu;
    r->decode_res = t_res > 0 ? 1 / t_res : 0;
    r->decode_res_bound = t_cpu <= 1.15 * t_dram ? "DRAM" : "CPU";
    double flops = 2 * pm->active_params;
    r->prefill_res = mc->cpu_gemm_gflops > 0 && flops > 0 ? mc->cpu_gemm_gflops * 1e9 / flops : 0;
    uint64_t pairs = (uint64_t)pm->n_moe_layer * (uint64_t)pm->n_expert;
    if (!arena || !pm->slot_bytes || !pairs) { r->cache_frac = 1; r->hit_uniform = r->hit_skewed = 1; }
    else {
        double f = (double)(arena / pm->slot_bytes) / (double)pairs;
        r->cache_frac = f > 1 ? 1 : f;
        r->hit_uniform = r->cache_frac;
        r->hit_skewed = mr_plan_hit_skewed(r->cache_frac);
    }
    r->decode_paged_uniform = r->decode_paged_skewed = r->decode_res;
    r->prefill_paged = r->prefill_res;
    r->decode_paged_bound = r->decode_res_bound;
    r->prefill_bound = "CPU";
    if (r->cache_frac >= 1 || mc->disk_gbs <= 0) return;
    double rate = mc->disk_gbs * 1e9;
    double io_u = pm->routed_per_token * (1 - r->hit_uniform) / rate;
    double io_s = pm->routed_per_token * (1 - r->hit_skewed) / rate;
    r->decode_paged_uniform = 1 / (t_res + io_u);
    r->decode_paged_skewed = 1 / (t_res + io_s);
    if (io_u > t_res) r->decode_paged_bound = "disk";
    /* prefill: a batch of B tokens touches an expert with probability 1 - (1 - k/E)^B */
    double B = 512, k = pm->n_expert_used, E = pm->n_expert > 0 ? pm->n_expert : 1;
    double touched = 1 - pow(1 - k / E, B);
    double per_expert = pm->n_expert_used > 0 ? pm->routed_per_token / pm->n_expert_used : 0;
    double io_batch = per_expert * (double)pairs * touched * (1 - r->hit_uniform) / rate;
    double t_comp = r->prefill_res > 0 ? B / r->prefill_res : 0;
    if (io_batch > t_comp) { r->prefill_paged = B / io_batch; r->prefill_bound = "disk"; }
}
