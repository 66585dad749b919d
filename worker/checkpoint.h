/* Checkpoint files: the training state in a layout-independent file.
 *
 * A checkpoint holds the model description, the real parameters and optimizer slots packed
 * tensor by tensor (no arena padding, so nothing depends on the number of ranks), and the
 * counters needed to continue exactly where training stopped. The file format (header with
 * magic and version, zlib-compressed sections with a CRC32 each) is in docs/checkpoint.md;
 * the reader bounds-checks every size before it allocates or reads. A directory of them (ckpt-N
 * and its index) is worker/checkpoint_dir.h; the model's arrays in and out of the packed layout,
 * worker/checkpoint_pack.h.
 *
 * No MPI here: the chief reads (or serializes) and broadcasts the bytes itself. */
#ifndef MW_WORKER_CHECKPOINT_H
#define MW_WORKER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define MW_CKPT_VERSION 1
/* The most parameters a checkpoint holds: each section (parameters, each optimizer slot) is at
 * most 1 GiB of float32 (2^28 values); a training run is refused at start above it. */
#define MW_CKPT_MAX_PARAMS (((size_t)1 << 30) / sizeof(float))

typedef struct {
    char *model_json; /* model description (Keras JSON text), owned; "" when none */
    float *params;    /* owned; nparams real parameters, packed tensor by tensor */
    size_t nparams;
    float *slot1, *slot2; /* owned optimizer slots packed like params: Adam m and v; SGD:
                             slot1 = velocity, slot2 NULL; NULL when absent */
    size_t nslots;        /* floats in each present slot: nparams, or 0 with no slots */
    char optimizer[16];   /* mw_optimizer_names (worker/opts.h) */
    long opt_step;        /* the optimizer's iterations (Adam's t, the schedules' step) */
    int epoch;            /* epochs completed */
    long step_in_epoch;   /* steps done in the current epoch (0 at an epoch boundary) */
    long global_step;     /* steps done in all */
    uint64_t seed;        /* shuffle and initialization seed */
    long global_batch;    /* examples per step */
    double learning_rate;
    float *slot3; /* owned: the third slot (Adam/AdamW vhat with amsgrad, RMSprop's average
                     gradient; kernels/optim.h), NULL when absent; needs slot2 */
    /* mixed_float16's dynamic loss scale (Keras' LossScaleOptimizer dynamic_scale and
     * step_counter): the optional `lscale` section, written when has_loss_scale */
    int has_loss_scale;
    double loss_scale;     /* a power of 2 */
    long loss_scale_steps; /* finite steps since it last changed */
} mw_ckpt;

/* Zero everything (pointers NULL). Free is safe on a half-filled struct and leaves it
 * initialized again. */
void mw_ckpt_init(mw_ckpt *c);
void mw_ckpt_free(mw_ckpt *c);

/* The exact file bytes of c; *data is malloc'ed (owned by the caller). MW_EINVAL when c is
 * inconsistent (unknown optimizer, slot2 without slot1, a section over 1 GiB, ...). */
mw_status mw_ckpt_serialize(const mw_ckpt *c, void **data, size_t *nbytes);
/* Parse and fully validate file bytes from memory; name prefixes the messages (a path).
 * c must be initialized; on success its old contents are freed and replaced, on failure it is
 * left unchanged. MW_ECKPT "name: what is wrong (expected ...)" for bad bytes. */
mw_status mw_ckpt_read_buffer(mw_ckpt *c, const void *data, size_t nbytes, const char *name);
/* Read and validate one file; MW_EIO when it cannot be read, MW_ECKPT when it is bad. Never
 * blocks and never follows a symbolic link at path (O_NONBLOCK, O_NOFOLLOW): a FIFO, device,
 * directory or link is MW_EIO "PATH: is a FIFO (expected a checkpoint file)". Header first:
 * the header and the section table are read alone and checked against the file's size, so a
 * file that ends early or goes on beyond its last section is MW_ECKPT naming both sizes, and
 * is never read whole. */
mw_status mw_ckpt_read(mw_ckpt *c, const char *path);
/* Write one file atomically: path.tmp-<pid>, write, fsync, rename, fsync of the directory.
 * MW_EIO naming the file on any failure; the temporary file is removed and an existing file
 * at path is untouched. */
mw_status mw_ckpt_write(const mw_ckpt *c, const char *path);

#endif
