/* Progress bar / periodic progress lines; see progress.h. */
#include "worker/progress.h"

#include <unistd.h>

#include "common/timer.h"

void mw_progress_begin(mw_progress_state *p, FILE *out, int mode, double interval, int epoch,
                       int epochs, int steps)
{
    p->out = out;
    p->enabled = mode != 3;
    p->bar = mode == 1 || (mode == 0 && isatty(fileno(out)));
    p->interval = interval > 0 ? interval : 5.0;
    p->t0 = p->last = mw_now();
    p->epoch = epoch, p->epochs = epochs, p->steps = steps;
}

void mw_progress_update(mw_progress_state *p, int step, double loss, double images_per_sec)
{
    if (!p->enabled)
        return;
    double now = mw_now();
    if (p->bar) {
        if (now - p->last < 0.1 && step < p->steps)
            return;
        enum { WIDTH = 30 };
        int fill = p->steps > 0 ? (int)((long)WIDTH * step / p->steps) : WIDTH;
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
        bar[WIDTH] = '\0';
        fprintf(p->out, "\rEpoch %d/%d [%s] %d/%d loss %.4f %.0f img/s  ", p->epoch, p->epochs, bar,
                step, p->steps, loss, images_per_sec);
        fflush(p->out);
        p->last = now;
    } else if (now - p->last >= p->interval) {
        fprintf(p->out, "Epoch %d/%d step %d/%d loss %.4f %.0f images/s\n", p->epoch, p->epochs,
                step, p->steps, loss, images_per_sec);
        fflush(p->out);
        p->last = now;
    }
}

void mw_progress_end(mw_progress_state *p)
{
    if (p->enabled && p->bar) {
        fprintf(p->out, "\r%*s\r", 79, "");
        fflush(p->out);
    }
}
