/* GGUF reader/writer (versions 2 and 3, split models). Every count, length and offset read from a
 * file is checked against the file size before use; failures return NULL/-1 with mr_set_error()
 * naming the file and the problem. Tensor data is memory-mapped read-only. */
#ifndef MR_GGUF_H
#define MR_GGUF_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum mr_gguf_vtype {
    MR_GGUF_U8 = 0, MR_GGUF_I8 = 1, MR_GGUF_U16 = 2, MR_GGUF_I16 = 3, MR_GGUF_U32 = 4, MR_GGUF_I32 = 5,
    MR_GGUF_F32 = 6, MR_GGUF_BOOL = 7, MR_GGUF_STRING = 8, MR_GGUF_ARRAY = 9, MR_GGUF_U64 = 10,
    MR_GGUF_I64 = 11, MR_GGUF_F64 = 12, MR_GGUF_VTYPE_COUNT
};

typedef struct {
    char *key;
    int type;           /* enum mr_gguf_vtype */
    int arr_type;       /* element type when type == MR_GGUF_ARRAY (never a nested array) */
    uint64_t n;         /* array length (1 for scalars) */
    union {
        uint64_t u64; int64_t i64; double f64; /* scalars widened; see mr_gguf_* getters */
        char *str;                             /* MR_GGUF_STRING, NUL-terminated copy */
    } v;
    void *arr;          /* arrays: n elements of the element's natural size; string arrays: char *[n] */
    uint64_t *arr_str_len; /* string arrays: byte length of each string (strings may hold NUL) */
} mr_gguf_kv;

#define MR_GGUF_MAX_DIMS 4
typedef struct {
    char *name;
    int type;           /* ggml type id (src/quant/quant.h enum mr_type) */
    int n_dims;
    int64_t ne[MR_GGUF_MAX_DIMS]; /* ne[0] = row length (fastest), unused dims = 1 */
    uint64_t nbytes;
    int shard;          /* index into the shards of a split model (0 for a single file) */
    uint64_t offset;    /* offset of the data inside its shard's data section */
    uint64_t file_offset; /* absolute offset in the shard file (for pread) */
    const void *data;   /* pointer into the read-only mapping */
} mr_gguf_tensor;

typedef struct mr_gguf mr_gguf;

mr_gguf *mr_gguf_open(const char *path);     /* a single file or the first shard of a split model */
void mr_gguf_close(mr_gguf *g);
/* Parse a GGUF image held in memory (single file only; `data` must outlive the handle; `name` is
 * used in error messages). Used by the fuzzer and tests. */
mr_gguf *mr_gguf_open_memory(const void *data, size_t size, const char *name);
/* Shard i (1-based) of n of a split model written as PATH (ending in .gguf):
 * PATH-without-.gguf + "-%05d-of-%05d.gguf". -1 if path does not end in .gguf or buf is too small. */
int mr_gguf_split_path(char *buf, size_t size, const char *path, int i, int n);

/* -1 (error set) if a shard's file is now smaller than when it was mapped (map_guard.c). */
int mr_gguf_check_files(const mr_gguf *g);
/* The SIGBUS guard's registry of mapped files (map_guard.c; mr_file_guard_install in moerun.h). */
void mr_map_guard_add(const void *base, size_t size, const char *path, int fd);
void mr_map_guard_remove(const void *base);

uint32_t mr_gguf_version(const mr_gguf *g);
uint64_t mr_gguf_alignment(const mr_gguf *g);
int mr_gguf_n_shards(const mr_gguf *g);
const char *mr_gguf_shard_path(const mr_gguf *g, int shard);
int mr_gguf_shard_fd(const mr_gguf *g, int shard); /* read-only fd, for pread by the expert pager */
uint64_t mr_gguf_shard_size(const mr_gguf *g, int shard);
uint64_t mr_gguf_shard_data_offset(const mr_gguf *g, int shard); /* start of the shard's data section */
uint64_t mr_gguf_shard_n_tensors(const mr_gguf *g, int shard);

uint64_t mr_gguf_n_kv(const mr_gguf *g);
const mr_gguf_kv *mr_gguf_kv_at(const mr_gguf *g, uint64_t i);
const mr_gguf_kv *mr_gguf_find_kv(const mr_gguf *g, const char *key); /* NULL if absent (no error set) */
const char *mr_gguf_vtype_name(int type);
int mr_gguf_vtype_size(int type);   /* bytes of one scalar value; 0 for string, array, unknown */
int mr_gguf_vtype_is_int(int type);

