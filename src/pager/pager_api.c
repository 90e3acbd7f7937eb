/* Public side of the expert pager (moerun.h): statistics of a loaded model's pager, the JSON lines
 * of --stats-file, the summary printed at exit, and --ram-budget parsing (sizes and "auto"). */
#include "moerun.h"
#include "model/model.h"
#include "pager/pager.h"
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int mr_model_pager_stats(const mr_model *m, mr_pager_stats *out) {
    memset(out, 0, sizeof *out);
    out->layer_hit_min = out->layer_hit_max = -1;
    out->layer_min = out->layer_max = -1;
    if (!m->pager) { mr_set_error("model has no routed experts (no pager)"); return -1; }
    const mr_pager *p = m->pager;
    out->paging = mr_pager_paging(p);
    out->expert_bytes = mr_pager_expert_bytes(m->exp_layers, m->n_layer);
    if (!out->paging) return 0;
    out->n_slots = mr_pager_n_slots(p);
    out->direct_io = mr_pager_uses_direct_io(p);
    out->slot_bytes = mr_pager_slot_bytes(m->gguf, m->exp_layers, m->n_layer);
    out->arena_bytes = out->slot_bytes * (uint64_t)out->n_slots;
    out->min_budget = mr_pager_min_budget(m->gguf, m->exp_layers, m->n_layer);
    mr_pager_counters c;
    mr_pager_counters_get(p, &c);
    out->hits = c.hits;
    out->misses = c.misses;
    out->reads = c.reads;
    out->bytes_read = c.bytes_read;
    out->rounds = c.rounds;
    out->stall_s = c.stall_s;
    out->io_busy_s = c.io_busy_s;
    for (int l = 0; l < m->n_layer; l++) {
        uint64_t h, mi;
        if (mr_pager_layer_counters(p, l, &h, &mi) || h + mi == 0) continue;
        double r = (double)h / (double)(h + mi);
        if (out->layer_min < 0 || r < out->layer_hit_min) { out->layer_hit_min = r; out->layer_min = l; }
        if (out->layer_max < 0 || r > out->layer_hit_max) { out->layer_hit_max = r; out->layer_max = l; }
    }
    return 0;
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

int mr_pager_stats_json(FILE *f, long token, const mr_pager_stats *now, const mr_pager_stats *prev) {
    mr_pager_stats zero;
    if (!prev) { memset(&zero, 0, sizeof zero); prev = &zero; }
    int n = fprintf(f,
                    "{\"token\":%ld,\"hits\":%llu,\"misses\":%llu,\"reads\":%llu,\"bytes_read\":%llu,"
                    "\"stall_ms\":%.3f,\"total_hits\":%llu,\"total_misses\":%llu,\"total_bytes_read\":%llu}\n",
                    token, (unsigned long long)(now->hits - prev->hits), (unsigned long long)(now->misses - prev->misses),
                    (unsigned long long)(now->reads - prev->reads),
                    (unsigned long long)(now->bytes_read - prev->bytes_read), 1e3 * (now->stall_s - prev->stall_s),
                    (unsigned long long)now->hits, (unsigned long long)now->misses,
                    (unsigned long long)now->bytes_read);
    if (n < 0) { mr_set_error("stats file: write failed: %s", strerror(errno)); return -1; }
    return 0;
}

uint64_t mr_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024; /* Linux: KiB */
}

static void human(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, n, "%.1f KiB", b / 1024.0);
}

