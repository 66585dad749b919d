/* The fast CPU backend table (table.c). */
#ifndef MW_KERNELS_CPU_TABLE_H
#define MW_KERNELS_CPU_TABLE_H

#include "kernels/kernels.h"

/* The reference, overridden by the fast CPU path. */
void mw_kernels_init_cpu(mw_kernels *t);

#endif
