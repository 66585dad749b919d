/* A Keras-style .npz archive (worker/data/data_npz.c): x_train, y_train, x_test, y_test, each
 * a .npy member, stored (memory-mapped through data_zip.h) or deflated. */
#ifndef MW_WORKER_DATA_DATA_NPZ_H
#define MW_WORKER_DATA_DATA_NPZ_H

#include <stddef.h>

#include "common/status.h"
#include "worker/data/data_formats.h"

/* The reader table's row. */
extern const mw_data_reader mw_reader_npz;

/* Fill train and test (initialised, empty) from the archive at path, or fail leaving them for
 * the caller to free; *max_label: the largest label of both. classes: --classes (0: none). */
mw_status mw_data_read_npz(mw_dataset *train, mw_dataset *test, const char *path, int classes,
                           int *max_label);
/* The same from an archive in memory (bytes[0..nbytes), borrowed while it runs; the fuzz
 * target's way in). */
mw_status mw_data_read_npz_buffer(mw_dataset *train, mw_dataset *test, const void *bytes,
                                  size_t nbytes, const char *name, int classes, int *max_label);

#endif
