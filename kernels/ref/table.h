/* The reference backend table (table.c). */
#ifndef MW_KERNELS_REF_TABLE_H
#define MW_KERNELS_REF_TABLE_H

#include "kernels/kernels.h"

/* Fill every entry of t with the reference twins, and name it "ref". */
void mw_kernels_init_ref(mw_kernels *t);

#endif
