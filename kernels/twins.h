/* The prototypes of every kernel twin, made from kernels/kernel_list.h: mw_<op>_ref and
 * mw_<op>_cuda for each entry, mw_<op>_cpu for the entries whose fast field says CPU. The
 * twins' files include this header; their contracts are the list's. */
#ifndef MW_KERNELS_TWINS_H
#define MW_KERNELS_TWINS_H

#include "kernels/kernels.h"

#define MW_IF_CPU(...) __VA_ARGS__
#define MW_IF_REF(...)
#define MW_KERNEL(op, fast, params, args, arrays)                                                  \
    void mw_##op##_ref(const mw_kctx *k, MW_UNPAREN params);                                       \
    MW_IF_##fast(void mw_##op##_cpu(const mw_kctx *k, MW_UNPAREN params);) void mw_##op##_cuda(    \
        const mw_kctx *k, MW_UNPAREN params);
#include "kernels/kernel_list.h"
#undef MW_KERNEL

#endif
