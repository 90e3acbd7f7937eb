/* Lookup tables of the i-quant and FP4 types. Transcribed from ggml (ggml/src/ggml-common.h of
 * ayourtch-llm/llama.cpp-deepseek-v4-flash at 3ba61fbb4, identical to ggml-org/ggml); the
 * values are facts of the formats, the golden data depends on every entry.
 *
 * Grids: each uint64 entry packs 8 weight magnitudes (one per byte, little-endian byte j = value j);
 * each uint32 entry packs 4. iq1s_grid bytes are signed (-1, 0, +1). */
#ifndef MR_IQ_GRIDS_H
#define MR_IQ_GRIDS_H
#include <stdint.h>

extern const uint8_t mr_kmask_iq2xs[8];        /* bit j of a sign byte */
extern const uint8_t mr_ksigns_iq2xs[128];     /* 7 stored sign bits -> 8 bits with even parity */
extern const uint64_t mr_ksigns64[128];        /* same, expanded to 0x00/0xff bytes */
extern const uint64_t mr_iq2xxs_grid[256];     /* 8 values in {8, 25, 43} */
extern const uint8_t mr_iq2xxs_grid_planes[512]; /* the same as bit planes: value = 8 + 17 b0 + 35 b1 */
extern const uint64_t mr_iq2xs_grid[512];
extern const uint64_t mr_iq2s_grid[1024];
extern const uint32_t mr_iq3xxs_grid[256];     /* 4 values each */
extern const uint16_t mr_iq3xxs_grid_nib[256]; /* the same as 3-bit level codes, one per nibble */
extern const uint32_t mr_iq3s_grid[512];
extern const uint16_t mr_iq3s_grid_nib[512];   /* the same, 4 bits per value */
extern const uint8_t mr_iq3s_grid_nib8[1024];  /* its low bytes, then its high bytes */
extern const int8_t mr_kvalues_iq4nl[16];      /* IQ4_NL / IQ4_XS non-linear levels */
extern const int8_t mr_kvalues_mxfp4[16];      /* E2M1 values doubled (MXFP4, NVFP4) */
extern const uint64_t mr_iq1s_grid[2048];      /* 8 signed bytes in {-1, 0, 1} */

#define MR_IQ1S_DELTA 0.125f                   /* IQ1_S / IQ1_M grid shift */
#define MR_IQ1M_DELTA 0.125f
#endif
