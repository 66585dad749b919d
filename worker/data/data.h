/* The data set: images of any shape and their labels from IDX (Fashion-MNIST by default),
 * NumPy .npy/.npz, CIFAR binary files, CSV, a text corpus, or encoded images left on disk (an
 * image folder, TFRecord shards: worker/data/stream.h), and the epoch order.
 *
 * Images stay in their stored type (uint8 or float32; 47 MB for Fashion-MNIST's train set
 * instead of 188 MB of floats; encoded images stay encoded) and are converted only when a batch
 * is assembled. Every rank holds the whole set's table and derives the same example order from
 * the shared seed, so the global batch of step k holds the same example ids whatever the cluster
 * layout (docs/design.md, "The global batch is the unit").
 *
 * IDX format (big-endian): a 4-byte magic 0x0000TTNN (TT = 0x08 for unsigned bytes, NN =
 * number of dimensions), NN 4-byte dimension sizes, then the data, row-major. Images are
 * (count, rows, cols), labels (count). Files may be gzip-compressed or plain. */
#ifndef MW_WORKER_DATA_H
#define MW_WORKER_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/model/inputs.h"

#define MW_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

#define MW_IDX_IMAGES_MAGIC 0x00000803u        /* unsigned bytes, 3 dimensions */
#define MW_IDX_LABELS_MAGIC 0x00000801u        /* unsigned bytes, 1 dimension */
#define MW_DATA_MAX_DIM 4096u                  /* largest accepted rows or cols */
#define MW_DATA_MAX_NBYTES (UINT64_C(1) << 32) /* largest accepted image data */

/* How one image is stored. */
typedef enum {
    MW_IMAGES_U8,      /* uint8, scaled to [0, 1] (pixel / 255) when a batch is assembled */
    MW_IMAGES_F32,     /* float32 (little-endian), used as stored */
    MW_IMAGES_TOKENS,  /* integer token ids (N, T) (little-endian, tok_size bytes, tok_signed),
                          as floats (exact: every id is checked to lie in [0, 2^24)) */
    MW_IMAGES_ENCODED, /* encoded image files (JPEG, PNG, GIF, BMP) on disk, decoded and resized
                          when a batch is assembled (worker/data/stream.h; images is NULL);
                          0..255 then scaled as uint8 */
} mw_image_type;

struct mw_stream;

/* A set of images of any (H, W, C) with int32 labels. images points at example 0's first
 * byte; example i starts at images + i * image nbytes (mw_dataset_image_nbytes). The bytes
 * are either a heap block the set owns (map == NULL) or lie inside a read-only file mapping
 * the set owns (map != NULL: an uncompressed .npy, shared with every rank of the node through
 * the page cache; only the pages of the examples a rank assembles are ever read). */
typedef struct {
    uint8_t *images;  /* see above; count * rows * cols * channels elements of `type` */
    int32_t *labels;  /* owned; count entries, each in [0, num_classes); NULL with targets */
    float *targets;   /* owned, or NULL: float targets, count x target_width (regression
                         values, one-hot or multi-hot classes; worker/model/loss.h) */
    int target_width; /* 0: the labels are the targets */
    int label_width;  /* labels per example: 1, or a sequence's T ((N, T) labels: one per
                         position, for a model whose output is (None, T, classes)), or an
                         image's H x W ((N, H, W) labels: one per pixel) */
    int label_rows;   /* (N, H, W) labels: H (label_width / H columns); 0 otherwise */
    float *weights;   /* owned, or NULL: each example's sample weight (>= 0; Keras'
                         fit(sample_weight=...)): its loss is multiplied by it; weight_width
                         per example (1, or one per label position) */
    int weight_width;
    float *mask_w;   /* owned, or NULL: a masked loss (mw_dataset_set_mask): each example's
                        factor in its batch (mw_dataset_mask_batches) */
    uint32_t *valid; /* owned with mask_w: each example's positions that count (1 or 0
                        for an example without positions) */
    int mask_ignore; /* with mask_w: the labels ignore_label count for nothing */
    int32_t ignore_label;
    int mask_pad;         /* with mask_w: the positions whose input id is 0 count for nothing */
    int mask_off;         /* with mask_pad: where in an example's row the ids of the mask begin (a
                             named input's part; 0 for one input) */
    mw_input_parts parts; /* several named inputs (x_train.<name>): each example's row holds
                             them side by side (worker/model/inputs.h); n 0 for one input */
    uint32_t count, rows, cols, channels;
    mw_image_type type;
    int tok_size, tok_signed; /* MW_IMAGES_TOKENS: bytes per id (1, 2, 4, 8), signed */
    int64_t tok_max;          /* MW_IMAGES_TOKENS: the largest id, found when the set is read */
    int channel_major;        /* 1: each image is stored (C, H, W) (CIFAR); batches are (H, W, C) */
    struct mw_stream *stream; /* owned, MW_IMAGES_ENCODED: where each example's encoded image
                                 lies and how it is decoded */
    struct mw_prefetch *prefetch; /* owned, or NULL: the pool decoding ahead (prefetch.h) */
    uint32_t skipped;             /* --skip-bad-examples: the bad examples dropped */
    char skip_first[512];         /* ... the first one's message ("" when none) */
    int num_classes;
    void *map; /* the mapping holding images, or NULL (owned) */
    size_t map_nbytes;
    /* The model's input pipeline (worker/data/preprocess.h), applied as batches are assembled;
     * set by the session after the model is built. */
    const struct mw_preprocess *pre; /* borrowed, or NULL */
    int augment;                     /* 1: its random layers act (the training set) */
    uint64_t aug_seed;               /* their key is (aug_seed, epoch, example id) */
    int epoch;                       /* the epoch being trained (worker/train.c sets it) */
} mw_dataset;

