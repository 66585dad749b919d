/* The fast CPU path: the reference table with the fast entries overriding (those whose fast
 * field in kernels/kernel_list.h says CPU). */
#include "kernels/cpu/table.h"
#include "kernels/ref/table.h"
#include "kernels/twins.h"

void mw_kernels_init_cpu(mw_kernels *t)
{
    mw_kernels_init_ref(t);
    t->name = "cpu";
#define MW_KERNEL(op, fast, params, args, arrays) MW_IF_##fast(t->op = mw_##op##_cpu;)
#include "kernels/kernel_list.h"
#undef MW_KERNEL
}
