/* Several named inputs in a .npz (x_train.<name>, x_test.<name>): packed into one row of
 * values per example, the parts in the order of their names (worker/model/inputs.h says how
 * the model takes them apart). */
#ifndef MW_WORKER_DATA_DATA_PARTS_H
#define MW_WORKER_DATA_DATA_PARTS_H

#include <stddef.h>

#include "common/status.h"
#include "worker/data/data.h"
#include "worker/data/data_formats.h"

/* member "x_train.token_ids.npy" of split "x_train": 1 and name "token_ids"; 0 when member is
 * not split.<name>.npy; -1 when the name is longer than cap - 1 bytes or holds anything but
 * letters, digits and '_'. */
int mw_data_part_name(const char *member, const char *split, char *name, size_t cap);

/* The p->n arrays parts[k] (named p->name[k]: each (N, T_k) of integers or booleans, values in
 * [0, 2^24), N equal) into out: one int32 array (N, sum T_k), the parts side by side in the
 * order of their names; p is rewritten in that order with each width. The memory is checked
 * before it is allocated. MW_EDATA naming the array, the field or the value; what names the
 * split in messages. */
mw_status mw_data_pack_parts(const mw_npy_array *parts, mw_input_parts *p, const char *what,
                             mw_npy_array *out);

/* The test split names the same inputs, of the same lengths, as the training split; else
 * MW_EDATA naming the first that differs. */
mw_status mw_data_same_parts(const mw_input_parts *train, const mw_input_parts *test,
                             const char *where);

#endif
