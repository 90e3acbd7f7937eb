/* Shared by the libFuzzer targets (tests/fuzz/fuzz_*.c): where ../shared is, and a reader for the
 * fuzz input. Each target defines LLVMFuzzerTestOneInput; `make fuzz` links it with libFuzzer,
 * `make test` with tests/fuzz/replay.c, which runs the kept corpus and crashes through it. */
#ifndef MR_FUZZ_COMMON_H
#define MR_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *fuzz_shared(void) {
    const char *s = getenv("MR_SHARED");
    return s && *s ? s : "../shared";
}

/* Consumes bytes from the front of the input; past the end it yields zeros. */
typedef struct { const uint8_t *p; size_t n; } fuzz_in;
static inline uint8_t fuzz_u8(fuzz_in *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}
static inline uint32_t fuzz_u32(fuzz_in *in) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)fuzz_u8(in) << (8 * i);
    return v;
}
static inline float fuzz_f32(fuzz_in *in) {
    uint32_t v = fuzz_u32(in);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

/* A failed invariant: say which, then abort so the fuzzer (or the replay) reports it. */
#define FUZZ_CHECK(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); abort(); } \
    } while (0)
#endif
