/* File-system helpers shared by the writers of checkpoints and summaries: mkdir -p, a bounded
 * path join, and the atomic replacement of a file (temporary file, fsync, rename, fsync of the
 * directory), so a crash at any point leaves either the old file or the new one, never a torn
 * one, and no caller keeps its own copy of these steps. And the one way every reader opens an
 * input file (a regular file, never blocking), and the check of an output path.
 *
 * The mw_status functions word their own messages, naming the caller's `what`. The errno forms
 * below them are for callers whose messages have a shape of their own (worker/checkpoint.c,
 * worker/checkpoint_dir.c). */
#ifndef MW_COMMON_FS_H
#define MW_COMMON_FS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
/* "DIR/NAME" in a malloc'ed string (the caller frees it); NULL when out of memory. */
char *mw_fs_join_alloc(const char *dir, const char *name);

/* Replace DIR/NAME with nbytes of bytes atomically: write NAME.tmp-<pid> beside it, fsync,
 * close, rename it over NAME, fsync DIR. After a failure the temporary file is gone and NAME is
 * as it was (unless only the final directory sync failed); so it is after a signal that ends
 * the process (mw_preempt_temp_create, common/preempt.h). what names dir's role in messages:
 *   MW_EIO "WHAT DIR: cannot STEP NAME (REASON)"
 * with STEP one of create, write, sync, close, rename, "sync the directory of". */
mw_status mw_fs_write_atomic(const char *dir, const char *name, const void *bytes, size_t nbytes,
                             const char *what);

/* ---- inputs: regular files only, opened without blocking ---- */

/* Every reader of a file the user names (data, models, configs, hostfiles) opens it here, so
 * that no input can hang the job or reach a device: a FIFO without a writer would block the
 * open (or the first read) forever, whatever --collective-timeout says, and opening a device
 * node can have effects of its own.
 *
 * Open path read-only as a regular file: stat first (a FIFO, device, socket or directory is
 * refused without being opened), then open(O_RDONLY | O_NONBLOCK | O_CLOEXEC) and fstat the
 * descriptor (the path may have been replaced in between: the open still cannot block, and
 * what was opened is checked again), then O_NONBLOCK is cleared for ordinary reads. Symbolic
 * links are followed; what counts is the file they lead to. *fd (the caller closes it) and
 * *nbytes, the file's size. expected says what the file should be, for messages; may be NULL:
 *   MW_EIO "PATH: cannot open: REASON; expected EXPECTED"
 *   MW_EIO "PATH: is a FIFO, not a regular file; expected EXPECTED"
 * (or a directory, a character device, a block device, a socket, a special file). */
mw_status mw_fs_open_input(const char *path, const char *expected, int *fd, size_t *nbytes);

/* The same as a stdio stream ("rb"); the caller fcloses it. */
mw_status mw_fs_fopen_input(const char *path, const char *expected, FILE **f, size_t *nbytes);

/* The whole of a regular input file, at most max bytes, into *text (malloc'ed, NUL-terminated;
 * *nbytes without the NUL). The size is taken from fstat before anything is read or
 * allocated, so an oversized file costs nothing:
 *   MW_EIO     as mw_fs_open_input, or "PATH: read error: REASON"
 *   too_big    "PATH: N bytes; expected at most MAX (M MiB)"  (the caller's status) */
mw_status mw_fs_read_input(const char *path, const char *expected, size_t max, mw_status too_big,
                           char **text, size_t *nbytes);

/* What a file of stat mode `mode` is, for messages: "a regular file", "a directory", "a FIFO",
 * "a socket", "a character device", "a block device", "a symbolic link", "a special file". */
const char *mw_fs_kind(unsigned mode);

/* An output path that may already exist, checked before anything is written to it: NULL when
 * path does not exist or is (or leads through symbolic links to) a regular file, else what it
 * is (mw_fs_kind). Writers replace or truncate only regular files: a FIFO, a device node or a
 * socket is never opened, renamed over or replaced. */
const char *mw_fs_output_kind(const char *path);

/* Open path for writing from its start (created 0666 & ~umask when missing) as only a regular
 * file may be: without blocking (O_NONBLOCK: a FIFO without a reader fails at once instead of
 * hanging), then fstat; anything but a regular file is closed untouched, and only then is the
 * file truncated and O_NONBLOCK cleared. Symbolic links to regular files are followed. Returns
 * 0 with *fd, or an errno (*kind, when not NULL, then names what path is, or NULL: the open
 * itself failed). ENOTSUP with *kind set: not a regular file. */
int mw_fs_open_output_errno(const char *path, int *fd, const char **kind);

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
/* Read exactly n bytes at offset off of fd (retrying short reads and EINTR). Returns 0, an
 * errno, or -1 when the file ends first. */
int mw_fs_pread_full(int fd, void *buf, size_t n, uint64_t off);

#endif