/* One little-endian integer of size bytes (1, 2, 4, 8), signed or not, as int64 (an unsigned
 * 64-bit value above INT64_MAX as INT64_MAX). */
static inline int64_t mw_token_at(const uint8_t *p, int size, int is_signed)
{
    uint64_t u = 0;
    for (int b = size - 1; b >= 0; b--)
        u = u << 8 | p[b];
    if (is_signed && size < 8 && (u >> (8 * size - 1)) & 1)
        u |= ~UINT64_C(0) << (8 * size); /* sign-extend */
    return !is_signed && size == 8 && u > INT64_MAX ? INT64_MAX : (int64_t)u;
}

/* What --data reads besides the path. */
typedef struct {
    int classes;         /* --classes: 0 = largest label (train and test) + 1 */
    int cifar_fine;      /* CIFAR-100: 1 = the fine (100) labels, 0 = the coarse (20) */
    int sequence_length; /* --sequence-length T: --data is a text corpus (data_text.c) */
    /* Encoded images (an image folder, TFRecord shards; docs/images.md): */
    uint32_t image_h, image_w; /* --image-size: the decoded size (0: the first image's) */
    int color_channels;        /* --color-mode: 1 grayscale, 3 rgb (0: 3), 4 rgba */
    int interp;                /* --interpolation: mw_image_interp */
    int crop;                  /* --crop-to-aspect-ratio */
    const char *image_key;     /* --image-key: the Example feature of the encoded image (NULL:
                                  "image/encoded", else "image") */
    const char *label_key;     /* --label-key (NULL: "image/class/label", else "label") */
    int skip_bad;              /* --skip-bad-examples: drop a bad record instead of failing */
    const char *shard_cache;   /* --shard-cache: where compressed shards' plain copies go (NULL:
                                  beside the shards) */
    double validation_split;   /* --validation-split: an image folder's held-out fraction */
    int64_t validation_seed;   /* --validation-seed (Keras' seed; -1: not given) */
} mw_data_opts;

void mw_dataset_init(mw_dataset *d);
/* Release the arrays and reset to the init state; safe on a half-built or freed set. */
void mw_dataset_free(mw_dataset *d);

/* The first error met decoding an encoded image while assembling batches (MW_OK: none):
 * mw_dataset_batch cannot return one, so the caller asks after each step. */
mw_status mw_dataset_status(const mw_dataset *d);

/* Encoded images: start a pool of threads (>= 1) that decodes the examples hinted ahead into a
 * cache of capacity examples (worker/data/prefetch.h); timeout: the longest a batch waits for
 * one being decoded. Nothing for other sets. */
mw_status mw_dataset_prefetch_start(mw_dataset *d, int threads, uint32_t capacity, double timeout);
/* Queue the n examples ids for the pool (no-op without one). */
void mw_dataset_prefetch_hint(const mw_dataset *d, const uint32_t *ids, uint32_t n);
/* Seconds batches waited for the pool since the last call (0 without one). */
double mw_dataset_input_wait(const mw_dataset *d);

/* Assemble a batch of n examples: x (n, rows, cols, channels) as floats (uint8 pixels / 255,
 * float32 as stored, channel-major records transposed), y = the targets (n labels, or n x
 * target_width floats; y may be NULL), for
 * the example ids given (each < d->count). Reads only those examples' bytes. With an input
 * pipeline (d->pre) each example then goes through it: x is (n, its output shape), uint8
 * pixels stay 0..255 when it rescales or normalizes, and its random layers act when
 * d->augment, keyed by (d->aug_seed, d->epoch, id). */
