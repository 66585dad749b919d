/* IDX files, MNIST's format (worker/data/data_idx.c): one image and one label file, or a
 * directory of the four with their standard names. */
#ifndef MW_WORKER_DATA_DATA_IDX_H
#define MW_WORKER_DATA_DATA_IDX_H

#include "common/status.h"
#include "worker/data/data.h"
#include "worker/data/data_formats.h"

/* The reader table's row (last: it takes any directory). */
extern const mw_data_reader mw_reader_idx;

/* Load an IDX image file (magic 0x00000803, 3 dims) and label file (0x00000801, 1 dim),
 * each gzip-compressed or plain. Checks the headers (magic, dimensions, size limits, equal
 * counts, count > 0) before allocating, that each body is complete with nothing after it
 * (for gzip, that the stream and its CRC are intact), and that every label is below
 * num_classes (>= 1).
 * d must be initialised. On success its old contents are freed and replaced; on failure
 * d is unchanged, nothing is leaked and mw_err_msg() names the file and the problem. */
mw_status mw_dataset_load(mw_dataset *d, const char *images_path, const char *labels_path,
                          int num_classes);

/* Load train and test sets from dir with the standard file names (train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), each with a
 * .gz suffix or without (.gz preferred when both exist), and check that train and test
 * images have the same size. A missing file's message names the directory and the names
 * tried. Same ownership rules as mw_dataset_load: on failure train and test are unchanged. */
mw_status mw_dataset_load_dir(mw_dataset *train, mw_dataset *test, const char *dir,
                              int num_classes);

#endif
