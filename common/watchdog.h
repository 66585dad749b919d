/* A backstop for the blocking calls that cannot be polled against a deadline: MPI_Init,
 * MPI_Comm_split, shared-memory windows, MPI_Comm_free, MPI_Finalize. Every wait that can be
 * polled is (cluster/comm.h, naming the rank that did not arrive); these few cannot, and a
 * stopped or unreachable peer would leave them blocked forever. Around each such call:
 *
 *     mw_watchdog_arm("MPI_Comm_split (node)", timeout);
 *     MPI_Comm_split(...);
 *     mw_watchdog_disarm();
 *
 * A thread started by the first arm waits for the deadline; if the call has not returned by
 * then it prints one line naming the call and the deadline and ends the process with exit
 * code 131 (MW_ETIMEOUT: worth a restart). mpirun ends the rest of the job when one process
 * exits that way. Only one guard is armed at a time; arming again replaces it. libc and
 * pthreads only. */
#ifndef MW_COMMON_WATCHDOG_H
#define MW_COMMON_WATCHDOG_H

/* Guard the blocking call named what for seconds (<= 0: disarm). */
void mw_watchdog_arm(const char *what, double seconds);
void mw_watchdog_disarm(void);
/* The same with another exit code and message: for a call that should have ended the process
 * itself (MPI_Abort), "WHAT did not end this process within S s", then _exit(code). */
void mw_watchdog_arm_exit(const char *what, double seconds, int code);

/* Arm as mw_watchdog_arm only when no guard is armed: 1 when it armed (the caller disarms),
 * 0 when another guard stays in charge. For backstops inside code that a guarded call may
 * run. */
int mw_watchdog_arm_if_idle(const char *what, double seconds);

#endif
