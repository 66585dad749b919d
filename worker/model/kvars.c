/* Appending a layer's Keras variables; see kvars.h. */
#include "worker/model/kvars.h"

#include <string.h>

mw_keras_var *mw_kvar_add(mw_keras_var *v, int *nv, const char *name, size_t off, size_t count,
                          int rank, long long d0, long long d1, long long d2, long long d3)
{
    mw_keras_var *x = &v[(*nv)++];
    x->name = name;
    x->sub[0] = '\0';
    x->l = NULL;
    x->idx = *nv - 1;
    x->off = off;
    x->count = count;
    x->rank = rank;
    x->shape[0] = d0, x->shape[1] = d1, x->shape[2] = d2, x->shape[3] = d3;
    x->trainable = 1;
    x->integer = 0;
    x->swap01 = 0;
    return x;
}

void mw_kvar_swap01(const float *src, float *dst, long long d0, long long d1, size_t count)
{
    const size_t rest = count / (size_t)(d0 * d1);
    for (long long i = 0; i < d0; i++)
        for (long long j = 0; j < d1; j++)
            memcpy(dst + ((size_t)j * (size_t)d0 + (size_t)i) * rest,
                   src + ((size_t)i * (size_t)d1 + (size_t)j) * rest, rest * sizeof(float));
}
