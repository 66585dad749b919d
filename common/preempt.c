/* Preemption requests from signals, and the temporary files a signal removes; see preempt.h.
 * The handlers run on the signal thread while the other threads go on: what they share is in
 * C11 atomics (lock-free, so async-signal-safe), and the one ordering that matters is the
 * temporary files': a handler that ends the process first sets `ending`, then removes every
 * registered file; mw_preempt_temp_create registers the name before it creates the file and
 * looks at `ending` after, removing the file itself if the handler may have passed it by. */
#include "common/preempt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/status.h"

#define MW_PREEMPT_STR_(x) #x
#define MW_PREEMPT_STR(x) MW_PREEMPT_STR_(x)
#define MW_PREEMPT_SAME_TEXT "within " MW_PREEMPT_STR(MW_PREEMPT_SAME_S) " s"

enum { MODE_START, MODE_REQUEST, MODE_AT_ONCE };

static atomic_int mode;         /* MODE_*: what the first signal means */
static atomic_int first_signal; /* 0: none yet; published after first_at */
static atomic_int announced;    /* the first signal's consequence was taken (once) */
static atomic_int quiet;
static atomic_int ending; /* a handler is ending the process: no temporary file may stay */
static struct timespec first_at;
static unsigned grace_s = 20;
static int grace_exit = 131;
static char grace_msg[200];

enum { TEMPS = 4 };
static struct {
    atomic_int state; /* 0 free, 1 being filled, 2 a name to remove */
    char path[PATH_MAX];
} temps[TEMPS];

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

static double since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + 1e-9 * (double)(now.tv_nsec - t->tv_nsec);
}

static char temp_dir[PATH_MAX];
static atomic_int temp_dir_set;

/* Remove the entry name of the directory parent (a descriptor) with everything under it,
 * depth levels at most, by system calls only: unlinkat first (a file), else it is a directory
 * whose entries go the same way, read with getdents64 (readdir may allocate). Removing entries
 * while reading can hide others, so a directory is read again while a pass removes any.
 * Returns 0 once the entry is gone. */
static int remove_tree_at(int parent, const char *name, int depth)
{
    if (unlinkat(parent, name, 0) == 0)
        return 0;
    if (depth <= 0)
        return -1;
    const int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (int removed = fd >= 0; removed;) {
        char buf[2048];
        long n;
        removed = 0;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
            for (long off = 0; off < n;) {
                /* struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name */
                unsigned short reclen;
                memcpy(&reclen, buf + off + 16, sizeof reclen);
                const char *entry = buf + off + 19;
                off += reclen;
                if (strcmp(entry, ".") != 0 && strcmp(entry, "..") != 0 &&
                    remove_tree_at(fd, entry, depth - 1) == 0)
                    removed = 1;
            }
    }
    if (fd >= 0)
        close(fd);
    return unlinkat(parent, name, AT_REMOVEDIR);
}

void mw_preempt_dir_register(const char *path)
{
    const size_t n = strlen(path);
    if (n >= PATH_MAX || atomic_load(&temp_dir_set))
        return;
    memcpy(temp_dir, path, n + 1);
    atomic_store(&temp_dir_set, 1);
}

void mw_preempt_dir_remove(void)
{
    if (atomic_exchange(&temp_dir_set, 0))
        remove_tree_at(AT_FDCWD, temp_dir, 8);
}

/* Remove every registered temporary file, saying so, and the process's own directory, and end
 * the process with code. */
static void end_process(int code)
{
    atomic_store(&ending, 1);
    mw_preempt_dir_remove();
    for (int i = 0; i < TEMPS; i++) {
        if (atomic_load(&temps[i].state) != 2 || unlink(temps[i].path) != 0)
            continue;
        say("mwtrain: removed the unfinished ");
        say(temps[i].path);
        say("\n");
    }
    _exit(code);
}

static void on_alarm(int sig)
{
    (void)sig;
    say(grace_msg);
    end_process(grace_exit);
}

/* "mwtrain: SIGTERM received WHAT (exit 143)\n", then the end. */
static void end_on(int sig, const char *what)
{
    char code[8] = "1xx)\n";
    const int c = MW_PREEMPT_SIGNAL_EXIT + sig;
    code[1] = (char)('0' + c / 10 % 10), code[2] = (char)('0' + c % 10);
    say("mwtrain: ");
    say(name_of(sig));
    say(what);
    say(" (exit ");
    say(code);
    end_process(c);
}

/* The first signal's consequence under mode m, once (from the handler, or from the thread that
 * sets the mode when the signal came before it). */
