/* Q2_0's repacked layout (no intrinsics: every ISA's Q2_0 kernels read it, q2_0_avx2.c with R = 8
 * rows, q2_0_avx512.c with R = 16).
 *
 * Per group of R rows and per 64-value block: uint16 d[R] (the rows' scales), then four vectors
 * P_m (m = 0..3) of R 32-bit lanes; lane r of P_m holds the 16 codes of row r for values
 * 16m .. 16m+15 bit-transposed: byte t, bits 2k..2k+1 = code of value 16m + 4k + t. So
 * (P_m >> 2k) & 3 per byte puts the codes of values 16m+4k .. 16m+4k+3 in the 4 bytes of each lane,
 * in value order: one broadcast 4-byte group of plain Q8_0 activations multiplies 16 (or 8) rows at
 * once. R * 18 bytes per group and block, the size of the plain blocks. */
#include "quant/quant_simd.h"
#include "quant/quant_blocks.h"

#include <string.h>

void mr_q2_0_repack(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst, int R) {
    const int64_t nb = cols / MR_QK2_0;
    const mr_block_q2_0 *w = src;
    uint8_t *out = dst;
    const size_t gb = (size_t)R * sizeof(mr_block_q2_0);
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o = out + (size_t)(g * nb + b) * gb;
            for (int r = 0; r < R; r++) {
                const mr_block_q2_0 *x = &w[(size_t)(R * g + r) * (size_t)nb + (size_t)b];
                memcpy(o + 2 * r, &x->d, 2);
                for (int m = 0; m < 4; m++) {
                    uint8_t lane[4] = {0};
                    for (int k = 0; k < 4; k++)
                        for (int t = 0; t < 4; t++) {
                            const int v = 16 * m + 4 * k + t;
                            lane[t] |= (uint8_t)(((x->qs[v / 4] >> (2 * (v % 4))) & 3) << (2 * k));
                        }
                    memcpy(o + 2 * R + (size_t)(m * R + r) * 4, lane, 4);
                }
            }
        }
}
