/* Zip archives as inputs: a Keras-style .npz (worker/data/data_npz.c) and a .keras model
 * (worker/keras/keras_archive.c), opened read-only through libzip with its consistency checks, from
 * a regular file (common/fs.h: never a FIFO or a device, never blocking) or from memory.
 *
 * A member name that appears twice is named here: libzip's consistency check reports it only
 * as "File already exists", and two readers of such an archive may take different copies. */
#ifndef MW_WORKER_ZIP_INPUT_H
#define MW_WORKER_ZIP_INPUT_H

#include <stddef.h>
#include <zip.h>

#include "common/status.h"

/* Open src (consumed: freed on failure, owned by *za on success) as the archive `name`:
 *   MW_EDATA "NAME: the member name 'X' appears twice in the archive; expected each member
 *             once (which copy a reader takes is not defined)"
 *   MW_EIO   "NAME: BAD_ZIP: REASON"   when the bytes cannot be read
 *   MW_EDATA "NAME: BAD_ZIP: REASON"   otherwise (not a zip, truncated, inconsistent) */
mw_status mw_zip_input_open(zip_source_t *src, const char *name, const char *bad_zip, zip_t **za);

/* The archive at path, a regular file (mw_fs_open_input, MW_EIO otherwise; expected says what it
 * should be), as mw_zip_input_open. map_fd (may be NULL) gets a read-only descriptor of the same
 * file for mapping stored members, -1 on failure; the caller closes it. */
mw_status mw_zip_input_open_file(const char *path, const char *expected, const char *bad_zip,
                                 zip_t **za, int *map_fd, size_t *file_nbytes);

/* bytes[0..nbytes) (borrowed until *za is discarded), as mw_zip_input_open. */
mw_status mw_zip_input_open_buffer(const void *bytes, size_t nbytes, const char *name,
                                   const char *bad_zip, zip_t **za);

#endif
