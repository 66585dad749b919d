/* File-system helpers shared by the writers of checkpoints and summaries: mkdir -p, a bounded
 * path join, and the atomic replacement of a file (temporary file, fsync, rename, fsync of the
 * directory), so a crash at any point leaves either the old file or the new one, never a torn
 * one, and no caller keeps its own copy of these steps.
 *
 * The mw_status functions word their own messages, naming the caller's `what`. The errno forms
 * below them are for callers whose messages have a shape of their own (worker/checkpoint.c). */
#ifndef MW_COMMON_FS_H
#define MW_COMMON_FS_H

#include <stddef.h>

#include "common/status.h"

/* mkdir -p dir: every missing component, mode 0777 before the umask; components that already
 * exist are fine, and dir must end up a directory. what names dir's role in messages
 * ("--checkpoint-dir", "summary dir"). Errors:
 *   MW_EINVAL "WHAT: empty path"
 *   MW_EIO    "WHAT DIR: cannot create COMPONENT: REASON"  (a component could not be made)
 *   MW_EIO    "WHAT DIR: REASON"                          (dir is not a directory, ...)
 *   MW_EIO    "WHAT: path too long (N bytes, at most M): DIR" */
mw_status mw_fs_mkdir_p(const char *dir, const char *what);

/* out = "DIR/NAME" in cap (> 0) bytes. MW_EIO "path too long (N bytes, at most M): DIR/NAME"
 * when it does not fit; out is then "". */
mw_status mw_fs_join(char *out, size_t cap, const char *dir, const char *name);

/* Replace DIR/NAME with nbytes of bytes atomically: write NAME.tmp-<pid> beside it, fsync,
 * close, rename it over NAME, fsync DIR. After a failure the temporary file is gone and NAME is
 * as it was (unless only the final directory sync failed). what names dir's role in messages:
 *   MW_EIO "WHAT DIR: cannot STEP NAME (REASON)"
 * with STEP one of create, write, sync, close, rename, "sync the directory of". */
mw_status mw_fs_write_atomic(const char *dir, const char *name, const void *bytes, size_t nbytes,
                             const char *what);

/* ---- errno forms: 0 or an errno, no message recorded ---- */

/* mw_fs_mkdir_p. failed (may be NULL, failed_cap bytes) gets the component that could not be
 * created, or "" when the failure is about dir as a whole (too long, not a directory). An
 * empty dir is ENOENT. */
int mw_fs_mkdir_p_errno(const char *dir, char *failed, size_t failed_cap);
/* mw_fs_write_atomic on a whole path (the directory is everything before the last '/', or "."
 * without one). *step names the step that failed, as above. */
int mw_fs_write_atomic_errno(const char *path, const void *bytes, size_t nbytes, const char **step);
/* fsync a directory so the renames and creations inside it are durable. File systems that
 * cannot sync a directory (EINVAL, ENOTSUP) count as success. */
int mw_fs_fsync_dir(const char *dir);

#endif
