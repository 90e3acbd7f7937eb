/* AArch64 with FEAT_DotProd (ARMv8.2 sdot, MOERUN_ISA=dotprod; chosen when HWCAP_ASIMDDP is set):
 * quant_kern_arm.h compiled with vdotq_s32. Types left out fall back to the neon table. */
#define KA_DOTPROD 1
#define KA_SUFFIX dotprod
#include "quant/quant_kern_arm.h"

const mr_kern mr_kern_dotprod[MR_TYPE_COUNT] = {KA_TABLE(NULL)};
