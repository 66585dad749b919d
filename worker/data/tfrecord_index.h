/* The record offsets of a plain TFRecord shard (worker/data/tfrecord.h), for random access:
 * found once by reading the whole shard (both CRCs of every record checked), then kept in a
 * file beside the shard (SHARD.mwidx) or in a directory the caller names (DIR/BASENAME.mwidx),
 * with the shard's size and modification time. A kept index whose shard has changed since
 * (another size or mtime), or which is itself damaged, is rebuilt and written again.
 *
 * The index file (all integers little-endian; docs/tfrecord.md):
 *   0       8   magic "MWTFRIX1"
 *   8       8   the shard's size in bytes
 *   16      8   the shard's mtime, seconds since the epoch (signed)
 *   24      8   the shard's mtime, nanoseconds
 *   32      8   N, the number of records
 *   40      8N  the byte offset of each record's header, ascending
 *   40+8N   4   CRC-32C of all the bytes before it
 *
 * Compressed shards have no index: they are read in order only. */
#ifndef MW_WORKER_DATA_TFRECORD_INDEX_H
#define MW_WORKER_DATA_TFRECORD_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/data/tfrecord.h"

#define MW_TFRECORD_INDEX_SUFFIX ".mwidx"

typedef struct {
    uint64_t count;
    uint64_t *offsets; /* count entries, malloc'ed */
} mw_tfrecord_index;

/* Fill ix by reading shard t (open, plain, not yet read) to its end; every record checked as
 * mw_tfrecord_next does. A compressed shard: MW_EUNSUPPORTED "PATH: GZIP-compressed shard has
 * no record index; ...". ix is left empty on failure. */
mw_status mw_tfrecord_index_scan(mw_tfrecord_index *ix, mw_tfrecord *t);

/* Where the index of shard lives: "SHARD.mwidx", or "DIR/BASENAME.mwidx" when dir is not
 * NULL. MW_EIO "path too long" when it does not fit in cap bytes. */
mw_status mw_tfrecord_index_path(char *out, size_t cap, const char *shard, const char *dir);

/* The index of the shard at path: read from its index file when that matches the shard's size
 * and mtime and is intact, else built by mw_tfrecord_index_scan and written there atomically
 * (MW_EIO when it cannot be written: name a writable dir). *rebuilt (may be NULL): 1 when it
 * was built. Errors name the shard (its records) or the index file (a write failure). */
mw_status mw_tfrecord_index_open(mw_tfrecord_index *ix, const char *path, const char *dir,
                                 int *rebuilt);

void mw_tfrecord_index_free(mw_tfrecord_index *ix);

#endif
