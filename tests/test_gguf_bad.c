/* Malformed GGUF files: each case patches one field of a small valid file built here (or cuts it
 * short), then checks that mr_gguf_open and `moerun inspect` ($MOERUN) reject it with a message
 * naming the file and the specific problem (exit status 1, "error: ..." on stderr). Also: every
 * truncation of the valid file fails, and random byte corruption never crashes the reader. */
#include "test.h"
#include "base/base.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { uint8_t *p; size_t n, cap; } bb;
static void put(bb *b, const void *s, size_t n) {
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2 + 256; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void u32(bb *b, uint32_t v) { put(b, &v, 4); }
static void u16(bb *b, uint16_t v) { put(b, &v, 2); }
static void u64(bb *b, uint64_t v) { put(b, &v, 8); }
static void str(bb *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }

/* byte offsets of the fields the cases patch */
typedef struct {
    size_t version, n_tensors, n_kv;
    size_t key0, val0_len, kv1_type, kv1_val, key2, kv2_type, kv2_elem, kv2_n, kv3_n, kv3_s0, key3;
    size_t split_no_val, split_no_type, split_count_val, split_tc_val;
    size_t t_name[2], t_ndims[2], t_ne0[2], t_ne1, t_type[2], t_off[2], data;
} offs;

enum { WITH_SPLIT = 1, SPLIT_NO_F32 = 2 };

/* A valid file: 4 (or 7 with split keys) metadata entries, tensors a.weight (q8_0, 32 x 2) and
 * b.weight (f32, 8), data aligned to 32, no trailing padding (so every truncation hits data). */
static bb build(offs *o, int flags, uint16_t split_no, uint16_t split_count, int32_t split_tc) {
    bb b = {0};
    u32(&b, 0x46554747u);
    o->version = b.n; u32(&b, 3);
    o->n_tensors = b.n; u64(&b, 2);
    o->n_kv = b.n; u64(&b, (flags & WITH_SPLIT) ? 7 : 4);
    o->key0 = b.n; str(&b, "general.architecture"); u32(&b, MR_GGUF_STRING);
    o->val0_len = b.n; str(&b, "llama");
    str(&b, "general.alignment"); o->kv1_type = b.n; u32(&b, MR_GGUF_U32); o->kv1_val = b.n; u32(&b, 32);
    o->key2 = b.n; str(&b, "k.one"); o->kv2_type = b.n; u32(&b, MR_GGUF_ARRAY);
    o->kv2_elem = b.n; u32(&b, MR_GGUF_U32); o->kv2_n = b.n; u64(&b, 3); u32(&b, 1); u32(&b, 2); u32(&b, 3);
    o->key3 = b.n; str(&b, "k.two"); u32(&b, MR_GGUF_ARRAY); u32(&b, MR_GGUF_STRING);
    o->kv3_n = b.n; u64(&b, 2); o->kv3_s0 = b.n; str(&b, "ab"); str(&b, "c");
    if (flags & WITH_SPLIT) {
        str(&b, "split.no"); o->split_no_type = b.n; o->split_no_val = b.n + 4;
        if (flags & SPLIT_NO_F32) { u32(&b, MR_GGUF_F32); float f = split_no; put(&b, &f, 4); }
        else { u32(&b, MR_GGUF_U16); u16(&b, split_no); }
        str(&b, "split.count"); u32(&b, MR_GGUF_U16); o->split_count_val = b.n; u16(&b, split_count);
        str(&b, "split.tensors.count"); u32(&b, MR_GGUF_I32); o->split_tc_val = b.n; u32(&b, (uint32_t)split_tc);
    }
    o->t_name[0] = b.n; str(&b, "a.weight");
    o->t_ndims[0] = b.n; u32(&b, 2); o->t_ne0[0] = b.n; u64(&b, 32); o->t_ne1 = b.n; u64(&b, 2);
    o->t_type[0] = b.n; u32(&b, MR_TYPE_Q8_0); o->t_off[0] = b.n; u64(&b, 0);
    o->t_name[1] = b.n; str(&b, "b.weight");
    o->t_ndims[1] = b.n; u32(&b, 1); o->t_ne0[1] = b.n; u64(&b, 8);
    o->t_type[1] = b.n; u32(&b, MR_TYPE_F32); o->t_off[1] = b.n; u64(&b, 96);
    while (b.n % 32) { uint8_t z = 0; put(&b, &z, 1); }
    o->data = b.n;
    for (int i = 0; i < 96 + 32; i++) { uint8_t v = (uint8_t)(i * 7); put(&b, &v, 1); }
    return b;
}

static void set32(bb *b, size_t at, uint32_t v) { memcpy(b->p + at, &v, 4); }
static void set64(bb *b, size_t at, uint64_t v) { memcpy(b->p + at, &v, 8); }

static char tmpdir[256];
static const char *moerun;
static int n_cases;

/* Runs `moerun inspect path`; returns exit status, stderr in err. */
static int run_inspect(const char *path, char *err, size_t errsz) {
    char cmd[2048], ef[600];
    snprintf(ef, sizeof ef, "%s/stderr.txt", tmpdir);
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' >/dev/null 2>'%s'", moerun, path, ef);
    int st = system(cmd);
    err[0] = 0;
    FILE *f = fopen(ef, "r");
    if (f) { size_t n = fread(err, 1, errsz - 1, f); err[n] = 0; fclose(f); }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The file `b` (written as NAME) must be rejected with a message containing `want`. */
static void expect_bad(const char *name, bb *b, size_t len, const char *want) {
    char path[600], err[4096];
    n_cases++;
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b->p, 1, len, f) == len, "write %s", path);
    if (f) fclose(f);
    mr_clear_error();
    mr_gguf *g = mr_gguf_open(path);
    CHECK(g == NULL, "%s: accepted by mr_gguf_open", name);
    mr_gguf_close(g);
    /* the message names the file (or, for a missing shard, the shard named in `want`) */
    char named[600];
    snprintf(named, sizeof named, "%s", path);
    if (strstr(want, ".gguf")) snprintf(named, sizeof named, "%s/", tmpdir);
    CHECK(strstr(mr_get_error(), want) && strstr(mr_get_error(), named), "%s: want '%s' and the path, got '%s'", name,
          want, mr_get_error());
    if (moerun) {
        int rc = run_inspect(path, err, sizeof err);
        char *nl = strchr(err, '\n');
        if (nl) *nl = 0;
        CHECK(rc == 1 && !strncmp(err, "error: ", 7) && strstr(err, want) && strstr(err, named),
              "%s: inspect exit %d, stderr '%s' (want '%s')", name, rc, err, want);
    }
}

