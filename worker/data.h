/* The data set: IDX image/label files (Fashion-MNIST by default) and the epoch order.
 *
 * Images stay uint8 in memory (47 MB for Fashion-MNIST's train set instead of 188 MB of
 * floats) and are scaled to [0, 1] only when a batch is assembled. Every rank loads the
 * whole set and derives the same example order from the shared seed, so the global batch
 * of step k holds the same example ids whatever the cluster layout (DESIGN.md, "Global
 * batch is the unit").
 *
 * IDX format (big-endian): a 4-byte magic 0x0000TTNN (TT = 0x08 for unsigned bytes, NN =
 * number of dimensions), NN 4-byte dimension sizes, then the data, row-major. Images are
 * (count, rows, cols), labels (count). Files may be gzip-compressed or plain. */
#ifndef MW_WORKER_DATA_H
#define MW_WORKER_DATA_H

#include <stdint.h>

#include "common/status.h"

#define MW_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

#define MW_IDX_IMAGES_MAGIC 0x00000803u        /* unsigned bytes, 3 dimensions */
#define MW_IDX_LABELS_MAGIC 0x00000801u        /* unsigned bytes, 1 dimension */
#define MW_DATA_MAX_DIM 4096u                  /* largest accepted rows or cols */
#define MW_DATA_MAX_NBYTES (UINT64_C(1) << 32) /* largest accepted image data */

typedef struct {
    uint8_t *images; /* owned; count * rows * cols bytes, row-major per image (H, W, 1 channel) */
    int32_t *labels; /* owned; count entries, each in [0, num_classes) */
    uint32_t count, rows, cols;
    int num_classes;
} mw_dataset;

void mw_dataset_init(mw_dataset *d);
/* Release the arrays and reset to the init state; safe on a half-built or freed set. */
void mw_dataset_free(mw_dataset *d);

/* Load an IDX image file (magic 0x00000803, 3 dims) and label file (0x00000801, 1 dim),
 * each gzip-compressed or plain. Checks the headers (magic, dimensions, size limits, equal
 * counts, count > 0) before allocating, that each body is complete with nothing after it
 * (for gzip, that the stream and its CRC are intact), and that every label is below
 * num_classes (>= 1).
 * d must be initialised. On success its old contents are freed and replaced; on failure
 * d is unchanged, nothing is leaked and mw_err_msg() names the file and the problem. */
mw_status mw_dataset_load(mw_dataset *d, const char *images_path, const char *labels_path,
                          int num_classes);

/* Load train and test sets from dir with the standard file names (train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), each with a
 * .gz suffix or without (.gz preferred when both exist), and check that train and test
 * images have the same size. A missing file's message names the directory and the names
 * tried. Same ownership rules as mw_dataset_load: on failure train and test are unchanged. */
mw_status mw_dataset_load_dir(mw_dataset *train, mw_dataset *test, const char *dir,
                              int num_classes);

/* Assemble a batch of n examples: x (n, rows, cols, 1) = pixel / 255.0f, y (n) = labels
 * (y may be NULL), for the example ids given (each < d->count). */
void mw_dataset_batch(const mw_dataset *d, float *x, int32_t *y, const uint32_t *ids, int n);

/* The epoch's example order: a seeded permutation of 0..n-1 over the whole set (TF's
 * shuffle with buffer = len(train)). The same (seed, epoch) gives the same order on every
 * machine; different epochs give different orders. */
void mw_dataset_epoch_order(uint32_t *ids, uint32_t n, uint64_t seed, int epoch);

#endif
