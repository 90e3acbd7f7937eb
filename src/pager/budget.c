/* --ram-budget (moerun.h): sizes ("8G", "1.5GiB"), "off", and "auto" from the memory available (and
 * the memory cgroup's room) and the model file's sizes as the pager sees them (without loading it). */
#include "moerun.h"
#include "pager/pager.h"
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sizes ---- */
int mr_size_parse(const char *s, uint64_t *out) {
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

uint64_t mr_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    uint64_t avail = (uint64_t)kb * 1024, room = mr_cgroup_mem_room();
    return room < avail ? room : avail; /* a memory cgroup (container, systemd scope) allows less */
}

/* the routed-expert tensors of a GGUF by name, as the architectures load them */
static int expert_layers(const mr_gguf *g, mr_pager_layer **out, int *n_layers) {
    static const char *mats[MR_PAGER_MATS] = {"gate", "up", "down"};
    int n = 0;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        int l;
        if (sscanf(mr_gguf_tensor_at(g, i)->name, "blk.%d.", &l) == 1 && l >= n && l < 100000) n = l + 1;
    }
    mr_pager_layer *pl = mr_calloc((size_t)(n > 0 ? n : 1), sizeof *pl);
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

int mr_ram_budget_auto(const char *model_path, uint64_t avail, int n_ctx, uint64_t *out) {
    *out = 0;
    mr_pager_model_info mi;
    if (mr_pager_model_sizes(model_path, &mi)) return -1;
    if (!mi.expert_bytes) return 0; /* dense model: nothing to page */
    if (!avail && !(avail = mr_mem_available())) { mr_set_error("--ram-budget auto: cannot read MemAvailable from /proc/meminfo"); return -1; }
    /* everything that stays resident: dense weights (page cache), KV cache, scratch, and a margin */
    uint64_t dense = mi.total_bytes - mi.expert_bytes;
    uint64_t kv = mi.kv_bytes_per_token * (uint64_t)(n_ctx > 0 ? n_ctx : 4096);
    uint64_t scratch = 256ull << 20, margin = avail / 10 > (512ull << 20) ? avail / 10 : (512ull << 20);
    uint64_t need = dense + kv + scratch + margin;
    uint64_t budget = avail > need ? avail - need : 0;
    if (budget >= mi.expert_bytes) { *out = 0; return 0; } /* everything fits: no paging */
    if (budget < mi.min_budget) {
        char a[32], b[32];
        mr_format_bytes(a, sizeof a, (double)budget);
        mr_format_bytes(b, sizeof b, (double)mi.min_budget);
        mr_set_error("--ram-budget auto: only %s left for experts after dense weights, KV cache and a margin; "
                     "the minimum is %s", a, b);
        return -1;
    }
    *out = budget;
    return 0;
}

int mr_ram_budget_parse(const char *arg, const char *model_path, int n_ctx, uint64_t *out) {
    *out = 0;
    if (!strcmp(arg, "0") || !strcmp(arg, "off") || !strcmp(arg, "none")) return 0;
    if (!strcmp(arg, "auto")) return mr_ram_budget_auto(model_path, 0, n_ctx, out);
    if (mr_size_parse(arg, out) || *out == 0) {
        mr_set_error("bad RAM budget '%s' (want a size like 8G or 512M, or auto)", arg);
        return -1;
    }
    return 0;
}