static void test_malformed_files(void) {
    offs o;
    bb base = build(&o, 0, 0, 0, 0);
    /* the unmodified file is valid */
    {
        char path[600];
        snprintf(path, sizeof path, "%s/valid.gguf", tmpdir);
        FILE *f = fopen(path, "wb");
        fwrite(base.p, 1, base.n, f);
        fclose(f);
        mr_gguf *g = mr_gguf_open(path);
        CHECK(g && mr_gguf_n_tensors(g) == 2 && mr_gguf_n_kv(g) == 4, "valid base rejected: %s", mr_get_error());
        const mr_gguf_tensor *t = g ? mr_gguf_find_tensor(g, "b.weight") : NULL;
        CHECK(t && t->nbytes == 32 && t->file_offset == o.data + 96, "b.weight");
        mr_gguf_close(g);
    }
#define CASE(name, want, ...) do { bb c = build(&o, 0, 0, 0, 0); __VA_ARGS__; expect_bad(name, &c, c.n, want); free(c.p); } while (0)
    CASE("magic.gguf", "not a GGUF file (bad magic 47 47 55 47)", set32(&c, 0, 0x47554747u));
    CASE("version1.gguf", "GGUF version 1 is not supported", set32(&c, o.version, 1));
    CASE("version4.gguf", "unsupported GGUF version 4", set32(&c, o.version, 4));
    CASE("version0.gguf", "unsupported GGUF version 0", set32(&c, o.version, 0));
    CASE("bigendian.gguf", "big-endian GGUF is not supported", set32(&c, o.version, 0x03000000u));
    CASE("n_tensors-huge.gguf", "tensor count 1152921504606846976 cannot fit", set64(&c, o.n_tensors, 1ull << 60));
    CASE("n_kv-huge.gguf", "metadata count 18446744073709551615 cannot fit", set64(&c, o.n_kv, UINT64_MAX));
    CASE("n_kv-toomany.gguf", "key of metadata entry #5 at offset", set64(&c, o.n_kv, 9));
    CASE("key-len-huge.gguf", "key of metadata entry #0 at offset 24: string length 1099511627776 exceeds",
         set64(&c, o.key0, 1ull << 40));
    CASE("key-empty.gguf", "metadata entry #0 has an empty key", set64(&c, o.key2, 0); set64(&c, o.key0, 0));
    CASE("key-nul.gguf", "contains a NUL byte", c.p[o.key2 + 8 + 1] = 0);
    CASE("key-dup.gguf", "duplicate metadata key 'k.one'", memcpy(c.p + o.key3 + 8, "k.one", 5));
    CASE("vtype-unknown.gguf", "key 'k.one': unknown value type 13", set32(&c, o.kv2_type, 13));
    CASE("vtype-huge.gguf", "key 'k.one': unknown value type 4294967295", set32(&c, o.kv2_type, UINT32_MAX));
    CASE("string-len-huge.gguf", "value of key 'general.architecture' at offset", set64(&c, o.val0_len, UINT64_MAX - 3));
    CASE("arr-elem-unknown.gguf", "key 'k.one': unknown array element type 77", set32(&c, o.kv2_elem, 77));
    CASE("arr-nested.gguf", "key 'k.one': nested arrays are not supported", set32(&c, o.kv2_elem, MR_GGUF_ARRAY));
    CASE("arr-len-huge.gguf", "key 'k.one': array of 4611686018427387904 u32 values cannot fit",
         set64(&c, o.kv2_n, 1ull << 62));
    CASE("arr-len-wrap.gguf", "key 'k.one': array of 2305843009213693953 u64 values cannot fit",
         set32(&c, o.kv2_elem, MR_GGUF_U64); set64(&c, o.kv2_n, (1ull << 61) + 1)); /* n * 8 wraps to 8 */
    CASE("strarr-len-huge.gguf", "key 'k.two': array of 1000000000000 strings cannot fit",
         set64(&c, o.kv3_n, 1000000000000ull));
    CASE("strarr-elem-huge.gguf", "string in array 'k.two' at offset", set64(&c, o.kv3_s0, 1ull << 50));
    CASE("align-npot.gguf", "general.alignment = 48 is not a power of two", set32(&c, o.kv1_val, 48));
    CASE("align-zero.gguf", "general.alignment = 0 is not a power of two", set32(&c, o.kv1_val, 0));
    CASE("align-type.gguf", "general.alignment has type f32", set32(&c, o.kv1_type, MR_GGUF_F32));
    CASE("align-64.gguf", "tensor 'b.weight': data offset 96 is not a multiple of the alignment 64",
         set32(&c, o.kv1_val, 64));
    CASE("tname-empty.gguf", "tensor #0 has an empty name", set64(&c, o.t_name[0], 0));
    CASE("tname-len-huge.gguf", "name of tensor #1 at offset", set64(&c, o.t_name[1], 1ull << 33));
    CASE("tname-dup.gguf", "duplicate tensor name 'a.weight'", c.p[o.t_name[1] + 8] = 'a');
    CASE("ndims-5.gguf", "tensor 'a.weight' has 5 dimensions (must be 1..4)", set32(&c, o.t_ndims[0], 5));
    CASE("ndims-0.gguf", "tensor 'b.weight' has 0 dimensions", set32(&c, o.t_ndims[1], 0));
    CASE("ndims-huge.gguf", "tensor 'a.weight' has 4294967295 dimensions", set32(&c, o.t_ndims[0], UINT32_MAX));
    CASE("dim-zero.gguf", "tensor 'a.weight': dimension 1 is 0", set64(&c, o.t_ne1, 0));
    CASE("dim-negative.gguf", "tensor 'a.weight': element count overflows at dimension 1",
         set64(&c, o.t_ne1, (uint64_t)-2));
    CASE("dims-overflow.gguf", "tensor 'a.weight': element count overflows at dimension 1",
         set64(&c, o.t_ne0[0], 1ull << 32); set64(&c, o.t_ne1, 1ull << 32));
    CASE("bytes-overflow.gguf", "tensor 'b.weight': byte size overflows", set64(&c, o.t_ne0[1], 1ull << 62));
    CASE("type-unknown.gguf", "tensor 'b.weight' has unknown type 99", set32(&c, o.t_type[1], 99));
    CASE("type-retired.gguf", "tensor 'b.weight' has unknown type 4", set32(&c, o.t_type[1], 4)); /* old Q4_2 */
    CASE("type-huge.gguf", "tensor 'a.weight' has unknown type 2147483648", set32(&c, o.t_type[0], 0x80000000u));
    CASE("row-not-block.gguf", "tensor 'a.weight': row length 48 is not a multiple of the q8_0 block size 32",
         set64(&c, o.t_ne0[0], 48));
    CASE("misaligned.gguf", "tensor 'b.weight': data offset 100 is not a multiple of the alignment 32",
         set64(&c, o.t_off[1], 100));
    CASE("offset-past-end.gguf", "tensor 'b.weight': data (offset 1099511627776, 32 bytes) extends past the end",
         set64(&c, o.t_off[1], 1ull << 40));
    CASE("offset-wrap.gguf", "tensor 'b.weight': data (offset 18446744073709551584, 32 bytes) extends past the end",
         set64(&c, o.t_off[1], (uint64_t)-32));
    CASE("size-past-end.gguf", "tensor 'b.weight': data (offset 96, 64 bytes) extends past the end",
         set64(&c, o.t_ne0[1], 16));
    CASE("overlap.gguf", "tensors 'a.weight' and 'b.weight' overlap", set64(&c, o.t_off[1], 64));
    CASE("n_tensors-toomany.gguf", "tensor #2 has an empty name", set64(&c, o.n_tensors, 3));
#undef CASE
    /* split keys in a single file */
    offs os;
#define SCASE(name, want, no, count, tc, ...) do { bb c = build(&os, WITH_SPLIT, no, count, tc); __VA_ARGS__; \
        expect_bad(name, &c, c.n, want); free(c.p); } while (0)
    SCASE("split-later-shard.gguf", "this is shard 2 of 3 of a split model; open the first shard", 1, 3, 2, (void)0);
    SCASE("split-badname.gguf", "split model (split.count = 3) but the name does not end in -00001-of-00003.gguf", 0, 3, 2,
          (void)0);
    SCASE("split-no-range.gguf", "split.no = 3 is not below split.count = 2", 3, 2, 2, (void)0);
    SCASE("split-count-zero.gguf", "split.count is 0", 0, 0, 2, (void)0);
    SCASE("split-tcount.gguf", "split.tensors.count = 5 but the shards hold 2 tensors", 0, 1, 5, (void)0);
    SCASE("split-tcount-neg.gguf", "key 'split.tensors.count' = -1 is out of range", 0, 1, -1, (void)0);
    {
        bb c = build(&os, WITH_SPLIT | SPLIT_NO_F32, 0, 1, 2);
        expect_bad("split-no-type.gguf", &c, c.n, "key 'split.no' has type f32, expected an integer");
        free(c.p);
    }
    SCASE("split-missing-shard-00001-of-00002.gguf", "split-missing-shard-00002-of-00002.gguf: cannot open", 0, 2, 2,
          (void)0);
