/* TFRecord shards (what tf.io.TFRecordWriter and TensorFlow Datasets write): reading their
 * records one after the other, or one record at a known byte offset (tfrecord_index.h finds
 * the offsets). docs/tfrecord.md describes the format; in short, each record is
 *
 *   uint64 length (little-endian)
 *   uint32 masked CRC-32C of the 8 length bytes
 *   length bytes of data (here, a serialized tf.train.Example: example.h)
 *   uint32 masked CRC-32C of the data
 *
 * with mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (common/crc32c.h). Both CRCs are
 * checked on every read. A shard may be compressed as a whole, as tf.data writes it with
 * TFRecordOptions(compression_type="GZIP") or "ZLIB": such a shard is read in order only (a
 * compressed stream cannot seek), so mw_tfrecord_read_at refuses it; decompress it (gzip -d)
 * for random access.
 *
 * Shards are untrusted input. Every failure is one MW_EDATA message naming the file, the
 * record index, its byte offset and what was expected; a length above MW_TFRECORD_MAX_RECORD
 * is refused before anything is allocated. */
#ifndef MW_WORKER_DATA_TFRECORD_H
#define MW_WORKER_DATA_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* The largest record accepted (256 MiB): a length field above it is refused unread. An encoded
 * ImageNet JPEG is well under 1 MiB; a larger record is a corrupt or hostile length. */
#define MW_TFRECORD_MAX_RECORD (UINT64_C(1) << 28)
/* The bytes of framing around each record's data: length, its CRC, the data's CRC. */
#define MW_TFRECORD_FRAMING 16u

typedef enum {
    MW_TFRECORD_AUTO, /* by the first bytes: a valid first record header, a gzip or zlib header */
    MW_TFRECORD_PLAIN,
    MW_TFRECORD_GZIP, /* one gzip stream (or several, concatenated), as tf.data writes */
    MW_TFRECORD_ZLIB, /* one zlib stream (TFRecordOptions(compression_type="ZLIB")) */
} mw_tfrecord_compression;

/* An open shard (a file, or bytes in memory). */
typedef struct mw_tfrecord mw_tfrecord;

/* Open the shard at path. With MW_TFRECORD_AUTO the compression is told from the first bytes:
 * a shard whose first 12 bytes are a record header with a matching length CRC is plain; else
 * the gzip magic 1f 8b means GZIP, a zlib header (deflate, header check a multiple of 31)
 * means ZLIB; anything else is read as plain, so that the first record's error says what is
 * wrong (an empty shard has no records). MW_EIO when the file cannot be opened (common/fs.h).
 * *out is closed with mw_tfrecord_close. */
mw_status mw_tfrecord_open(mw_tfrecord **out, const char *path, mw_tfrecord_compression c);
/* The same over nbytes at bytes (borrowed; they must outlive the shard), named name in
 * messages. */
mw_status mw_tfrecord_open_buffer(mw_tfrecord **out, const char *name, const void *bytes,
                                  size_t nbytes, mw_tfrecord_compression c);
void mw_tfrecord_close(mw_tfrecord *t);

/* The compression the shard was opened with (never AUTO), its name, and for a plain shard its
 * size in bytes (0 for a compressed one). */
mw_tfrecord_compression mw_tfrecord_kind(const mw_tfrecord *t);
const char *mw_tfrecord_name(const mw_tfrecord *t);
uint64_t mw_tfrecord_size(const mw_tfrecord *t);

/* The next record in order: *data (borrowed, valid until the next call on t) and *nbytes, and
 * *offset, where its header starts (in the uncompressed stream for a compressed shard). At the
 * end of the shard *data is NULL, *nbytes 0, and MW_OK is returned. Errors, MW_EDATA (MW_EIO
 * for a read error, MW_ENOMEM), "PATH: record I at byte offset O: ...":
 *   "truncated record header: N of 12 bytes"
 *   "length CRC mismatch (stored 0x..., computed 0x...)"
 *   "length N above the largest record accepted (M bytes)"
 *   "length N runs past the end of the shard (R bytes left after the header)"
 *   "truncated record: N of M data and CRC bytes"
 *   "data CRC mismatch (stored 0x..., computed 0x...)"
 *   "GZIP stream truncated after N uncompressed bytes" / "... corrupt: REASON"
 * After a data CRC mismatch the record's framing was whole: the cursor has moved past it, so
 * a caller that skips bad records (as tf.data's ignore_errors) may call again. After any
 * other error the next record cannot be found: every later call fails, "PATH: cannot read
 * past the error at record I". */
mw_status mw_tfrecord_next(mw_tfrecord *t, const uint8_t **data, size_t *nbytes, uint64_t *offset);
/* The index of the record mw_tfrecord_next returns next (the count read so far). */
uint64_t mw_tfrecord_position(const mw_tfrecord *t);

/* An index for mw_tfrecord_read_at meaning "not known": messages name the byte offset only. */
#define MW_TFRECORD_NO_INDEX UINT64_MAX

/* Record `index` whose header starts at byte offset of a plain shard (tfrecord_index.h), read
 * and checked as mw_tfrecord_next does, without moving the sequential position. index is for
 * messages only (MW_TFRECORD_NO_INDEX: not known). A compressed shard: MW_EUNSUPPORTED "PATH:
 * GZIP-compressed shard: records are read in order only; decompress it (gzip -d) for random
 * access". */
mw_status mw_tfrecord_read_at(mw_tfrecord *t, uint64_t offset, uint64_t index, const uint8_t **data,
                              size_t *nbytes);

/* "GZIP", "ZLIB", "plain" or "auto". */
const char *mw_tfrecord_compression_name(mw_tfrecord_compression c);

#endif
