/* The SIGBUS guard of mapped files; see mapguard.h. */
#include "common/mapguard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

#define SLOTS 64
#define NAME_MAX_KEPT 256

/* A slot is free while start is 0; its other fields are written before start is stored
 * (release) and read after start is loaded (acquire), so the handler never sees half a slot. */
typedef struct {
    _Atomic uintptr_t start;
    size_t nbytes;
    char name[NAME_MAX_KEPT];
} slot;

static slot slots[SLOTS];
static int exit_code = 3;

/* n in decimal into buf (at least 21 bytes); returns the digits' start. */
static char *digits(char *buf, size_t cap, uint64_t n)
{
    char *p = buf + cap;
    *--p = '\0';
    do
        *--p = (char)('0' + n % 10);
    while ((n /= 10) && p > buf);
    return p;
}

static void say(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

/* The SIGBUS action before ours (Open MPI's, say, which prints a stack), for faults that are
 * not in a mapping of ours. */
static struct sigaction previous;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    const uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; si->si_code > 0 && i < SLOTS; i++) {
        const uintptr_t start = atomic_load_explicit(&slots[i].start, memory_order_acquire);
        if (!start || a < start || a - start >= slots[i].nbytes)
            continue;
        char off[24], len[24];
        say("mwtrain: error: ");
        say(slots[i].name);
        say(": the memory-mapped file shrank while it was read (truncated or rewritten during "
            "the run?): byte ");
        say(digits(off, sizeof off, a - start));
        say(" of its ");
        say(digits(len, sizeof len, slots[i].nbytes));
        say("-byte mapping is gone (SIGBUS)\n");
        _exit(exit_code);
    }
    /* not a mapping of ours: the action before ours takes it, as if there were no guard (a
     * fault repeats when the instruction does; a signal sent by kill is raised again) */
    sigaction(sig, &previous, NULL);
    if (si->si_code <= 0)
        raise(sig);
}

/* Ours, unless it already is: a library (or a test harness) may have set its own since. */
static void install(void)
{
    struct sigaction cur;
    if (sigaction(SIGBUS, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_sigbus)
        return;
    exit_code = mw_status_exit_code(MW_EDATA);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

int mw_mapguard_add(const void *addr, size_t nbytes, const char *name)
{
    if (!addr || !nbytes)
        return -1;
    install();
    for (int i = 0; i < SLOTS; i++) {
        if (atomic_load_explicit(&slots[i].start, memory_order_acquire))
            continue;
        slots[i].nbytes = nbytes;
        size_t n = strlen(name);
        if (n >= NAME_MAX_KEPT)
            n = NAME_MAX_KEPT - 1;
        memcpy(slots[i].name, name, n);
        slots[i].name[n] = '\0';
        uintptr_t free_start = 0;
        if (atomic_compare_exchange_strong_explicit(&slots[i].start, &free_start, (uintptr_t)addr,
                                                    memory_order_release, memory_order_relaxed))
            return 0;
    }
    return -1;
}

void mw_mapguard_remove(const void *addr)
{
    for (int i = 0; i < SLOTS; i++) {
        uintptr_t start = (uintptr_t)addr;
        if (addr && atomic_compare_exchange_strong(&slots[i].start, &start, 0))
            return;
    }
}
