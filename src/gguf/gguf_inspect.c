/* mr_inspect: a human-readable dump of a GGUF model (metadata, tensor table, totals per type and
 * routed-expert bytes vs the rest, the number that sizes the expert pager). */
#include "moerun_tools.h"
#include "gguf/gguf.h"
#include "base/base.h"
#include "quant/quant.h"

#include <inttypes.h>
#include <string.h>

#define ARRAY_SHOW 8   /* array elements printed before "..." */
#define STR_SHOW 80    /* string bytes printed before "..." */

static void put_str(FILE *out, const char *s, uint64_t len) {
    fputc('"', out);
    uint64_t n = len < STR_SHOW ? len : STR_SHOW;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 32 || c == 127) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
    fputc('"', out);
    if (len > n) fprintf(out, "... (%" PRIu64 " bytes)", len);
}

static void put_elem(FILE *out, int type, const void *arr, uint64_t i) {
    const uint8_t *p = (const uint8_t *)arr + i * (uint64_t)mr_gguf_vtype_size(type);
    switch (type) {
    case MR_GGUF_U8: fprintf(out, "%u", p[0]); break;
    case MR_GGUF_I8: fprintf(out, "%d", (int8_t)p[0]); break;
    case MR_GGUF_BOOL: fputs(p[0] ? "true" : "false", out); break;
    case MR_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); fprintf(out, "%u", v); break; }
    case MR_GGUF_I16: { int16_t v; memcpy(&v, p, 2); fprintf(out, "%d", v); break; }
    case MR_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); fprintf(out, "%" PRIu32, v); break; }
    case MR_GGUF_I32: { int32_t v; memcpy(&v, p, 4); fprintf(out, "%" PRId32, v); break; }
    case MR_GGUF_F32: { float v; memcpy(&v, p, 4); fprintf(out, "%.9g", v); break; }
    case MR_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); fprintf(out, "%" PRIu64, v); break; }
    case MR_GGUF_I64: { int64_t v; memcpy(&v, p, 8); fprintf(out, "%" PRId64, v); break; }
    case MR_GGUF_F64: { double v; memcpy(&v, p, 8); fprintf(out, "%.17g", v); break; }
    default: fputs("?", out);
    }
}

static void put_value(FILE *out, const mr_gguf_kv *kv) {
    switch (kv->type) {
    case MR_GGUF_STRING: put_str(out, kv->v.str, strlen(kv->v.str)); break;
    case MR_GGUF_BOOL: fputs(kv->v.u64 ? "true" : "false", out); break;
    case MR_GGUF_F32: fprintf(out, "%.9g", kv->v.f64); break;
    case MR_GGUF_F64: fprintf(out, "%.17g", kv->v.f64); break;
    case MR_GGUF_I8: case MR_GGUF_I16: case MR_GGUF_I32: case MR_GGUF_I64: fprintf(out, "%" PRId64, kv->v.i64); break;
    case MR_GGUF_ARRAY: {
        uint64_t n = kv->n < ARRAY_SHOW ? kv->n : ARRAY_SHOW;
        fputc('[', out);
        for (uint64_t i = 0; i < n; i++) {
            if (i) fputs(", ", out);
            if (kv->arr_type == MR_GGUF_STRING) put_str(out, ((char *const *)kv->arr)[i], kv->arr_str_len[i]);
            else put_elem(out, kv->arr_type, kv->arr, i);
        }
        if (kv->n > n) fputs(", ...", out);
        fputc(']', out);
        break;
    }
    default: fprintf(out, "%" PRIu64, kv->v.u64);
    }
}

static void put_size(FILE *out, uint64_t b) {
    if (b >= (1ull << 30)) fprintf(out, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) fprintf(out, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024) fprintf(out, "%.2f KiB", (double)b / 1024);
    else fprintf(out, "%" PRIu64 " B", b);
}

/* Routed experts: the stacked per-expert FFN tensors (ffn_{gate,up,down}_exps, also fused gate_up). */
int mr_gguf_is_routed_expert(const char *name) {
    return strstr(name, "ffn_gate_exps") || strstr(name, "ffn_up_exps") || strstr(name, "ffn_down_exps") ||
           strstr(name, "ffn_gate_up_exps");
}

