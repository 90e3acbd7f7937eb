/* libFuzzer target for the GGUF reader: parse the input as a GGUF image; if accepted, walk every
 * metadata entry and tensor through the public accessors, the typed getters and the inspect
 * printer, and touch the first and last byte of every tensor's data (which must lie in the input).
 * Built and run by `make fuzz` (clang -fsanitize=fuzzer,address,undefined). */
#include "gguf/gguf.h"
#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!devnull) devnull = fopen("/dev/null", "w");
    mr_clear_error();
    mr_gguf *g = mr_gguf_open_memory(data, size, "fuzz");
    if (!g) {
        /* every rejection carries a message (mr_get_error() says "unknown error" when none was set) */
        if (!strcmp(mr_get_error(), "unknown error")) abort();
        return 0;
    }
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
        const mr_gguf_kv *kv = mr_gguf_kv_at(g, i);
        if (mr_gguf_find_kv(g, kv->key) != kv) abort();
        uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; float f; int b; const char *s;
        const void *arr; uint64_t n;
        sink += (uint64_t)mr_gguf_get_u32(g, kv->key, &u32) + (uint64_t)mr_gguf_get_i32(g, kv->key, &i32);
        sink += (uint64_t)mr_gguf_get_u64(g, kv->key, &u64) + (uint64_t)mr_gguf_get_i64(g, kv->key, &i64);
        sink += (uint64_t)mr_gguf_get_f32(g, kv->key, &f) + (uint64_t)mr_gguf_get_bool(g, kv->key, &b);
        sink += (uint64_t)mr_gguf_get_str(g, kv->key, &s);
        if (kv->type == MR_GGUF_ARRAY && mr_gguf_get_arr(g, kv->key, kv->arr_type, &arr, &n) == 0) {
            if (n != kv->n) abort();
            if (n && kv->arr_type == MR_GGUF_STRING) sink += (uint8_t)((char *const *)arr)[n - 1][0];
            else if (n) sink += ((const uint8_t *)arr)[n * (uint64_t)mr_gguf_vtype_size(kv->arr_type) - 1];
        }
    }
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        if (mr_gguf_find_tensor(g, t->name) != t) abort();
        const uint8_t *p = t->data;
        if (p < data || t->file_offset + t->nbytes > size || p != data + t->file_offset || t->nbytes == 0) abort();
        sink += p[0] + p[t->nbytes - 1];
    }
    if (devnull) mr_gguf_print(g, "fuzz", devnull);
    (void)sink;
    mr_gguf_close(g);
    return 0;
}