#undef SCASE
    /* truncation at field boundaries and inside fields */
    struct { size_t at; const char *want; } cuts[] = {
        {0, "not a GGUF file (empty)"}, {3, "not a GGUF file (only 3 bytes)"},
        {6, "truncated: version at offset 4"}, {12, "truncated: tensor count at offset 8"},
        {20, "truncated: metadata count"}, {24, "metadata count 4 cannot fit"},
        {o.val0_len + 10, "metadata count 4 cannot fit in a file of 66 bytes"},
        {o.kv1_val + 2, "truncated: value of key 'general.alignment'"},
        {o.kv2_elem + 2, "truncated: array element type of key 'k.one'"},
        {o.kv2_n + 4, "truncated: array length of key 'k.one'"},
        {o.kv2_n + 14, "array of 3 u32 values cannot fit"},
        {o.kv3_s0 + 9, "key 'k.two': array of 2 strings cannot fit in the 9 bytes left"},
        {o.kv3_s0 + 16, "truncated: string in array 'k.two' at offset 182"},
        {o.t_name[0] + 8, "name of tensor #0 at offset 191: string length 8 exceeds the 0 bytes left"},
        {o.t_ne1 + 3, "truncated: dimension 1 of tensor 'a.weight'"},
        {o.t_type[1] + 1, "truncated: type of tensor 'b.weight'"},
        {o.t_off[1] + 7, "truncated: data offset of tensor 'b.weight'"},
        {o.data - 1, "tensor 'a.weight': data (offset 0, 68 bytes) extends past the end"},
        {o.data + 50, "tensor 'a.weight': data (offset 0, 68 bytes) extends past the end"},
        {base.n - 1, "tensor 'b.weight': data (offset 96, 32 bytes) extends past the end"},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "cut-%zu.gguf", cuts[i].at);
        expect_bad(name, &base, cuts[i].at, cuts[i].want);
    }
    CHECK(n_cases >= 25, "only %d malformed files", n_cases);
    printf("# %d malformed files checked%s\n", n_cases, moerun ? " (library and moerun inspect)" : " (library only)");
    free(base.p);
}

