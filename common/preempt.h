/* Preemption: what a cluster's "please stop" becomes. Kubernetes, Slurm and spot instances send
 * SIGTERM and then wait a grace period before SIGKILL; a user at a terminal sends SIGINT;
 * `mpirun` forwards SIGUSR1 to every rank without killing them (deploy/mpirun/run.sh turns the
 * launcher's SIGTERM into that). mw_preempt_install makes the first of SIGTERM, SIGINT and
 * SIGUSR1 a request, read with mw_preempt_requested: the training loop agrees on it at the next
 * step boundary, the chief saves the step reached, and every process exits with MW_EPREEMPTED
 * (worker/train.c). The handler also starts the grace clock: if the process is still running
 * `grace` seconds after the first signal (a peer gone, a save that hangs), it ends at once with
 * exit 131 and one line saying so; a second SIGTERM or SIGINT ends it at once with 128 + the
 * signal. SIGUSR1 is the launcher's request and may come again (deploy/mpirun/run.sh repeats
 * it until mpirun ends, since mpirun forwards it only to ranks that have started): a repeat
 * changes nothing.
 * Nothing half-written is left either way: checkpoints are written to a temporary file and
 * renamed (worker/checkpoint.c). libc only; async-signal-safe inside the handlers.
 * The signals are taken by a thread of their own (started by the first mw_preempt_install,
 * which blocks them in its caller and so in every thread made later): call it before any other
 * thread exists, so that no compute thread is interrupted by a handler. */
#ifndef MW_COMMON_PREEMPT_H
#define MW_COMMON_PREEMPT_H

/* Handle SIGTERM, SIGINT and SIGUSR1 as above; grace in seconds (> 0). Again: the new grace. */
void mw_preempt_install(double grace);
/* The signal of the first request (SIGTERM, SIGINT or SIGUSR1), or 0 when none came. */
int mw_preempt_requested(void);
/* Seconds since the first request (0 when none). */
double mw_preempt_elapsed(void);
/* The run has agreed to end (preempted and saved): later signals are taken silently (the
 * launcher ends the ranks that have not left yet; each is past the save), the grace clock
 * still runs. */
void mw_preempt_quiet(void);

#endif
