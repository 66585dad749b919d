/* Which TFRecord shards a path names (worker/data/tfrecord.h), the three ways people point at
 * them:
 *   - a shard file: that file alone;
 *   - a directory: its shards of the split asked for, named as TensorFlow Datasets names them
 *     (NAME-SPLIT.tfrecord-IIIII-of-NNNNN) or as the TF models garden does
 *     (SPLIT-IIIII-of-NNNNN, e.g. train-00000-of-01024); when it holds no shard named so at
 *     all, every file whose name ends in .tfrecord or .tfrecords, sorted by name;
 *   - a TFDS prefix that is no file itself, "DIR/NAME-SPLIT.tfrecord": its shards
 *     DIR/NAME-SPLIT.tfrecord-IIIII-of-NNNNN.
 * A TFDS set must be whole: every index 0..N-1 present once, all with the same N; the first
 * missing one is named. Errors are MW_EDATA (MW_EIO when the path cannot be read):
 *   "DIR: TFDS shard NAME-train.tfrecord-00003-of-00016 is missing (15 of 16 found)"
 *   "DIR: no train shards (TFDS splits there: test, validation)"
 *   "DIR: shards of two data sets for split train: A and B; expected one" */
#ifndef MW_WORKER_DATA_TFRECORD_SHARDS_H
#define MW_WORKER_DATA_TFRECORD_SHARDS_H

#include <stddef.h>

#include "common/status.h"

typedef struct {
    size_t count;
    char **paths; /* count paths, in shard order, each malloc'ed */
} mw_tfrecord_shards;

/* The shards path names for split ("train", "test", ...; used for directories) into s
 * (initialised here; freed with mw_tfrecord_shards_free, also after a failure). */
mw_status mw_tfrecord_shards_find(mw_tfrecord_shards *s, const char *path, const char *split);
void mw_tfrecord_shards_free(mw_tfrecord_shards *s);

/* 1 when name (no directory) is a sharded name, PREFIX-IIIII-of-NNNNN (1 to 6 digits each)
 * with PREFIX "NAME-SPLIT.tfrecord" (TFDS), "NAME-SPLIT" or "SPLIT" (models garden): then
 * *index, *total (index < total), the prefix's length *plen, and the split (not
 * NUL-terminated) at name + *split_at, *split_len bytes. */
int mw_tfrecord_shard_name(const char *name, unsigned *index, unsigned *total, size_t *plen,
                           size_t *split_at, size_t *split_len);

#endif
