/* Appending a layer's Keras variables; see kvars.h. */
#include "worker/model/kvars.h"

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
    return x;
}