/* Every proper prefix of the valid file fails with a message (no crash). */
static void test_every_truncation(void) {
    offs o;
    bb b = build(&o, 0, 0, 0, 0);
    int accepted = 0, nomsg = 0;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact-size copy: ASan catches any read past the end */
        memcpy(copy, b.p, n);
        mr_clear_error();
        mr_gguf *g = mr_gguf_open_memory(copy, n, "prefix");
        if (g) accepted++;
        else if (!strstr(mr_get_error(), "prefix: ")) nomsg++;
        mr_gguf_close(g);
        free(copy);
    }
    CHECK(accepted == 0 && nomsg == 0, "%d prefixes accepted, %d without a message", accepted, nomsg);
    mr_gguf *g = mr_gguf_open_memory(b.p, b.n, "full");
    CHECK(g != NULL, "full file rejected: %s", mr_get_error());
    mr_gguf_close(g);
    free(b.p);
}

/* Random corruption of a real model's header region and of the small file: the reader either
 * accepts (the change was harmless) or fails with a message; ASan/UBSan (make sanitize) turn any
 * out-of-bounds read or overflow into a failure. Tensors accepted must lie inside the buffer. */
static uint64_t rng = 88172645463325252ull;
static uint64_t xs(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void corrupt_loop(const uint8_t *src, size_t size, size_t region, int iters, int *acc, int *rej) {
    uint8_t *buf = malloc(size);
    for (int it = 0; it < iters; it++) {
        memcpy(buf, src, size);
        int flips = 1 + (int)(xs() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)(xs() % region);
            switch (xs() % 4) {
            case 0: buf[at] ^= (uint8_t)(1u << (xs() % 8)); break;
            case 1: buf[at] = (uint8_t)xs(); break;
            case 2: buf[at] = 0xff; break;
            default: buf[at] = 0; break;
            }
        }
        size_t len = (xs() % 8 == 0) ? (size_t)(xs() % size) : size;
        mr_gguf *g = mr_gguf_open_memory(buf, len, "corrupt");
        if (g) {
            (*acc)++;
            for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
                const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
                CHECK(t->file_offset + t->nbytes <= len && (const uint8_t *)t->data == buf + t->file_offset,
                      "accepted tensor outside the buffer");
            }
        } else {
            (*rej)++;
            CHECK(strstr(mr_get_error(), "corrupt: ") != NULL, "no message: %s", mr_get_error());
        }
        mr_gguf_close(g);
    }
    free(buf);
}