/* Typed getters: 0 on success; -1 if missing or of the wrong type (message names key and types).
 * Integer getters accept any integer type whose value fits the destination. */
int mr_gguf_get_u32(const mr_gguf *g, const char *key, uint32_t *out);
int mr_gguf_get_i32(const mr_gguf *g, const char *key, int32_t *out);
int mr_gguf_get_u64(const mr_gguf *g, const char *key, uint64_t *out);
int mr_gguf_get_i64(const mr_gguf *g, const char *key, int64_t *out);
int mr_gguf_get_f32(const mr_gguf *g, const char *key, float *out);   /* F32 or F64 */
int mr_gguf_get_bool(const mr_gguf *g, const char *key, int *out);
int mr_gguf_get_str(const mr_gguf *g, const char *key, const char **out);
/* Array getter: checks element type (-1 on mismatch); *data points at n elements. */
int mr_gguf_get_arr(const mr_gguf *g, const char *key, int elem_type, const void **data, uint64_t *n);

uint64_t mr_gguf_n_tensors(const mr_gguf *g);
const mr_gguf_tensor *mr_gguf_tensor_at(const mr_gguf *g, uint64_t i);
const mr_gguf_tensor *mr_gguf_find_tensor(const mr_gguf *g, const char *name); /* NULL if absent */

/* 1 if the tensor holds routed experts (ffn_{gate,up,down}_exps, ffn_gate_up_exps): what the pager pages. */
int mr_gguf_is_routed_expert(const char *name);

/* The `moerun inspect` report of an open file (mr_inspect in moerun.h opens and prints). */
void mr_gguf_print(const mr_gguf *g, const char *path, FILE *out);

/* ---- writer ---- */
typedef struct mr_gguf_writer mr_gguf_writer;
mr_gguf_writer *mr_gguf_writer_new(void);
void mr_gguf_writer_free(mr_gguf_writer *w);
int mr_gguf_writer_set_u32(mr_gguf_writer *w, const char *key, uint32_t v);
int mr_gguf_writer_set_i32(mr_gguf_writer *w, const char *key, int32_t v);
int mr_gguf_writer_set_u64(mr_gguf_writer *w, const char *key, uint64_t v);
int mr_gguf_writer_set_f32(mr_gguf_writer *w, const char *key, float v);
int mr_gguf_writer_set_bool(mr_gguf_writer *w, const char *key, int v);
int mr_gguf_writer_set_str(mr_gguf_writer *w, const char *key, const char *v);
/* Generic: any scalar or array value. Setting a key again replaces its value. Scalars: data points
 * at one value of the type's C type (bool: uint8_t); string: data is the NUL-terminated string;
 * arrays: n elements (strings: const char *[n]). general.alignment (u32) sets the data alignment. */
int mr_gguf_writer_set_kv(mr_gguf_writer *w, const char *key, int type, int arr_type, uint64_t n,
                          const void *data);
/* Tensor data is copied at write time from `data` (caller keeps it alive until mr_gguf_writer_write). */
int mr_gguf_writer_add_tensor(mr_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                              const void *data);
/* Streaming tensor data for files larger than RAM: at write time `fill` is called with consecutive
 * row ranges [row0, row0 + n_rows) (a row is ne[0] values, mr_row_size(type, ne[0]) bytes; there are
 * ne[1]*ne[2]*ne[3] rows; each call covers about 8 MiB) and must store those rows' bytes in dst.
 * Returns 0, or -1 (with mr_set_error) to abort the write. */
typedef int (*mr_gguf_fill_fn)(void *user, const char *name, uint64_t row0, uint64_t n_rows, void *dst);
int mr_gguf_writer_add_tensor_fn(mr_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                                 mr_gguf_fill_fn fill, void *user);
/* Copy one metadata entry from a reader (e.g. to re-write a model with new tensors). */
int mr_gguf_writer_copy_kv(mr_gguf_writer *w, const mr_gguf_kv *kv);
int mr_gguf_writer_set_version(mr_gguf_writer *w, uint32_t version); /* 2 or 3 (default 3) */
/* Write one file; if n_shards > 1, write PATH as NAME-0000i-of-0000N.gguf shards derived from
 * `path` (which must end in .gguf) with the first shard holding metadata only (and the split.* keys)
 * and the tensors spread over the other shards by bytes. Each file is written to FILE.tmp, then renamed. */
int mr_gguf_writer_write(mr_gguf_writer *w, const char *path, int n_shards);
#endif
