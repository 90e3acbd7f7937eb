/* Writes a small seed corpus for the GGUF fuzzer into DIR: files from the writer covering every
 * value type, several tensor types and alignments, v2 and v3, plus the metadata of a shared
 * vocabulary with its long arrays cut short. */
#include "gguf/gguf.h"
#include "base/base.h"
#include "quant/quant.h"

#include <stdio.h>
#include <string.h>

static int seed_types(const char *path, uint32_t version, uint32_t align) {
    mr_gguf_writer *w = mr_gguf_writer_new();
    uint8_t u8 = 7, bt = 1; int8_t i8 = -3; uint16_t u16 = 9; int16_t i16 = -9; int64_t i64 = -1; double f64 = 2.5;
    mr_gguf_writer_set_version(w, version);
    mr_gguf_writer_set_str(w, "general.architecture", "llama");
    if (align) mr_gguf_writer_set_u32(w, "general.alignment", align);
    mr_gguf_writer_set_kv(w, "a.u8", MR_GGUF_U8, 0, 1, &u8);
    mr_gguf_writer_set_kv(w, "a.i8", MR_GGUF_I8, 0, 1, &i8);
    mr_gguf_writer_set_kv(w, "a.u16", MR_GGUF_U16, 0, 1, &u16);
    mr_gguf_writer_set_kv(w, "a.i16", MR_GGUF_I16, 0, 1, &i16);
    mr_gguf_writer_set_u32(w, "a.u32", 5);
    mr_gguf_writer_set_i32(w, "a.i32", -5);
    mr_gguf_writer_set_u64(w, "a.u64", 1ull << 40);
    mr_gguf_writer_set_kv(w, "a.i64", MR_GGUF_I64, 0, 1, &i64);
    mr_gguf_writer_set_f32(w, "a.f32", 1.5f);
    mr_gguf_writer_set_kv(w, "a.f64", MR_GGUF_F64, 0, 1, &f64);
    mr_gguf_writer_set_kv(w, "a.bool", MR_GGUF_BOOL, 0, 1, &bt);
    const char *toks[] = {"<s>", "</s>", "a", "b\n"};
    mr_gguf_writer_set_kv(w, "tokenizer.ggml.tokens", MR_GGUF_ARRAY, MR_GGUF_STRING, 4, toks);
    float sc[4] = {0, -1, -2, -3};
    mr_gguf_writer_set_kv(w, "tokenizer.ggml.scores", MR_GGUF_ARRAY, MR_GGUF_F32, 4, sc);
    int32_t tt[4] = {3, 3, 1, 1};
    mr_gguf_writer_set_kv(w, "tokenizer.ggml.token_type", MR_GGUF_ARRAY, MR_GGUF_I32, 4, tt);
    mr_gguf_writer_set_u32(w, "split.count", 1);
    static uint8_t data[4096];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 13);
    int64_t ne1[1] = {8}, ne2[2] = {32, 2}, ne3[3] = {256, 1, 2};
    mr_gguf_writer_add_tensor(w, "token_embd.weight", MR_TYPE_F32, 1, ne1, data);
    mr_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", MR_TYPE_Q8_0, 2, ne2, data);
    mr_gguf_writer_add_tensor(w, "blk.0.ffn_gate_exps.weight", MR_TYPE_Q4_K, 3, ne3, data);
    mr_gguf_writer_add_tensor(w, "blk.0.ffn_down_exps.weight", MR_TYPE_F16, 3, ne3, data);
    int rc = mr_gguf_writer_write(w, path, 1);
    mr_gguf_writer_free(w);
    return rc;
}

/* Metadata of a shared vocabulary with every array cut to its first 16 elements. */
static int seed_vocab(const char *src, const char *path) {
    mr_gguf *g = mr_gguf_open(src);
    if (!g) return -1;
    mr_gguf_writer *w = mr_gguf_writer_new();
    for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
        mr_gguf_kv kv = *mr_gguf_kv_at(g, i);
        if (kv.type == MR_GGUF_ARRAY && kv.n > 16) kv.n = 16;
        mr_gguf_writer_copy_kv(w, &kv);
    }
    int rc = mr_gguf_writer_write(w, path, 1);
    mr_gguf_writer_free(w);
    mr_gguf_close(g);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: make_seeds DIR [SHARED]\n"); return 1; }
    const char *shared = argc > 2 ? argv[2] : "../shared";
    char p[2048], s[2048];
    int rc = 0;
    snprintf(p, sizeof p, "%s/types-v3.gguf", argv[1]); rc |= seed_types(p, 3, 0);
    snprintf(p, sizeof p, "%s/types-v2-a64.gguf", argv[1]); rc |= seed_types(p, 2, 64);
    snprintf(p, sizeof p, "%s/types-a1.gguf", argv[1]); rc |= seed_types(p, 3, 1);
    const char *vocabs[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"};
    for (int i = 0; i < 2; i++) {
        snprintf(s, sizeof s, "%s/%s", shared, vocabs[i]);
        snprintf(p, sizeof p, "%s/vocab%d.gguf", argv[1], i);
        if (seed_vocab(s, p)) fprintf(stderr, "make_seeds: skipping %s: %s\n", s, mr_get_error());
    }
    if (rc) { fprintf(stderr, "make_seeds: %s\n", mr_get_error()); return 1; }
    return 0;
}
