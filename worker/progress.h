/* Progress during an epoch: a live bar on a terminal, otherwise a line every
 * few seconds (logs of batch jobs stay readable). Chief only. */
#ifndef MW_WORKER_PROGRESS_H
#define MW_WORKER_PROGRESS_H

#include <stdio.h>

typedef struct {
    FILE *out;
    int bar; /* 1: redraw one line with \r; 0: periodic lines */
    int enabled;
    double interval; /* seconds between lines */
    double t0, last;
    int epoch, epochs, steps;
} mw_progress_state;

/* mode: 0 auto (bar when out is a TTY), 1 bar, 2 lines, 3 none. */
void mw_progress_begin(mw_progress_state *p, FILE *out, int mode, double interval, int epoch,
                       int epochs, int steps);
void mw_progress_update(mw_progress_state *p, int step, double loss, double images_per_sec);
/* Clear the bar line so the epoch summary starts on a clean line. */
void mw_progress_end(mw_progress_state *p);

#endif
