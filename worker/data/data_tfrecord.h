/* TFRecord shards of tf.train.Example as --data (worker/data/data_tfrecord.c; docs/tfrecord.md):
 * a directory holding a training split's shards (TensorFlow Datasets' NAME-train.tfrecord-
 * 00000-of-00008, the models garden's train-00000-of-01024, or *.tfrecord files;
 * tfrecord_shards.h) and a test split's (else a validation split's). Each split's shards are
 * read once, in order, at the start (both CRCs of every record checked, every Example parsed)
 * for the record offsets and the labels; the encoded images stay in the shards and are read
 * and decoded as batches need them (worker/data/stream.h), so memory holds 12 bytes and a
 * label per example.
 *
 * Features: the image is a bytes feature, --image-key, else "image/encoded" when the first
 * record has it (models garden), else "image" (TFDS); the label an int64 feature, --label-key,
 * else "image/class/label", else "label". A record holds one image and one label (a list of
 * more is refused, as tf.io.parse_single_example with FixedLenFeature([]) refuses it). Each
 * label must lie in [0, --classes) (without --classes, below 65536; the classes are then the
 * largest label + 1). A compressed (GZIP or ZLIB) shard is refused with how to decompress it:
 * records are read in any order. The held-out split must exist and be other files than the
 * training split's: plain *.tfrecord names (no split in them) are refused, since every split
 * would be all of them. */
#ifndef MW_WORKER_DATA_DATA_TFRECORD_H
#define MW_WORKER_DATA_DATA_TFRECORD_H

#include "worker/data/data_formats.h"

extern const mw_data_reader mw_reader_tfrecord;

#endif
