/* What training needs of a TFRecord shard, kept so that later runs need not read it (worker/
 * data/shard_index.c; docs/data.md, "TFRecord shards"): each record's byte offset and label, the
 * largest record, and the feature keys they were read with. Reading every shard at each start
 * is a pass over the whole data set (minutes for ImageNet's 140 GB); with this index a start
 * reads 16 bytes a record instead.
 *
 * It is written beside the shard's plain copy (shard_copy.h), DIR/.mwtrain-cache/BASENAME.SIZE-
 * MTIMESEC.MTIMENSEC.mwex, named after the shard's size and modification time so that a
 * changed shard is read again, and only for a shard whose every record was good. The file (all
 * integers little-endian):
 *
 *   0    8   magic "MWTFREX1"
 *   8    8   N, records
 *   16   8   the largest record's data, in bytes
 *   24   4   K1, then K1 bytes: the image feature's key
 *   ..   4   K2, then K2 bytes: the label feature's key
 *   ..   16N each record: its header's byte offset (in the plain copy for a compressed shard)
 *            and its label (signed)
 *   ..   4   CRC-32C of all the bytes before it
 *
 * A damaged, truncated or foreign file counts as no index (the shard is read and the index
 * written again); one that cannot be written is skipped with a debug line. */
#ifndef MW_WORKER_DATA_SHARD_INDEX_H
#define MW_WORKER_DATA_SHARD_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define MW_SHARD_KEY_MAX 255

typedef struct {
    uint64_t n, cap;
    uint64_t *off;
    int64_t *label;
    uint64_t largest;
    char image_key[MW_SHARD_KEY_MAX + 1], label_key[MW_SHARD_KEY_MAX + 1];
} mw_shard_index;

void mw_shard_index_init(mw_shard_index *x);
void mw_shard_index_free(mw_shard_index *x);
/* Add one record. MW_ENOMEM naming the shard. */
mw_status mw_shard_index_add(mw_shard_index *x, uint64_t off, int64_t label, uint64_t nbytes,
                             const char *shard);
/* Read the index at path into x (empty); 1 when it is there, whole and holds keys the caller
 * accepts (image_key, label_key: the flags' values, or NULL for either default). */
int mw_shard_index_load(mw_shard_index *x, const char *path, const char *image_key,
                        const char *label_key);
/* Write x with its keys to path (its folder made), atomically; a failure is logged, not
 * returned. */
void mw_shard_index_save(const mw_shard_index *x, const char *path);

#endif
