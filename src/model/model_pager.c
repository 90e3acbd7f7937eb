/* A loaded model's pager seen from the public API (moerun.h, moerun_tools.h): its counters and the
 * Belady / static-optimum bounds of the uses it recorded. The model layer reads its own pager here
 * (model -> pager, never upwards). */
#include "moerun_tools.h"
#include "model/model.h"
#include "pager/pager.h"
#include "base/base.h"

#include <string.h>

int mr_model_pager_stats(const mr_model *m, mr_pager_stats *out) {
    memset(out, 0, sizeof *out);
    out->layer_hit_min = out->layer_hit_max = -1;
    out->layer_min = out->layer_max = -1;
    if (!m->pager) { mr_set_error("model has no routed experts (no pager)"); return -1; }
    const mr_pager *p = m->pager;
    out->paging = mr_pager_paging(p);
    out->expert_bytes = mr_pager_expert_bytes(m->exp_layers, m->n_exp_layers);
    if (!out->paging) return 0;
    out->n_slots = mr_pager_n_slots(p);
    out->direct_io = mr_pager_uses_direct_io(p);
    out->huge_pages = mr_pager_huge_pages(p);
    for (int l = 0; l < m->n_exp_layers; l++)
        for (int k = 0; k < MR_PAGER_MATS; k++) {
            out->expert_mats += m->exp_layers[l].mat[k] != NULL;
            out->repacked_mats += m->slot_rp && m->slot_rp[l * MR_PAGER_MATS + k];
        }
    out->slot_bytes = mr_pager_slot_bytes(m->gguf, m->exp_layers, m->n_exp_layers);
    out->arena_bytes = out->slot_bytes * (uint64_t)out->n_slots;
    out->min_budget = mr_pager_min_budget(m->gguf, m->exp_layers, m->n_exp_layers);
    mr_pager_counters c;
    mr_pager_counters_get(p, &c);
    out->hits = c.hits;
    out->misses = c.misses;
    out->reads = c.reads;
    out->bytes_read = c.bytes_read;
    out->rounds = c.rounds;
    out->stall_s = c.stall_s;
    out->io_busy_s = c.io_busy_s;
    out->hint_reads = c.hint_reads;
    out->hint_used = c.hint_used;
    out->hint_cancelled = c.hint_cancelled;
    out->hint_wasted = c.hint_wasted;
    out->miss_bytes = c.miss_bytes;
    out->decode_evals = c.decode_evals;
    out->decode_miss_bytes = c.decode_miss_bytes;
    out->decode_bytes_read = c.decode_bytes_read;
    out->decode_s = c.decode_s;
    out->decode_io_busy_s = c.decode_io_busy_s;
    for (int l = 0; l < m->n_layer; l++) {
        uint64_t h, mi;
        if (mr_pager_layer_counters(p, l, &h, &mi) || h + mi == 0) continue;
        double r = (double)h / (double)(h + mi);
        if (out->layer_min < 0 || r < out->layer_hit_min) { out->layer_hit_min = r; out->layer_min = l; }
        if (out->layer_max < 0 || r > out->layer_hit_max) { out->layer_hit_max = r; out->layer_max = l; }
    }
    return 0;
}

double mr_pager_io_efficiency(const mr_pager_stats *now, const mr_pager_stats *prev, double *need_s, double *rate) {
    mr_pager_stats zero;
    if (!prev) { memset(&zero, 0, sizeof zero); prev = &zero; }
    const double dec_s = now->decode_s - prev->decode_s;
    /* the device's rate as the run saw it: the higher of the whole run's and this decode's read rate
     * while busy (a run's prefill keeps many reads in flight; a short decode may reach more) */
    const double busy = now->decode_io_busy_s - prev->decode_io_busy_s;
    const double r_run = now->io_busy_s > 0 ? (double)now->bytes_read / now->io_busy_s : 0;
    const double r_dec = busy > 0 ? (double)(now->decode_bytes_read - prev->decode_bytes_read) / busy : 0;
    const double r = r_run > r_dec ? r_run : r_dec;
    const double need = r > 0 ? (double)(now->decode_miss_bytes - prev->decode_miss_bytes) / r : 0;
    if (need_s) *need_s = need;
    if (rate) *rate = r;
    return dec_s > 0 && r > 0 && now->decode_evals > prev->decode_evals ? need / dec_s : -1;
}

double mr_model_pager_belady(const mr_model *m, int *truncated) {
    if (truncated) *truncated = 0;
    if (!m->pager) return -1;
    return mr_pager_belady_hit_rate(m->pager, truncated);
}

double mr_model_pager_static(const mr_model *m, uint64_t from, int *truncated) {
    if (truncated) *truncated = 0;
    if (!m->pager || from > INT64_MAX) return -1;
    return mr_pager_static_hit_rate(m->pager, (int64_t)from, truncated);
}
