/* Checkpoint directories: TensorFlow's layout, ckpt-1, ckpt-2, ... and a text `checkpoint`
 * index naming the latest and all kept ones. Files are written atomically (temporary file,
 * fsync, rename, fsync of the directory) and the index changes only after the data is durable.
 * Each file is worker/checkpoint.h's format.
 *
 * No MPI here: the chief reads and writes the directory alone (worker/chief.h). */
#ifndef MW_WORKER_CHECKPOINT_DIR_H
#define MW_WORKER_CHECKPOINT_DIR_H

#include <stddef.h>

#include "common/status.h"
#include "worker/checkpoint.h"

#define MW_CKPT_INDEX "checkpoint" /* the index file's name in a checkpoint directory */

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

#endif
