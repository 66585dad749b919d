/* The layer table's rows, one per mw_layer_kind (worker/model/layer.h), made from the one list
 * of worker/model/layer_list.h; the rows live in their families' files under layers/. */
#include <stdio.h>
#include <string.h>

#include "worker/model/graph.h"
#include "worker/model/layer.h"

#define DECLARE_KIND(K, row) extern const mw_layer_ops mw_layer_##row;
#define DECLARE_READER(row) extern const mw_layer_ops mw_layer_##row;
MW_LAYER_LIST(DECLARE_KIND, DECLARE_READER)

/* By kind. */
#define BY_KIND(K, row) [MW_LAYER_##K] = &mw_layer_##row,
#define NOT_A_KIND(row)
static const mw_layer_ops *const rows[MW_LAYER_KINDS] = {MW_LAYER_LIST(BY_KIND, NOT_A_KIND)};

/* Every row, readers too, in the list's order: the Keras classes' lookup and listing. */
#define IN_ORDER(K, row) &mw_layer_##row,
#define READER_IN_ORDER(row) &mw_layer_##row,
static const mw_layer_ops *const all[] = {MW_LAYER_LIST(IN_ORDER, READER_IN_ORDER)};
#define NALL ((int)(sizeof all / sizeof all[0]))

const mw_layer_ops *mw_layer_row(int kind)
{
    return (unsigned)kind < MW_LAYER_KINDS ? rows[kind] : NULL;
}

const mw_layer_ops *mw_layer_row_keras(const char *cls)
{
    for (int k = 0; k < NALL; k++)
        for (int j = 0; j < MW_LAYER_KERAS_MAX && all[k]->keras[j]; j++)
            if (!strcmp(all[k]->keras[j], cls))
                return all[k];
    return NULL;
}

const char *mw_layer_keras_list(void)
{
    static char list[1024];
    if (list[0])
        return list;
    size_t used = 0;
    for (int k = 0; k < NALL; k++)
        for (int j = 0; j < MW_LAYER_KERAS_MAX && all[k]->keras[j] && used < sizeof list; j++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     all[k]->keras[j]);
    return list;
}
