/* Checkpoints: the training state in a layout-independent file, and a directory of them.
 *
 * A checkpoint holds the model description, the real parameters and optimizer slots packed
 * tensor by tensor (no arena padding, so nothing depends on the number of ranks), and the
 * counters needed to continue exactly where training stopped. The file format (header with
 * magic and version, zlib-compressed sections with a CRC32 each) is in docs/checkpoint.md;
 * the reader bounds-checks every size before it allocates or reads.
 *
 * Directories use TensorFlow's layout: ckpt-1, ckpt-2, ... and a text `checkpoint` index
 * naming the latest and all kept ones. Files are written atomically (temporary file, fsync,
 * rename, fsync of the directory) and the index changes only after the data is durable.
 *
 * No MPI here: the chief reads (or serializes) and broadcasts the bytes itself. */
#ifndef MW_WORKER_CHECKPOINT_H
#define MW_WORKER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/model/model.h"

#define MW_CKPT_VERSION 1
#define MW_CKPT_INDEX "checkpoint" /* the index file's name in a checkpoint directory */
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

/* Save c as dir/ckpt-N, N = 1 + the highest number in the index or the directory (created,
 * with parents, when missing). Order: the checkpoint is made durable, then the index is
 * rewritten atomically, then checkpoints beyond `keep` are deleted oldest first (keep <= 0
 * keeps all). On failure earlier checkpoints and the old index are intact; MW_EIO names the
 * directory. *number_out (may be NULL) gets N. */
mw_status mw_ckpt_save(const char *dir, const mw_ckpt *c, int keep, int *number_out);
/* Read the latest valid checkpoint of dir into c. Candidates: the index's entries, newest
 * first, then any other ckpt-N in the directory, highest N first. Index entries must name files
 * inside dir: one with a '/' or that is "." or ".." gets a warning and is never opened. An
 * unusable candidate (missing, not a regular file, corrupt) gets a warning naming it and the
 * reason, and the previous one is tried. MW_ECKPT "no checkpoint in DIR" when there is none,
 * "no valid checkpoint in DIR (tried: ...)" when none is valid. *path_out (may be NULL) gets
 * the malloc'ed path of the one used. */
mw_status mw_ckpt_load_latest(const char *dir, mw_ckpt *c, char **path_out);

/* What a checkpoint directory holds, from its listing and its index, without reading any
 * checkpoint: whether a restore has anything to try, and the leftovers that only look like
 * checkpoints, for messages. */
typedef struct {
    int complete;     /* entries worth reading: ckpt-N files of the directory and files its
                         index names that are non-empty regular files (or symbolic links,
                         which the reader refuses: a deliberate layout, not a leftover) */
    char debris[640]; /* the rest, e.g. "ckpt-1.tmp-4 (temporary file), ckpt-2 (an empty
                         file), checkpoint (index entry ckpt-9: missing)"; "" when none */
} mw_ckpt_survey;

/* Survey dir (quietly: no warnings). A directory that does not exist holds nothing. MW_EIO when
 * it cannot be listed. When sv->complete is 0, a restore has nothing to try, and exit status 5
 * ("no valid checkpoint") would strand a restart over mere leftovers. */
mw_status mw_ckpt_survey_dir(const char *dir, mw_ckpt_survey *sv);

/* Delete the temporary files that interrupted saves left in dir (ckpt-N.tmp-PID and
 * checkpoint.tmp-PID, regular files only) and return how many; their names, comma-separated,
 * go to removed (cap >= 64 bytes; "" when none). A file that cannot be deleted gets a warning.
 * Only while no other process saves into dir (chief.h: the directory's lock). */
int mw_ckpt_remove_temps(const char *dir, char *removed, size_t cap);

/* Between the model's arena layout (m->params, and the gradient and slot arenas of the same
 * layout) and the packed layout: m->nparams floats, each layer's kernel then bias, in layer
 * order. */
void mw_ckpt_pack(const mw_model *m, float *packed, const float *arena);
void mw_ckpt_unpack(const mw_model *m, float *arena, const float *packed);

#endif
