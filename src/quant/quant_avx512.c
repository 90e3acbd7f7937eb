/* avx512 vec_dot kernels, indexed by type; NULL entries fall back to the scalar reference. */
#include "quant/quant.h"

const mr_vec_dot_fn mr_vec_dot_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = NULL,
};
