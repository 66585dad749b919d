/* The timeline (--timeline FILE): a Chrome trace of this process's step phases, the JSON that
 * chrome://tracing and Perfetto open ({"traceEvents": [...]}), as Horovod's timeline is.
 *
 * One recorder per process, used from the thread that runs the training loop only (the CPU
 * backend's OpenMP thread 0 is that thread). Phases are duration events, "B" at the start and
 * "E" at the end, so the file's timestamps never decrease and phases nest (a step holds its
 * forward/backward, all-reduce and update; an all-reduce holds its intra- and inter-node
 * parts and its waits). Each event carries the global step (args.step: mw_timeline_step's,
 * -1 outside a step).
 * The track is pid = the rank, named by a process_name metadata event.
 *
 * Cheap: events go into a fixed buffer of MW_TIMELINE_EVENTS, written out when it is full, at
 * mw_timeline_flush (epoch ends) and at close; with no timeline open, MW_TL_BEGIN/END test one
 * global and do nothing else. Timestamps are microseconds of the monotonic clock shifted to
 * the Unix epoch at open, so the files of several ranks line up on one time axis (across
 * nodes as well as their clocks agree). libc only. */
#ifndef MW_COMMON_TIMELINE_H
#define MW_COMMON_TIMELINE_H

#include <stddef.h>

#include "common/status.h"

#define MW_TIMELINE_EVENTS 8192 /* buffered events between writes */
#define MW_TIMELINE_NAME 80     /* an event's name, truncated to this less one */

/* Non-zero while a timeline is open, in the thread that opened it only (thread-local: a
 * helper thread, such as the overlapped all-reduce's, records nothing); read by the macros. */
extern _Thread_local int mw_timeline_on;

/* This rank's file for --timeline pattern: "%r" in pattern becomes the rank; without it, a run
 * of several ranks (world > 1) puts ".rank<N>" before the extension of the file name
 * (trace.json -> trace.rank1.json) or at its end when there is none; one rank uses pattern as
 * it is. MW_EINVAL when it does not fit in len. */
mw_status mw_timeline_path(char *out, size_t len, const char *pattern, int rank, int world);

/* Create path (truncating it) and start the trace: the track of pid, named name. MW_EIO naming
 * the file when it cannot be created; a second open without close is MW_EINTERNAL. */
mw_status mw_timeline_open(const char *path, int pid, const char *name);
/* Write the buffered events out (at epoch ends). */
void mw_timeline_flush(void);
/* Write the rest, end the JSON and close the file; a no-op when none is open. MW_EIO when a
 * write failed (the first failure; the events after it are lost). */
mw_status mw_timeline_close(void);

/* The phase name starts now (cat: its category, a string literal); each begin is matched by
 * one end of the same name. */
void mw_timeline_begin(const char *name, const char *cat);
void mw_timeline_end(const char *name, const char *cat);
/* A phase already over, recorded afterwards: it started at since (mw_timeline_now) and ends
 * now; for leaves only (no event may have been recorded since), such as a wait that turned
 * out to be needed. */
double mw_timeline_now(void);
void mw_timeline_span(const char *name, const char *cat, double since);
/* The global step the events from now on belong to (args.step); -1 between steps. */
void mw_timeline_step(long step);

#define MW_TL_BEGIN(name, cat)                                                                     \
    do {                                                                                           \
        if (mw_timeline_on)                                                                        \
            mw_timeline_begin((name), (cat));                                                      \
    } while (0)
#define MW_TL_END(name, cat)                                                                       \
    do {                                                                                           \
        if (mw_timeline_on)                                                                        \
            mw_timeline_end((name), (cat));                                                        \
    } while (0)

#endif
