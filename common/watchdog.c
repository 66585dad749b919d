/* The watchdog thread; see watchdog.h. The thread sleeps on a condition variable until the
 * armed deadline; arm and disarm only change the deadline and wake it. The exit path uses
 * write(2) and _exit(2): it runs while the main thread may hold any lock (inside MPI). */
#include "common/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/preempt.h"

#define EXIT_TIMEOUT 131 /* MW_ETIMEOUT's exit code (common/status.h) */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int started, armed;
static struct timespec deadline;
static double limit;
static int exit_code = EXIT_TIMEOUT, grace; /* grace: armed by mw_watchdog_arm_exit */
static char what_buf[128];

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!armed)
            pthread_cond_wait(&wake, &lock);
        int rc = pthread_cond_timedwait(&wake, &lock, &deadline);
        if (rc != ETIMEDOUT || !armed)
            continue; /* re-armed, disarmed or woken: look again */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec < deadline.tv_sec ||
            (now.tv_sec == deadline.tv_sec && now.tv_nsec < deadline.tv_nsec))
            continue;
        char line[384];
        int n = !grace ? snprintf(line, sizeof line,
                                  "mwtrain: error: %s did not return within %.0f s "
                                  "(--collective-timeout): another rank is stopped, dead or "
                                  "unreachable; ending this process (exit code %d)\n",
                                  what_buf, limit, exit_code)
                       : snprintf(line, sizeof line,
                                  "mwtrain: error: %s did not end this process within %.0f s: "
                                  "ending it (exit code %d)\n",
                                  what_buf, limit, exit_code);
        if (n > 0)
            (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        mw_preempt_dir_remove(); /* a singleton's own directory (system calls only) */
        _exit(exit_code);
    }
    return NULL;
}

static void arm(const char *what, double seconds, int code, int is_grace)
{
    if (seconds <= 0) {
        mw_watchdog_disarm();
        return;
    }
    pthread_mutex_lock(&lock);
    if (!started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &attr, watch, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    snprintf(what_buf, sizeof what_buf, "%s", what);
    limit = seconds;
    exit_code = code;
    grace = is_grace;
    clock_gettime(CLOCK_REALTIME, &deadline);
    long ns = (long)((seconds - (double)(long)seconds) * 1e9);
    deadline.tv_sec += (time_t)seconds + (deadline.tv_nsec + ns) / 1000000000L;
    deadline.tv_nsec = (deadline.tv_nsec + ns) % 1000000000L;
    armed = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

void mw_watchdog_arm(const char *what, double seconds)
{
    arm(what, seconds, EXIT_TIMEOUT, 0);
}

void mw_watchdog_arm_exit(const char *what, double seconds, int code)
{
    arm(what, seconds, code, 1);
}

void mw_watchdog_disarm(void)
{
    pthread_mutex_lock(&lock);
    armed = 0;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

int mw_watchdog_arm_if_idle(const char *what, double seconds)
{
    pthread_mutex_lock(&lock);
    const int busy = armed;
    pthread_mutex_unlock(&lock);
    if (busy || seconds <= 0)
        return 0;
    arm(what, seconds, EXIT_TIMEOUT, 0);
    return 1;
}
