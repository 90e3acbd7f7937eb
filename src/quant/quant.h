/* Tensor element types (ggml ids and block layouts) and the kernels that use them.
 * One table (quant.c) describes every type: block size, bytes per block, the activation type its
 * dot product pairs with, and its scalar reference functions. The SIMD kernels are in one table
 * per ISA (quant_simd.h), tested against the scalar ones. */
#ifndef MR_QUANT_H
#define MR_QUANT_H
#include <stddef.h>
#include <stdint.h>

/* ggml type ids (ggml.h enum ggml_type); gaps are ids ggml retired. */
enum mr_type {
    MR_TYPE_F32 = 0, MR_TYPE_F16 = 1, MR_TYPE_Q4_0 = 2, MR_TYPE_Q4_1 = 3,
    MR_TYPE_Q5_0 = 6, MR_TYPE_Q5_1 = 7, MR_TYPE_Q8_0 = 8, MR_TYPE_Q8_1 = 9,
    MR_TYPE_Q2_K = 10, MR_TYPE_Q3_K = 11, MR_TYPE_Q4_K = 12, MR_TYPE_Q5_K = 13, MR_TYPE_Q6_K = 14,
    MR_TYPE_Q8_K = 15, MR_TYPE_IQ2_XXS = 16, MR_TYPE_IQ2_XS = 17, MR_TYPE_IQ3_XXS = 18,
    MR_TYPE_IQ1_S = 19, MR_TYPE_IQ4_NL = 20, MR_TYPE_IQ3_S = 21, MR_TYPE_IQ2_S = 22, MR_TYPE_IQ4_XS = 23,
    MR_TYPE_I8 = 24, MR_TYPE_I16 = 25, MR_TYPE_I32 = 26, MR_TYPE_I64 = 27, MR_TYPE_F64 = 28,
    MR_TYPE_IQ1_M = 29, MR_TYPE_BF16 = 30, MR_TYPE_TQ1_0 = 34, MR_TYPE_TQ2_0 = 35,
    MR_TYPE_MXFP4 = 39, MR_TYPE_NVFP4 = 40, MR_TYPE_Q1_0 = 41,
    MR_TYPE_Q2_0 = 42, MR_TYPE_COUNT = 43
};

/* dequantize k values (k a multiple of block_size) */
typedef void (*mr_to_float_fn)(const void *src, float *dst, int64_t k);
/* reference quantization of k values (activations to the partner type; simple weight types for tools) */
typedef void (*mr_from_float_fn)(const float *src, void *dst, int64_t k);
/* *s = dot(weight row w, activation row y) over n values; y is already in the partner type */
typedef void (*mr_vec_dot_fn)(int n, float *s, const void *w, const void *y);

typedef struct {
    const char *name;          /* ggml's name, e.g. "q4_K" */
    int block_size;            /* values per block */
    size_t type_size;          /* bytes per block */
    int is_quantized;
    int vec_dot_type;          /* type the activations are converted to for vec_dot */
    mr_to_float_fn to_float;   /* NULL for integer types */
    mr_from_float_fn from_float; /* NULL where the type has no simple reference quantizer */
    mr_vec_dot_fn vec_dot;     /* scalar reference */
} mr_type_traits;

/* NULL for ids that are not a known type. */
const mr_type_traits *mr_type_get(int type);
const char *mr_type_name(int type);         /* "?" if unknown */
int mr_type_from_name(const char *name);    /* -1 if unknown (case-insensitive) */
/* bytes of one row of n values; 0 if n is not a multiple of the block size or type unknown */
size_t mr_row_size(int type, int64_t n);

/* vec_dot for the ISA in use (mr_isa()), falling back to the scalar reference. */
mr_vec_dot_fn mr_type_vec_dot(int type);
/* vec_dot for a given ISA, or NULL if that ISA has no kernel for the type (tests) */
mr_vec_dot_fn mr_type_vec_dot_isa(int type, int isa);

#endif
