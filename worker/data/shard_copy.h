/* Compressed TFRecord shards as training data (worker/data/shard_copy.c; docs/data.md, "TFRecord
 * shards"): a GZIP or ZLIB shard cannot be read at a record's offset, so while it is read in
 * order at the start (for the labels) its records are written into a plain shard, its copy,
 * which training then reads at random. The copy is kept for later runs:
 *
 *   DIR/.mwtrain-cache/BASENAME.SIZE-MTIMESEC.MTIMENSEC.tfrecord
 *
 * DIR being --shard-cache or the shard's own directory; the name carries the compressed shard's
 * size and modification time, so a changed shard gets a new copy, and a copy is written to a
 * temporary name and renamed into place whole (ranks of a node writing the same copy at once
 * each rename a complete, identical file). The copy's records are framed as tf.io.TFRecordWriter
 * frames them, both CRCs included, and are checked again when read. */
#ifndef MW_WORKER_DATA_SHARD_COPY_H
#define MW_WORKER_DATA_SHARD_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/status.h"

typedef struct {
    FILE *f;
    char tmp[4200], path[4200];
    uint64_t at; /* bytes written */
} mw_shard_copy;

/* The path of a file kept for shard in the cache folder: DIR/.mwtrain-cache/BASENAME.SIZE-
 * MTIMESEC.MTIMENSEC.EXT (DIR: cache, or the shard's directory when NULL); *exists: 1 when it
 * is a regular file already. MW_EIO when the shard cannot be stat'ed or the path does not fit. */
mw_status mw_shard_cache_path(const char *shard, const char *cache, const char *ext, char *out,
                              size_t cap, int *exists);
/* The copy's path for shard (cache: --shard-cache, or NULL for the shard's directory) into out
 * (cap bytes); *exists: 1 when it is already there. MW_EIO when the shard cannot be stat'ed or
 * the path does not fit. */
mw_status mw_shard_copy_path(const char *shard, const char *cache, char *out, size_t cap,
                             int *exists);
/* Start writing the copy at path (its folder made; a temporary name until the end). MW_EIO
 * naming the folder and the flag that moves it when it cannot be written. */
mw_status mw_shard_copy_begin(mw_shard_copy *w, const char *path);
/* One record's data, framed; *offset: where its header starts in the copy. */
mw_status mw_shard_copy_add(mw_shard_copy *w, const uint8_t *data, size_t n, uint64_t *offset);
/* Finish: with ok, flush and rename the copy into place; else (or on a write error) remove the
 * temporary file. */
mw_status mw_shard_copy_end(mw_shard_copy *w, int ok);

#endif
