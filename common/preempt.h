/* Preemption: what a cluster's "please stop" becomes. Kubernetes, Slurm and spot instances send
 * SIGTERM and then wait a grace period before SIGKILL; a user at a terminal sends SIGINT;
 * `mpirun` forwards SIGUSR1 to every rank without killing them (deploy/mpirun/run.sh turns the
 * launcher's SIGTERM into that).
 *
 * mw_preempt_start, the first thing main does (before any file is read, before any thread
 * exists), puts the handlers of SIGTERM, SIGINT and SIGUSR1 in place; a signal that comes
 * before the command is known is remembered. Then one of two modes:
 *   - mw_preempt_install (`train`): the first signal is a request, read with
 *     mw_preempt_requested: the training loop agrees on it at the next step boundary, the chief
 *     saves the step reached, and every process exits with MW_EPREEMPTED (worker/train.c). The
 *     handler also starts the grace clock: if the process is still running `grace` seconds
 *     after the first signal (a peer gone, a save that hangs), it ends at once with
 *     MW_ETIMEOUT's exit code (131) and one line saying so.
 *   - mw_preempt_at_once (every other command: there is no step to stop at): the first signal
 *     ends the process at once with 128 + the signal and one line.
 * One request is one request: the same signal again within MW_PREEMPT_SAME_S seconds of the
 * first is the same request (coreutils `timeout` delivers its one SIGTERM twice, to the child
 * and then to the process group, as does any wrapper that signals a process and its group).
 * The same signal later, or another of SIGTERM and SIGINT, ends a requested stop at once with
 * 128 + the signal, unsaved. SIGUSR1 is the launcher's request and may come again
 * (deploy/mpirun/run.sh repeats it until mpirun ends, since mpirun forwards it only to ranks
 * that have started): a repeat changes nothing.
 * Nothing half-written is left either way: files are written to a temporary name and renamed,
 * and every temporary file is made by mw_preempt_temp_create, so a process that ends on a
 * signal removes it first (common/fs.h's atomic writes: checkpoints; `export --output`).
 * libc only; async-signal-safe inside the handlers. The signals are taken by a thread of their
 * own (started by mw_preempt_start, which blocks them in its caller and so in every thread made
 * later), so that no compute thread is interrupted by a handler. */
#ifndef MW_COMMON_PREEMPT_H
#define MW_COMMON_PREEMPT_H

#include <sys/types.h>

/* The same signal again within this many seconds of the first is the same request. */
#define MW_PREEMPT_SAME_S 1
/* A process ended by a signal exits with this + the signal (143 for SIGTERM). */
#define MW_PREEMPT_SIGNAL_EXIT 128

/* First thing in main: the handlers and the signal thread. A signal now is remembered until
 * mw_preempt_install or mw_preempt_at_once says what it means. */
void mw_preempt_start(void);
/* Requests, as above; grace in seconds (> 0). Again: the new grace. A signal that came before
 * is announced now and its grace starts. */
void mw_preempt_install(double grace);
/* Every signal ends the process at once (a signal that came before: now). */
void mw_preempt_at_once(void);
/* The signal of the first request (SIGTERM, SIGINT or SIGUSR1), or 0 when none came. */
int mw_preempt_requested(void);
/* Seconds since the first request (0 when none). */
double mw_preempt_elapsed(void);
/* The run has agreed to end (preempted and saved): later signals are taken silently (the
 * launcher ends the ranks that have not left yet; each is past the save), the grace clock
 * still runs. */
void mw_preempt_quiet(void);

/* open(path, flags | O_CREAT | O_EXCL | O_CLOEXEC, mode) for a temporary file that a process
 * ended by a signal removes (path is copied; at most 4 at a time, PATH_MAX bytes each: beyond
 * that, -1 with errno ENFILE or ENAMETOOLONG). Returns the descriptor or -1 with errno. Call
 * mw_preempt_temp_done(path) once the file is renamed or removed (NULL: nothing). */
int mw_preempt_temp_create(const char *path, int flags, mode_t mode);
void mw_preempt_temp_done(const char *path);

/* A directory the process made for itself (one; path copied, shorter than PATH_MAX): removed
 * with everything in it, at most 8 levels deep, when a signal ends the process, or by
 * mw_preempt_dir_remove (idempotent; also safe in a signal handler: system calls only). */
void mw_preempt_dir_register(const char *path);
void mw_preempt_dir_remove(void);

#endif