void mw_dataset_batch(const mw_dataset *d, float *x, void *y, const uint32_t *ids, int n);
/* The loss weights of the n examples ids into w, and w; NULL (w untouched) when the set has
 * none (every weight 1). One per example, or with labels per position (label_width T > 1) T
 * per example (n x T): the example's sample weight, times with a mask (mw_dataset_set_mask)
 * the example's factor in its batch (mw_dataset_mask_batches) where the position counts, 0
 * where it does not. */
float *mw_dataset_batch_weights(const mw_dataset *d, float *w, const uint32_t *ids, int n);
/* The loss's mask, as Keras applies one (keras/src/losses/loss.py, apply_mask): with
 * has_ignore (SparseCategoricalCrossentropy(ignore_class=label)) the examples, or positions,
 * of that label, and with pad (the model's output carries Embedding(mask_zero)'s padding
 * mask; token ids only) the positions whose input id is 0, count for nothing, and a batch's
 * loss is divided by the positions that count: each weight gets a factor, 0 where a position
 * does not count and total / valid in float32 where it does (total: the batch's positions),
 * so that the usual sum / (global batch x positions) is sum / valid. Counts each example's
 * valid positions once (reading a token set's ids); allocates count factors and counts
 * (MW_ENOMEM naming what). Neither: no mask, nothing allocated. */
mw_status mw_dataset_set_mask(mw_dataset *d, int has_ignore, int32_t label, int pad,
                              const char *what);
/* The factors for batches of gb of ids[0..n) (the last one shorter when gb does not divide
 * n; ids NULL: the examples 0..n-1): every rank computes the same from the epoch order, so
 * the valid count is the global batch's, whatever the cluster layout. A batch with no valid
 * position gets 0 (Keras' divide_no_nan). Nothing without a mask. */
void mw_dataset_mask_batches(mw_dataset *d, const uint32_t *ids, long n, long gb);
/* The classes beside an ignore label (--classes not given): the largest other label of train
 * and test + 1, when the ignore label lies above every class (255 beside labels 0..9 is not
 * a class); num_classes is left alone otherwise. */
void mw_dataset_classes_without(mw_dataset *train, mw_dataset *test, int32_t ignore);
/* Bytes of one example's target in a batch: 4 (an int32 label) or 4 x target_width. */
size_t mw_dataset_target_nbytes(const mw_dataset *d);
/* Integer labels (N,) as float targets (N, 1), for a loss that takes floats (a binary or
 * regression loss on a Dense(1)); nothing when the set has float targets already. what names
 * the set in messages. */
mw_status mw_dataset_labels_as_targets(mw_dataset *d, const char *what);

/* The first token id at or above limit (MW_IMAGES_TOKENS): 1 and where it is (example,
 * position, value); 0 when none is, known from tok_max without a scan. */
int mw_dataset_find_token(const mw_dataset *d, int64_t limit, uint32_t *example, uint32_t *pos,
                          int64_t *value);
/* The same over the per values of each example from off on (a named input's part); *pos
 * counts from off. */
int mw_dataset_find_token_in(const mw_dataset *d, size_t off, size_t per, int64_t limit,
                             uint32_t *example, uint32_t *pos, int64_t *value);

/* Bytes of one stored image. */
size_t mw_dataset_image_nbytes(const mw_dataset *d);

/* Classes without a training example: labels decide the class count (the largest label + 1,
 * without --classes), so one stray label (200 in a 10-class set, or a test label above every
 * training label) makes a 201-class model that cannot learn the empty ones. Returns how many
 * of train->num_classes have no example in train, and (when any) a warning for the user in
 * note (cap bytes) naming path, the count, the largest label and the set it is in;
 * classes_given: --classes was given (its value is num_classes). */
int mw_dataset_unseen_classes(const mw_dataset *train, const mw_dataset *test, const char *path,
                              int classes_given, char *note, size_t cap);

/* The epoch's example order: a seeded permutation of 0..n-1 over the whole set (TF's
 * shuffle with buffer = len(train)). The same (seed, epoch) gives the same order on every
 * machine; different epochs give different orders. */
void mw_dataset_epoch_order(uint32_t *ids, uint32_t n, uint64_t seed, int epoch);
/* --no-shuffle: 0..n-1, the file's order, every epoch. */
void mw_dataset_file_order(uint32_t *ids, uint32_t n);

#endif