void mr_gguf_print(const mr_gguf *g, const char *path, FILE *out) {
    uint64_t total_file = 0;
    for (int s = 0; s < mr_gguf_n_shards(g); s++) total_file += mr_gguf_shard_size(g, s);
    fprintf(out, "file: %s\n", path);
    fprintf(out, "gguf version %u, alignment %" PRIu64 ", %d shard%s, %" PRIu64 " metadata entries, %" PRIu64
                 " tensors, ", mr_gguf_version(g), mr_gguf_alignment(g), mr_gguf_n_shards(g),
            mr_gguf_n_shards(g) == 1 ? "" : "s", mr_gguf_n_kv(g), mr_gguf_n_tensors(g));
    put_size(out, total_file);
    fputc('\n', out);
    if (mr_gguf_n_shards(g) > 1) {
        fprintf(out, "\nshards:\n");
        for (int s = 0; s < mr_gguf_n_shards(g); s++)
            fprintf(out, "  %d  %s  %" PRIu64 " bytes, %" PRIu64 " tensors, data at %" PRIu64 "\n", s,
                    mr_gguf_shard_path(g, s), mr_gguf_shard_size(g, s), mr_gguf_shard_n_tensors(g, s),
                    mr_gguf_shard_data_offset(g, s));
    }

    fprintf(out, "\nmetadata:\n");
    int kw = 0;
    for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
        int l = (int)strlen(mr_gguf_kv_at(g, i)->key);
        if (l > kw) kw = l;
    }
    if (kw > 48) kw = 48;
    for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
        const mr_gguf_kv *kv = mr_gguf_kv_at(g, i);
        char type[48];
        if (kv->type == MR_GGUF_ARRAY)
            snprintf(type, sizeof type, "%s[%" PRIu64 "]", mr_gguf_vtype_name(kv->arr_type), kv->n);
        else snprintf(type, sizeof type, "%s", mr_gguf_vtype_name(kv->type));
        fprintf(out, "  %-*s %-14s ", kw, kv->key, type);
        put_value(out, kv);
        fputc('\n', out);
    }

    fprintf(out, "\ntensors:\n");
    int nw = 4;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        int l = (int)strlen(mr_gguf_tensor_at(g, i)->name);
        if (l > nw) nw = l;
    }
    if (nw > 64) nw = 64;
    fprintf(out, "  %-*s %-8s %-20s %14s %5s %12s\n", nw, "name", "type", "dims", "bytes", "shard", "offset");
    uint64_t by_type_n[MR_TYPE_COUNT] = {0}, by_type_b[MR_TYPE_COUNT] = {0}, exp_b = 0, exp_n = 0, all_b = 0;
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        char dims[64];
        int p = 0;
        for (int d = 0; d < t->n_dims; d++)
            p += snprintf(dims + p, sizeof dims - (size_t)p, d ? " x %" PRId64 : "%" PRId64, t->ne[d]);
        fprintf(out, "  %-*s %-8s %-20s %14" PRIu64 " %5d %12" PRIu64 "\n", nw, t->name, mr_type_name(t->type), dims,
                t->nbytes, t->shard, t->offset);
        by_type_n[t->type]++;
        by_type_b[t->type] += t->nbytes;
        all_b += t->nbytes;
        if (mr_gguf_is_routed_expert(t->name)) { exp_b += t->nbytes; exp_n++; }
    }

    fprintf(out, "\ntotals by type:\n");
    for (int ty = 0; ty < MR_TYPE_COUNT; ty++) {
        if (!by_type_n[ty]) continue;
        fprintf(out, "  %-8s %6" PRIu64 " tensors %16" PRIu64 " bytes  (", mr_type_name(ty), by_type_n[ty], by_type_b[ty]);
        put_size(out, by_type_b[ty]);
        fprintf(out, ")\n");
    }
    fprintf(out, "  %-8s %6" PRIu64 " tensors %16" PRIu64 " bytes  (", "all", mr_gguf_n_tensors(g), all_b);
    put_size(out, all_b);
    fprintf(out, ")\n\n");
    fprintf(out, "routed experts: %" PRIu64 " bytes (", exp_b);
    put_size(out, exp_b);
    fprintf(out, ", %.1f%%) in %" PRIu64 " tensors\n", all_b ? 100.0 * (double)exp_b / (double)all_b : 0.0, exp_n);
    fprintf(out, "everything else: %" PRIu64 " bytes (", all_b - exp_b);
    put_size(out, all_b - exp_b);
    fprintf(out, ")\n");
}

int mr_inspect(const char *path, FILE *out) {
    mr_gguf *g = mr_gguf_open(path);
    if (!g) return -1;
    mr_gguf_print(g, path, out);
    mr_gguf_close(g);
    if (ferror(out)) { mr_set_error("%s: error writing the output", path); return -1; }
    return 0;
}
