/* A model's several named inputs, packed into one row per example.
 *
 * A Keras Functional model may take several inputs by name (KerasHub's token_ids,
 * padding_mask, segment_ids). The data name theirs the same way (a .npz's x_train.<name>
 * arrays), and each example's inputs travel as one row: the parts side by side, in the order
 * of their names, each a sequence of integers held as floats. The data reader fills this list,
 * the model reader binds each InputLayer to the part of its name (an InputLayer row that
 * copies its part out of the row). It is its own header because both sides read it and
 * neither includes the other's internals. */
#ifndef MW_WORKER_MODEL_INPUTS_H
#define MW_WORKER_MODEL_INPUTS_H

#include <string.h>

#define MW_MAX_MODEL_INPUTS 8 /* named inputs of one model */
#define MW_INPUT_NAME_MAX 64  /* bytes of an input's name, its terminator included */

typedef struct {
    int n; /* 0: the data hold one unnamed input (x_train) */
    char name[MW_MAX_MODEL_INPUTS][MW_INPUT_NAME_MAX];
    int width[MW_MAX_MODEL_INPUTS]; /* values per example; part k starts at the sum of those before
                                     */
} mw_input_parts;

/* p's parts in the order of their names (strcmp), as the data hold them. */
static inline void mw_input_parts_sort(mw_input_parts *p)
{
    for (int k = 1; k < p->n; k++)
        for (int j = k; j > 0 && strcmp(p->name[j - 1], p->name[j]) > 0; j--) {
            char t[MW_INPUT_NAME_MAX];
            memcpy(t, p->name[j], MW_INPUT_NAME_MAX);
            memcpy(p->name[j], p->name[j - 1], MW_INPUT_NAME_MAX);
            memcpy(p->name[j - 1], t, MW_INPUT_NAME_MAX);
            const int w = p->width[j];
            p->width[j] = p->width[j - 1], p->width[j - 1] = w;
        }
}

#endif