void mr_pager_print_summary(FILE *f, const mr_model *m, long n_prefill, double prefill_s, long n_decode,
                            double decode_s) {
    mr_pager_stats s;
    char a[32], b[64], c[32], d[32];
    if (n_prefill > 0 && prefill_s > 0) fprintf(f, "pager: prefill %.2f tok/s (%ld tokens)\n", n_prefill / prefill_s, n_prefill);
    if (n_decode > 0 && decode_s > 0) fprintf(f, "pager: decode %.2f tok/s (%ld tokens)\n", n_decode / decode_s, n_decode);
    human(a, sizeof a, (double)mr_peak_rss_bytes());
    if (mr_model_pager_stats(m, &s) || !s.paging) {
        fprintf(f, "pager: off (experts served from the mmap), peak RSS %s\n", a);
        return;
    }
    human(b, sizeof b, (double)s.arena_bytes);
    human(c, sizeof c, (double)s.slot_bytes);
    human(d, sizeof d, (double)s.expert_bytes);
    fprintf(f, "pager: %d slots of %s = %s for %s of experts (%s reads), peak RSS %s\n", s.n_slots, c, b, d,
            s.direct_io ? "O_DIRECT" : "buffered", a);
    uint64_t acc = s.hits + s.misses;
    long toks = n_prefill + n_decode;
    human(a, sizeof a, (double)s.bytes_read);
    if (toks > 0) {
        char t[48];
        human(t, sizeof t, (double)s.bytes_read / (double)toks);
        snprintf(b, sizeof b, " (%s/token)", t);
    } else b[0] = 0;
    fprintf(f, "pager: hot %.1f%% cold %.1f%% of %llu expert uses, read %s%s, read stall %.2f s, I/O busy %.2f s (%.2f GB/s)\n",
            acc ? 100.0 * (double)s.hits / (double)acc : 0, acc ? 100.0 * (double)s.misses / (double)acc : 0,
            (unsigned long long)acc, a, b, s.stall_s, s.io_busy_s,
            s.io_busy_s > 0 ? (double)s.bytes_read / s.io_busy_s / 1e9 : 0.0);
    int trunc = 0;
    double bel = mr_model_pager_belady(m, &trunc);
    fprintf(f, "pager: per-layer hit rate %.1f%% (layer %d) .. %.1f%% (layer %d); Belady (same trace and slots) ",
            100 * s.layer_hit_min, s.layer_min, 100 * s.layer_hit_max, s.layer_max);
    if (bel >= 0) fprintf(f, "%.1f%%%s", 100 * bel, trunc ? " (over the first 4M uses)" : "");
    else fprintf(f, "-");
    double st = mr_model_pager_static(m, 0, &trunc);
    if (st >= 0) fprintf(f, ", static optimum %.1f%%\n", 100 * st);
    else fprintf(f, "\n");
}

void mr_pager_print_delta(FILE *f, const mr_model *m, const char *label, const mr_pager_stats *now, const mr_pager_stats *prev,
                          long n_tokens, double seconds) {
    uint64_t h = now->hits - prev->hits, mi = now->misses - prev->misses, by = now->bytes_read - prev->bytes_read;
    double st = now->stall_s - prev->stall_s, busy = now->io_busy_s - prev->io_busy_s;
    int trunc = 0;
    double so = m ? mr_model_pager_static(m, prev->hits + prev->misses, &trunc) : -1;
    fprintf(f, "pager: %s: %ld tokens in %.2f s (%.2f tok/s), hit %.1f%% of %llu uses (static optimum %.1f%%), "
               "read %.2f GiB (%.1f MiB/token), read stall %.2f s, I/O busy %.2f s (%.2f GB/s while busy)\n",
            label, n_tokens, seconds, seconds > 0 ? (double)n_tokens / seconds : 0.0,
            h + mi ? 100.0 * (double)h / (double)(h + mi) : 0.0, (unsigned long long)(h + mi),
            so >= 0 && !trunc ? 100 * so : -1.0,
            (double)by / (1024.0 * 1024 * 1024), n_tokens > 0 ? (double)by / (1024.0 * 1024) / (double)n_tokens : 0.0,
            st, busy, busy > 0 ? (double)by / busy / 1e9 : 0.0);
}

/* ---- --ram-budget ---- */
static int parse_size(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'I') end++;
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end || v * mul >= 1.8e19) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

static uint64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* the routed-expert tensors of a GGUF by name, as the architectures load them */
static int expert_layers(const mr_gguf *g, mr_pager_layer **out, int *n_layers) {
    static const char *mats[MR_PAGER_MATS] = {"gate", "up", "down"};
    int n = 0;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        int l;
        if (sscanf(mr_gguf_tensor_at(g, i)->name, "blk.%d.", &l) == 1 && l >= n && l < 100000) n = l + 1;
    }
    mr_pager_layer *pl = calloc((size_t)(n > 0 ? n : 1), sizeof *pl);
    if (!pl) { mr_set_error("out of memory"); return -1; }
    for (int l = 0; l < n; l++)
        for (int m = 0; m < MR_PAGER_MATS; m++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", l, mats[m]);
            const mr_gguf_tensor *t = mr_gguf_find_tensor(g, name);
            if (t && t->n_dims == 3) pl[l].mat[m] = t;
        }
    *out = pl;
    *n_layers = n;
    return 0;
}

