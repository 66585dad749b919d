/* The reference fills every entry of the backend table (kernels/kernel_list.h). */
#include "kernels/ref/table.h"
#include "kernels/twins.h"

#include <string.h>

void mw_zero_ref(const mw_kctx *k, void *p, size_t nbytes)
{
    (void)k;
    if (nbytes)
        memset(p, 0, nbytes);
}

void mw_kernels_init_ref(mw_kernels *t)
{
    t->name = "ref";
#define MW_KERNEL(op, fast, params, args, arrays) t->op = mw_##op##_ref;
#include "kernels/kernel_list.h"
#undef MW_KERNEL
}
