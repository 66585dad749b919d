/* Between the model's arrays and a checkpoint's packed ones (worker/checkpoint_pack.h): the
 * packed layout is each layer's kernel, bias and moving statistics in the model's weight order,
 * with none of the arena's padding, so a checkpoint does not depend on the layout; and the
 * values checked against the model before they are taken. */
#include "worker/checkpoint_pack.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The first value of packed (m's packed layout) that is not finite, described into what;
 * 0 when all are finite. */
static int first_nonfinite(const mw_model *m, const float *packed, char *what, size_t cap)
{
    static const char *const part[3] = {"kernel", "bias", "moving statistics"};
    size_t k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[m->worder[i]];
        const size_t count[3] = {l->w_count, l->b_count, l->stats_count};
        for (int p = 0; p < 3; k += count[p], p++)
            for (size_t j = 0; j < count[p]; j++)
                if (!isfinite(packed[k + j])) {
                    snprintf(what, cap, "layer '%s' (%s) %s, value %zu of %zu, is %g", l->name,
                             l->cls, part[p], j, count[p], (double)packed[k + j]);
                    return 1;
                }
    }
    return 0;
}

mw_status mw_ckpt_check_finite(const mw_model *m, const mw_ckpt *c, const char *name)
{
    const float *const arrays[4] = {c->params, c->slot1, c->slot2, c->slot3};
    static const char *const sections[4] = {"params", "slot1", "slot2", "slot3"};
    char what[400];
    for (int a = 0; a < 4; a++)
        if (arrays[a] && c->nparams == m->nparams && (a == 0 || c->nslots == c->nparams) &&
            first_nonfinite(m, arrays[a], what, sizeof what))
            return mw_err(MW_ECKPT, "%s: section %s: %s (expected finite %s)", name, sections[a],
                          what, a ? "optimizer state" : "weights");
    return MW_OK;
}

void mw_ckpt_pack(const mw_model *m, float *packed, const float *arena)
{
    size_t k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[m->worder[i]];
        if (l->w_count)
            memcpy(packed + k, arena + l->w_off, l->w_count * sizeof(float));
        k += l->w_count;
        if (l->b_count)
            memcpy(packed + k, arena + l->b_off, l->b_count * sizeof(float));
        k += l->b_count;
        if (l->stats_count) /* BatchNormalization's moving statistics */
            memcpy(packed + k, arena + l->stats_off, l->stats_count * sizeof(float));
        k += l->stats_count;
    }
}

void mw_ckpt_unpack(const mw_model *m, float *arena, const float *packed)
{
    size_t k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[m->worder[i]];
        if (l->w_count)
            memcpy(arena + l->w_off, packed + k, l->w_count * sizeof(float));
        k += l->w_count;
        if (l->b_count)
            memcpy(arena + l->b_off, packed + k, l->b_count * sizeof(float));
        k += l->b_count;
        if (l->stats_count)
            memcpy(arena + l->stats_off, packed + k, l->stats_count * sizeof(float));
        k += l->stats_count;
    }
}
