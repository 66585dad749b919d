/* Decoding one encoded image held in memory (JPEG, PNG, GIF's first frame, BMP) into uint8
 * pixels, as Keras' image_dataset_from_directory does on TensorFlow (image_decode.c;
 * docs/images.md); image_resize.h resizes them to the model's input.
 *
 * The format is sniffed from the first bytes, never from the file name. The channel count is
 * what Keras' color_mode asks of tf.io.decode_image(channels=N, expand_animations=False):
 * 1 (grayscale), 3 (rgb) or 4 (rgba), converted as TensorFlow converts them; a combination
 * TensorFlow refuses (a GIF as 1 or 4 channels, a JPEG as 4, a BMP as 1) is refused here too.
 * A declared size above MW_IMAGE_MAX_PIXELS is refused before anything is allocated. Every
 * error is one message naming the image (the name passed in) with MW_EDATA (exit 3), or
 * MW_ENOMEM when the pixels cannot be allocated.
 *
 * No global state: any number of threads may decode and resize at once, each its own image
 * (the error message slot is per thread). */
#ifndef MW_WORKER_DATA_IMAGE_DECODE_H
#define MW_WORKER_DATA_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* The largest image accepted, in pixels (width x height as the file declares them): 2^27, an
 * RGBA image of 512 MiB, e.g. 11585 x 11585 or 16384 x 8192. */
#define MW_IMAGE_MAX_PIXELS (UINT64_C(1) << 27)

typedef enum {
    MW_IMAGE_UNKNOWN = 0,
    MW_IMAGE_JPEG,
    MW_IMAGE_PNG,
    MW_IMAGE_GIF,
    MW_IMAGE_BMP,
} mw_image_format;

/* Decoded pixels: height rows of width pixels of channels uint8 values (HWC), owned. */
typedef struct {
    uint32_t height, width;
    int channels;
    mw_image_format format;
    uint8_t *pixels;
} mw_image;

typedef enum {
    MW_IMAGE_BILINEAR = 0, /* Keras' default interpolation */
    MW_IMAGE_NEAREST,
} mw_image_interp;

/* The format whose signature bytes[0..n) start with, MW_IMAGE_UNKNOWN when none. */
mw_image_format mw_image_sniff(const uint8_t *bytes, size_t n);
/* "JPEG", "PNG", "GIF", "BMP" or "unknown". */
const char *mw_image_format_name(mw_image_format f);

/* Decode bytes[0..n) into *out (channels 1, 3 or 4). name: for messages (the file, or a
 * record of a shard). On failure *out is left empty (pixels NULL). */
mw_status mw_image_decode(mw_image *out, const uint8_t *bytes, size_t n, int channels,
                          const char *name);
void mw_image_free(mw_image *img);

#endif