static void test_random_corruption(void) {
    offs o;
    bb b = build(&o, 0, 0, 0, 0);
    int acc = 0, rej = 0;
    corrupt_loop(b.p, b.n, o.data, 20000, &acc, &rej);
    free(b.p);
    FILE *f = fopen(t_shared("models/tiny-llama-q4_0.gguf"), "rb");
    CHECK(f != NULL, "open tiny-llama-q4_0");
    if (f) {
        fseek(f, 0, SEEK_END);
        size_t size = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *m = malloc(size);
        CHECK(fread(m, 1, size, f) == size, "read");
        fclose(f);
        mr_gguf *g = mr_gguf_open_memory(m, size, "tiny-llama-q4_0");
        CHECK(g != NULL, "%s", mr_get_error());
        size_t hdr = g ? (size_t)mr_gguf_shard_data_offset(g, 0) : size;
        mr_gguf_close(g);
        corrupt_loop(m, size, hdr, 300, &acc, &rej);
        free(m);
    }
    printf("# corruption: %d accepted, %d rejected\n", acc, rej);
    CHECK(rej > 1000, "suspiciously few rejections (%d)", rej);
}

int main(void) {
    moerun = getenv("MOERUN");
    if (moerun && access(moerun, X_OK) != 0) moerun = NULL;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mr_gguf_bad_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_malformed_files);
    RUN(test_every_truncation);
    RUN(test_random_corruption);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return t_finish();
}
