/* A tf.train.Example (the record TensorFlow Datasets and the TF models garden write into
 * TFRecord shards, worker/data/tfrecord.h): named features, each a list of byte strings,
 * floats or 64-bit integers. Parsed by the parser protobuf-c generates from
 * worker/data/example.proto (TensorFlow's field numbers).
 *
 * A parsed example answers by key: the first byte string of a bytes feature (an encoded
 * image: "image/encoded" in the models garden's shards, "image" in TFDS's), the int64 list of
 * an int64 feature ("image/class/label", "label"), the float list of a float feature. When a
 * key appears more than once, the last one counts (as protobuf's map fields say). Every
 * failure is MW_EDATA, "WHERE: ..." with WHERE as given to mw_example_parse (the shard and the
 * record index):
 *   "not a tf.train.Example (the protobuf does not parse, N bytes)"
 *   "no feature 'KEY' (features: a, b, c)"
 *   "feature 'KEY' is an int64 list; expected a bytes list"
 *   "feature 'KEY' is an empty bytes list; expected at least one value" */
#ifndef MW_WORKER_DATA_EXAMPLE_H
#define MW_WORKER_DATA_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef enum {
    MW_EXAMPLE_NONE, /* a feature with no list set */
    MW_EXAMPLE_BYTES,
    MW_EXAMPLE_FLOAT,
    MW_EXAMPLE_INT64,
} mw_example_kind;

typedef struct mw_example mw_example;

/* Parse nbytes at bytes (a record's data) into *out; where names the record in messages
 * ("train-00000-of-00001: record 7"). The example keeps its own copy of what it needs: bytes
 * may be reused afterwards. Errors: MW_EDATA as above, MW_ENOMEM. */
mw_status mw_example_parse(mw_example **out, const uint8_t *bytes, size_t nbytes,
                           const char *where);
void mw_example_free(mw_example *e);

/* The first value of bytes feature key: *data (borrowed from e) and *nbytes. */
mw_status mw_example_bytes(const mw_example *e, const char *key, const uint8_t **data,
                           size_t *nbytes);
/* The values of int64 feature key (*values borrowed from e, *count >= 1). */
mw_status mw_example_int64s(const mw_example *e, const char *key, const int64_t **values,
                            size_t *count);
/* The values of float feature key (*values borrowed from e, *count >= 1). */
mw_status mw_example_floats(const mw_example *e, const char *key, const float **values,
                            size_t *count);

/* The features in the order they were written, for listing: how many, and feature i's key,
 * kind and number of values. */
size_t mw_example_count(const mw_example *e);
const char *mw_example_key(const mw_example *e, size_t i, mw_example_kind *kind, size_t *count);
/* Value j of bytes feature i (kind MW_EXAMPLE_BYTES, j below its count). */
const uint8_t *mw_example_bytes_at(const mw_example *e, size_t i, size_t j, size_t *nbytes);
/* The values of feature i of kind MW_EXAMPLE_FLOAT / MW_EXAMPLE_INT64 (else NULL). */
const float *mw_example_floats_at(const mw_example *e, size_t i);
const int64_t *mw_example_int64s_at(const mw_example *e, size_t i);

/* "bytes list", "float list", "int64 list" or "feature with no list". */
const char *mw_example_kind_name(mw_example_kind k);

#endif
