/* Resizing decoded pixels (an mw_image, image_decode.h) to the model's input as Keras'
 * image_dataset_from_directory does on TensorFlow (image_resize.c; docs/images.md). No global
 * state and no allocation: any number of threads resize at once, and nothing fails. */
#ifndef MW_WORKER_DATA_IMAGE_RESIZE_H
#define MW_WORKER_DATA_IMAGE_RESIZE_H

#include <stdint.h>

#include "worker/data/image_decode.h"

/* Resize src to height x width into dst (height * width * src->channels float32 values, 0..255
 * unscaled, HWC) as tf.image.resize does (half-pixel centers, no antialiasing); crop: first take
 * the centered crop of the target's aspect ratio, as Keras' crop_to_aspect_ratio=True does.
 * height, width > 0; src->channels 1 to 4, as mw_image_decode gives. */
void mw_image_resize(float *dst, const mw_image *src, uint32_t height, uint32_t width,
                     mw_image_interp interp, int crop);
/* The same with every value divided by divisor as it is stored (255: the [0, 1] inputs
 * mwtrain trains on, bit for bit what dividing mw_image_resize's output gives, without a
 * second pass over the batch's memory). */
void mw_image_resize_scaled(float *dst, const mw_image *src, uint32_t height, uint32_t width,
                            mw_image_interp interp, int crop, float divisor);

#endif
