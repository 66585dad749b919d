/* NumPy's .npy format (worker/data/data_npy.c): the header parser, which the .npz reader uses
 * too, and the readers of a .npy file and of a directory of them (the format is described in
 * data_formats.h). */
#ifndef MW_WORKER_DATA_DATA_NPY_H
#define MW_WORKER_DATA_DATA_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/data/data_formats.h"

/* The reader table's rows: a directory holding x_train.npy (and the three others), and one
 * .npy file. */
extern const mw_data_reader mw_reader_npy_dir, mw_reader_npy_file;

/* Parse and check the header at buf[0..avail) of a .npy of file_nbytes bytes in all (avail
 * may be less: the header must lie within it). Checks: the magic, the version (1.0, 2.0, 3.0),
 * header_len against avail, the dict's syntax and its keys (descr, fortran_order and shape,
 * each once, nothing else), descr a little-endian or byte-order-free integer or float type,
 * fortran_order False, shape a tuple of at most MW_NPY_MAX_DIMS sizes, and the data size
 * (product of shape x itemsize) equal to what follows the header. name names the file (or
 * archive member) in messages: "<name>: npy header field 'shape': ...". MW_EDATA. */
mw_status mw_npy_parse_header(mw_npy_header *h, const uint8_t *buf, size_t avail,
                              uint64_t file_nbytes, const char *name);

/* Fill train and test (initialised, empty) from the .npy files in dir, or fail leaving them
 * for the caller to free; *max_label: the largest label of both. classes: --classes (0: none). */
mw_status mw_data_read_npy_dir(mw_dataset *train, mw_dataset *test, const char *dir, int classes,
                               int *max_label);

#endif