int mr_pager_model_sizes(const char *model_path, mr_pager_model_info *info) {
    memset(info, 0, sizeof *info);
    mr_gguf *g = mr_gguf_open(model_path);
    if (!g) return -1;
    mr_pager_layer *pl = NULL;
    int n = 0, rc = -1;
    if (expert_layers(g, &pl, &n)) goto done;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) info->total_bytes += mr_gguf_tensor_at(g, i)->nbytes;
    info->expert_bytes = mr_pager_expert_bytes(pl, n);
    if (info->expert_bytes) {
        info->slot_bytes = mr_pager_slot_bytes(g, pl, n);
        info->min_budget = mr_pager_min_budget(g, pl, n);
        if (!info->slot_bytes) goto done;
    }
    /* KV cache estimate: F16 K and V for every layer and position */
    const char *arch = NULL;
    if (mr_gguf_get_str(g, "general.architecture", &arch) == 0) {
        char key[128];
        uint32_t nl = 0, hkv = 0, hd = 0, kl = 0, vl = 0, d = 0;
#define GETU(suffix, var) do { snprintf(key, sizeof key, "%s." suffix, arch); \
        if (mr_gguf_find_kv(g, key)) mr_gguf_get_u32(g, key, &var); } while (0)
        GETU("block_count", nl);
        GETU("attention.head_count_kv", hkv);
        GETU("attention.head_count", hd);
        GETU("attention.key_length", kl);
        GETU("attention.value_length", vl);
        GETU("embedding_length", d);
#undef GETU
        if (!hkv) hkv = hd;
        if (hd && d && !kl) kl = d / hd;
        if (!vl) vl = kl;
        info->kv_bytes_per_token = 2ull * nl * hkv * (kl + vl);
    }
    rc = 0;
done:
    free(pl);
    mr_gguf_close(g);
    return rc;
}

int mr_ram_budget_parse(const char *arg, const char *model_path, int n_ctx, uint64_t *out) {
    *out = 0;
    if (!strcmp(arg, "0") || !strcmp(arg, "off") || !strcmp(arg, "none")) return 0;
    if (strcmp(arg, "auto")) {
        if (parse_size(arg, out) || *out == 0) {
            mr_set_error("bad RAM budget '%s' (want a size like 8G or 512M, or auto)", arg);
            return -1;
        }
        return 0;
    }
    mr_pager_model_info mi;
    if (mr_pager_model_sizes(model_path, &mi)) return -1;
    if (!mi.expert_bytes) return 0; /* dense model: nothing to page */
    uint64_t avail = mem_available(), room = mr_cgroup_mem_room();
    if (!avail) { mr_set_error("--ram-budget auto: cannot read MemAvailable from /proc/meminfo"); return -1; }
    if (room < avail) avail = room; /* a memory cgroup (container, systemd scope) allows less */
    /* everything that stays resident: dense weights (page cache), KV cache, scratch, and a margin */
    uint64_t dense = mi.total_bytes - mi.expert_bytes;
    uint64_t kv = mi.kv_bytes_per_token * (uint64_t)(n_ctx > 0 ? n_ctx : 4096);
    uint64_t scratch = 256ull << 20, margin = avail / 10 > (512ull << 20) ? avail / 10 : (512ull << 20);
    uint64_t need = dense + kv + scratch + margin;
    uint64_t budget = avail > need ? avail - need : 0;
    if (budget >= mi.expert_bytes) { *out = 0; return 0; } /* everything fits: no paging */
    if (budget < mi.min_budget) {
        char a[32], b[32];
        human(a, sizeof a, (double)budget);
        human(b, sizeof b, (double)mi.min_budget);
        mr_set_error("--ram-budget auto: only %s left for experts after dense weights, KV cache and a margin; "
                     "the minimum is %s", a, b);
        return -1;
    }
    *out = budget;
    return 0;
}
