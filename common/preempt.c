/* Preemption requests from signals; see preempt.h. */
#include "common/preempt.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t first_signal; /* 0: none yet */
static volatile sig_atomic_t quiet;
static struct timespec first_at;
static unsigned grace_s;
static char grace_msg[200];

static void say(const char *s)
{
    ssize_t n = write(2, s, strlen(s));
    (void)n; /* nothing to do if stderr is gone */
}

static const char *name_of(int sig)
{
    return sig == SIGTERM   ? "SIGTERM"
           : sig == SIGINT  ? "SIGINT"
           : sig == SIGUSR1 ? "SIGUSR1"
                            : "a signal";
}

static void on_alarm(int sig)
{
    (void)sig;
    say(grace_msg);
    _exit(131);
}

static void on_signal(int sig)
{
    if (quiet) {
        if (!first_signal)
            first_signal = sig;
        return;
    }
    if (first_signal && sig == SIGUSR1)
        return; /* a launcher's request, repeated until the ranks have it: not "again" */
    if (!first_signal) {
        first_signal = sig;
        clock_gettime(CLOCK_MONOTONIC, &first_at);
        alarm(grace_s);
        say("mwtrain: ");
        say(name_of(sig));
        say(" received: stopping at the next step boundary to save a checkpoint (a second "
            "signal ends the process at once)\n");
        return;
    }
    say("mwtrain: ");
    say(name_of(sig));
    say(" received again: ending at once, without saving\n");
    _exit(128 + sig);
}

/* The one thread the requests are delivered to: it waits in pause() with them unblocked, so
 * the handler never interrupts a compute thread (oneDNN's JIT kernels among them: a SIGTERM
 * handled on the thread inside dnnl_sgemm was followed, in 2 to 5 % of trials, by a heap
 * corruption in its buffers, tests/mpi/test_preempt.sh). */
static void *signal_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

void mw_preempt_install(double grace)
{
    grace_s = grace >= 1 ? (unsigned)ceil(grace) : 1;
    snprintf(grace_msg, sizeof grace_msg,
             "mwtrain: the preemption grace (--preemption-grace %u s) passed before the "
             "checkpoint was agreed: ending at once (exit 131)\n",
             grace_s);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    /* the signal thread first, with the requests unblocked; then they are blocked in this
     * thread and so in every thread made after it (MPI's, the watchdog, OpenMP's) */
    static int thread_made; /* a repeated install changes the grace only */
    pthread_attr_t attr;
    pthread_t t;
    if (thread_made || pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int made = pthread_create(&t, &attr, signal_thread, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (!made)
        return; /* the handler then runs on whichever thread the kernel picks */
    thread_made = 1;
    sigset_t req;
    sigemptyset(&req);
    sigaddset(&req, SIGTERM);
    sigaddset(&req, SIGINT);
    sigaddset(&req, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &req, NULL);
}

void mw_preempt_quiet(void)
{
    quiet = 1;
}

int mw_preempt_requested(void)
{
    return first_signal;
}

double mw_preempt_elapsed(void)
{
    if (!first_signal)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - first_at.tv_sec) + 1e-9 * (double)(now.tv_nsec - first_at.tv_nsec);
}
