/* Where a stored .npz member's bytes lie in the archive (worker/data/data_zip.c), so that an
 * uncompressed member can be memory-mapped like a .npy file. */
#ifndef MW_WORKER_DATA_DATA_ZIP_H
#define MW_WORKER_DATA_DATA_ZIP_H

#include <stddef.h>
#include <stdint.h>

/* Where the data of member `name` of the zip archive file[0..nbytes) begin: the central
 * directory (zip64 or not) gives the member's local header, whose name and extra field
 * lengths give the data's offset. 0 when any of it is missing or out of bounds. Used for a
 * stored member, whose data are its bytes, after libzip has checked the archive. */
uint64_t mw_data_zip_data_offset(const uint8_t *file, size_t nbytes, const char *name);

#endif
