/* The CUDA backend table (table.cu). */
#ifndef MW_KERNELS_CUDA_TABLE_H
#define MW_KERNELS_CUDA_TABLE_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Override the table entries with the CUDA twins, and name it "cuda", when at
 * least one device is usable; otherwise (no driver, no device, or built
 * without CUDA) leave the table unchanged, so it keeps working on the host. */
void mw_kernels_init_cuda(mw_kernels *t);

#ifdef __cplusplus
}
#endif

#endif
