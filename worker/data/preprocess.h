/* Keras preprocessing layers as the model's input pipeline, applied to each example when a
 * batch is assembled (worker/data/data.h), before the model's first layer sees it.
 *
 * In Keras 3 the input pipeline is part of the model: Rescaling, Normalization, RandomFlip,
 * RandomCrop and RandomTranslation are accepted as a leading run of the model's layers (right
 * after its input; any other layer before them is an error). What they compute, as Keras 3.6
 * does, per example of shape (H, W, C):
 *   Rescaling(scale, offset)        x * scale + offset, each one number or one per channel
 *   Normalization(mean, variance)   (x - mean) / max(sqrt(variance), 1e-7), per channel (axis
 *                                   -1) or one value; invert: mean + x * max(sqrt(var), 1e-7)
 *   RandomFlip(mode)                training: with probability 1/2 the image is mirrored
 *                                   left-right (horizontal), upside down (vertical), or both
 *                                   at once (horizontal_and_vertical); inference: identity
 *   RandomCrop(height, width)       training, when H > height and W > width: a window at a
 *                                   uniform offset (0..H-height, 0..W-width); otherwise, and at
 *                                   inference, Keras's fixed window: the aspect-ratio box
 *                                   centred, its first height x width values (a 32x32 image
 *                                   cropped to 28x28 keeps rows and columns 0..27). Output
 *                                   (height, width, C); a smaller input is refused
 *   RandomTranslation(hf, wf, ...)  training: output (y, x) samples the input at (y - dy,
 *                                   x - dx), dy = uniform(hf range) * H, dx = uniform(wf range)
 *                                   * W, bilinear or nearest, outside the image by fill_mode:
 *                                   reflect (d c b a | a b c d | d c b a), wrap, nearest (the
 *                                   edge value) or constant (fill_value), as
 *                                   jax.scipy.ndimage.map_coordinates does; inference: identity
 *
 * Random draws are keyed by (seed, epoch, example id, layer), like Dropout's masks, so every
 * cluster layout trains on the same augmented images (Keras draws one crop per batch; here
 * each example gets its own). Images stored as uint8 reach a pipeline that rescales or
 * normalizes as their stored values 0..255, as Keras would feed them; without such a layer they
 * are scaled to [0, 1] as always.
 *
 * This module knows neither the model nor the data set: the Keras reader (worker/keras/keras.c)
 * builds the pipeline, the model owns it (mw_model.pre), the data set applies it. */
#ifndef MW_WORKER_PREPROCESS_H
#define MW_WORKER_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/status.h"

typedef struct mw_preprocess mw_preprocess;

/* The random choices of one layer for one example (tests force them). */
typedef struct {
    int flip;           /* RandomFlip: 1 = mirror */
    int crop_y, crop_x; /* RandomCrop: the window's top-left corner */
    float dy, dx;       /* RandomTranslation: pixels down and right */
} mw_pre_draw;

/* 1 when cls is one of the Keras classes above. */
int mw_preprocess_is_layer(const char *cls);

/* Append Keras layer cls (config cfg, layer name; origin names the model file in messages) to
 * the pipeline *pp, made on first use. (*h, *w, *c): the shape entering the layer, updated to
 * the shape leaving it. nlayers: the model's layers so far (must be 0: preprocessing leads);
 * flat_input: the model's input is flat (None, D) (refused); is_last: nothing follows (refused).
 * Errors name the layer, the field and what is supported: MW_EMODEL for a bad config,
 * MW_EUNSUPPORTED for valid Keras this program does not implement. */
mw_status mw_preprocess_add(mw_preprocess **pp, int *h, int *w, int *c, int nlayers, int flat_input,
                            int is_last, const char *cls, const json_t *cfg, const char *name,
                            const char *origin);
/* Free the pipeline and NULL *pp; safe on NULL. */
void mw_preprocess_close(mw_preprocess **pp);

/* Elements of one example entering (in) and leaving (out) the pipeline. */
size_t mw_preprocess_in_count(const mw_preprocess *p);
size_t mw_preprocess_out_count(const mw_preprocess *p);
/* 1 when a Rescaling or Normalization layer takes uint8 images as their stored values. */
int mw_preprocess_takes_raw(const mw_preprocess *p);
int mw_preprocess_nlayers(const mw_preprocess *p);

/* The draws of every layer for example id of epoch under seed (draws: nlayers entries). */
void mw_preprocess_draw(const mw_preprocess *p, uint64_t seed, int epoch, uint32_t id,
                        mw_pre_draw *draws);
/* One example: a (in_count, (H, W, C)) holds the input and is overwritten; b is scratch of
 * in_count floats; out receives out_count floats. training: the random layers act with
 * draws[i] for layer i (ignored otherwise; may then be NULL). */
void mw_preprocess_apply(const mw_preprocess *p, float *out, float *a, float *b, int training,
                         const mw_pre_draw *draws);

/* 0 when a and b (either may be NULL: no pipeline) compute the same, else 1 with `what`
 * (len bytes) naming the first difference for a user, a being the checkpoint's model and b
 * --model's: "input pipeline layer 1 (random_crop): RandomCrop 24x24 in the checkpoint,
 * 28x28 in --model". Names and seeds are not compared. */
int mw_preprocess_diff(const mw_preprocess *a, const mw_preprocess *b, char *what, size_t len);

/* Rows like the model summary's, one per layer: name (class), output shape, 0 params. */
void mw_preprocess_summary(const mw_preprocess *p, FILE *f);

#endif