static void take_first(int m, int sig)
{
    if (m == MODE_START || atomic_exchange(&announced, 1))
        return;
    if (m == MODE_AT_ONCE)
        end_on(sig, " received: ending at once");
    alarm(grace_s);
    say("mwtrain: ");
    say(name_of(sig));
    say(" received: stopping at the next step boundary to save a checkpoint (the same "
        "signal " MW_PREEMPT_SAME_TEXT
        " is the same request; a second signal later ends the process at once)\n");
}

static void on_signal(int sig)
{
    const int first = atomic_load(&first_signal);
    if (atomic_load(&quiet)) {
        if (!first)
            atomic_store(&first_signal, sig);
        return;
    }
    if (!first) {
        clock_gettime(CLOCK_MONOTONIC, &first_at);
        atomic_store(&first_signal, sig);
        take_first(atomic_load(&mode), sig);
        return;
    }
    if (sig == SIGUSR1)
        return; /* a launcher's request, repeated until the ranks have it: not "again" */
    if (sig == first && since(&first_at) < (double)MW_PREEMPT_SAME_S) {
        say("mwtrain: ");
        say(name_of(sig));
        say(" received again " MW_PREEMPT_SAME_TEXT " of the first: the same request\n");
        return;
    }
    end_on(sig, " received again: ending at once, without saving");
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

void mw_preempt_start(void)
{
    static int started;
    if (started)
        return;
    started = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_signal;
    sigaddset(&sa.sa_mask, SIGTERM); /* one handler at a time, whichever signal */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGUSR1);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    /* the signal thread first, with the requests unblocked; then they are blocked in this
     * thread and so in every thread made after it (MPI's, the watchdog, OpenMP's) */
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int made = pthread_create(&t, &attr, signal_thread, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (!made)
        return; /* the handler then runs on whichever thread the kernel picks */
    sigset_t req;
    sigemptyset(&req);
    sigaddset(&req, SIGTERM);
    sigaddset(&req, SIGINT);
    sigaddset(&req, SIGUSR1);
    sigaddset(&req, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &req, NULL);
}

/* Set the mode, then take a signal that came before it (the handler takes it otherwise). */
static void set_mode(int m)
{
    mw_preempt_start();
    atomic_store(&mode, m);
    const int sig = atomic_load(&first_signal);
    if (sig && !atomic_load(&quiet))
        take_first(m, sig);
}

void mw_preempt_install(double grace)
{
    grace_s = grace >= 1 ? (unsigned)ceil(grace) : 1;
    grace_exit = mw_status_exit_code(MW_ETIMEOUT);
    snprintf(grace_msg, sizeof grace_msg,
             "mwtrain: the preemption grace (--preemption-grace %u s) passed before the "
             "checkpoint was agreed: ending at once (exit %d)\n",
             grace_s, grace_exit);
    set_mode(MODE_REQUEST);
}

void mw_preempt_at_once(void)
{
    set_mode(MODE_AT_ONCE);
}

void mw_preempt_quiet(void)
{
    atomic_store(&quiet, 1);
}

int mw_preempt_requested(void)
{
    return atomic_load(&first_signal);
}

double mw_preempt_elapsed(void)
{
    return atomic_load(&first_signal) ? since(&first_at) : 0;
}

int mw_preempt_temp_create(const char *path, int flags, mode_t mode_bits)
{
    const size_t n = strlen(path);
    int slot = -1;
    for (int i = 0; i < TEMPS && slot < 0 && n < PATH_MAX; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&temps[i].state, &free_slot, 1))
            slot = i;
    }
    if (slot < 0) {
        errno = n < PATH_MAX ? ENFILE : ENAMETOOLONG;
        return -1;
    }
    memcpy(temps[slot].path, path, n + 1);
    atomic_store(&temps[slot].state, 2);
    const int fd = open(path, flags | O_CREAT | O_EXCL | O_CLOEXEC, mode_bits);
    const int e = errno;
    if (fd >= 0 && atomic_load(&ending)) { /* the handler may have looked before the open */
        unlink(path);
        for (;;)
            pause(); /* until it ends the process */
    }
    if (fd < 0)
        atomic_store(&temps[slot].state, 0);
    else
        mw_fault_point("temp", -1); /* the tests' signal to a process with a temporary file */
    errno = e;
    return fd;
}

void mw_preempt_temp_done(const char *path)
{
    for (int i = 0; path && i < TEMPS; i++)
        if (atomic_load(&temps[i].state) == 2 && strcmp(temps[i].path, path) == 0) {
            atomic_store(&temps[i].state, 0);
            return;
        }
}
