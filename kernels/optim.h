/* The optimizer slots: which of s1..s3 each of Keras 3's update rules (kernel-table entries,
 * kernels/kernel_list.h; the formulas in kernels/optim_rules.h) keeps, and what they hold:
 *
 *   sgd_step      s1 = momentum (when momentum != 0)
 *   adam_step     s1 = m, s2 = v, s3 = vhat (amsgrad)     (Adam and AdamW)
 *   rmsprop_step  s1 = velocity (mean square), s2 = momentum (when > 0), s3 = average
 *                 gradient (centered)
 *   adagrad_step  s1 = accumulator (initial_accumulator_value at the start)
 *   adamax_step   s1 = m, s2 = u (the exponentially weighted infinity norm)
 */
#ifndef MW_KERNELS_OPTIM_H
#define MW_KERNELS_OPTIM_H

#include "kernels/kernels.h"

#endif
