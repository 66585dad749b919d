/* The fast CPU table against the reference, entry by entry (tests/kernel_check.c): a cmocka
 * test for test_kernels.c's list. */
#ifndef MW_TESTS_KERNEL_CHECK_H
#define MW_TESTS_KERNEL_CHECK_H

#include "kernels/kernels.h"

/* For every entry of kernels/kernel_list.h that the cpu table overrides: each case of its
 * descriptor, arguments generated from the entry's signature, the reference and the fast twin
 * (1 and 3 threads) compared array by array. An overriding entry without a descriptor fails. */
void mw_test_kernels_fast_vs_ref(void **state);
/* Its control: a twin wrong by one ulp in one element is caught, and named. */
void mw_test_kernels_fast_vs_ref_control(void **state);

/* Attention geometry i of the cases both the loop and test_kernels.c's test_attention run
 * (n = 2 examples, H = 2 heads, dk = 3, dv = 2): 1, or 0 past the last. */
int mw_test_attn_geom(int i, mw_attn_geom *g);

#endif
