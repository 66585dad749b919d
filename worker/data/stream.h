/* Encoded images left where they lie (an image folder's files, the records of TFRecord shards)
 * and decoded only when a batch needs them: the storage behind a data set of type
 * MW_IMAGES_ENCODED (worker/data/data.h). Memory holds the table of sources (file paths) and
 * of examples (a source and a byte offset: 12 bytes an example), never the pixels of more than
 * the batches being assembled, so a data set of any size trains in bounded memory
 * (docs/images.md, "Memory").
 *
 * Each example is decoded (worker/data/image_decode.h) into the stream's channels and resized
 * to its height x width as Keras' image_dataset_from_directory does (tf.image.resize; an image
 * already of that size is taken as it is, the same values). Any number of threads may decode at
 * once. A failure (a corrupt or truncated image, a record whose CRC fails, an Example without
 * the image feature) is kept: the first one is what mw_stream_status returns, with its message
 * naming the file (and the record), so the step that met it can end the job. */
#ifndef MW_WORKER_DATA_STREAM_H
#define MW_WORKER_DATA_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* The largest image file read (64 MiB); a larger one is refused before it is read. */
#define MW_STREAM_MAX_FILE (UINT64_C(1) << 26)
/* An example offset meaning "the whole source file is the encoded image". */
#define MW_STREAM_WHOLE_FILE UINT64_MAX

typedef struct mw_stream mw_stream;

/* What every example becomes. */
typedef struct {
    uint32_t height, width; /* 0, 0: not known yet (mw_stream_probe) */
    int channels;           /* 1, 3 or 4 (Keras' color_mode grayscale, rgb, rgba) */
    int interp;             /* mw_image_interp */
    int crop;               /* 1: crop_to_aspect_ratio */
    const char *image_key;  /* records: the Example's bytes feature holding the image (copied) */
} mw_stream_shape;

/* A new, empty stream; what: the set, for messages ("training set"). */
mw_status mw_stream_new(mw_stream **out, const mw_stream_shape *shape, const char *what);
void mw_stream_free(mw_stream *s);

/* A source file (an image file, or a TFRecord shard); *index: its number. */
mw_status mw_stream_add_source(mw_stream *s, const char *path, uint32_t *index);
/* An example: source src from byte offset (a record's header), or MW_STREAM_WHOLE_FILE. */
mw_status mw_stream_add_example(mw_stream *s, uint32_t src, uint64_t offset);
uint32_t mw_stream_count(const mw_stream *s);
/* The sources added, and 1 when the examples are records of shards (not whole files). */
uint32_t mw_stream_source_count(const mw_stream *s);
int mw_stream_is_records(const mw_stream *s);
/* A source or record of nbytes encoded bytes was added: the largest is kept for the memory
 * estimate. */
void mw_stream_note_size(mw_stream *s, uint64_t nbytes);
/* The bytes the tables take (paths included), and *largest: the largest encoded image noted. */
uint64_t mw_stream_nbytes(const mw_stream *s, uint64_t *largest);
/* The path of source src, and the source of example id. */
const char *mw_stream_source(const mw_stream *s, uint32_t src);
uint32_t mw_stream_source_of(const mw_stream *s, uint32_t id);

/* The Example feature records hold their image in (copied). */
mw_status mw_stream_set_key(mw_stream *s, const char *key);

/* Decode example id's size without keeping its pixels: *height, *width as stored. */
mw_status mw_stream_probe(const mw_stream *s, uint32_t id, uint32_t *height, uint32_t *width);
/* Set the size every example is resized to (height, width > 0). */
void mw_stream_set_size(mw_stream *s, uint32_t height, uint32_t width);
void mw_stream_shape_of(const mw_stream *s, mw_stream_shape *shape);

/* Example id as height x width x channels floats into dst: 0..255 (raw), else / 255 as a uint8
 * image is. On failure dst is zeros, the error is kept (the first one wins) and returned. Safe
 * from any number of threads. */
mw_status mw_stream_decode(mw_stream *s, float *dst, uint32_t id, int raw);
/* The first failure kept (MW_OK: none), its message set again for this thread. */
mw_status mw_stream_status(const mw_stream *s);
/* Forget the failure kept (after a scan that counted it). */
void mw_stream_clear(mw_stream *s);
/* Drop the examples whose drop[id] is not 0 (the sources stay); the rest keep their order. */
void mw_stream_drop(mw_stream *s, const uint8_t *drop);

#endif
