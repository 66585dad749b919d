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
static const mw_layer_ops *const rows[] = {MW_LAYER_LIST(BY_KIND, NOT_A_KIND)};
_Static_assert(sizeof rows / sizeof *rows == MW_LAYER_KINDS, "a row per mw_layer_kind");

/* Every row, readers too, in the list's order: the Keras classes' lookup and listing. */
#define IN_ORDER(K, row) &mw_layer_##row,
#define READER_IN_ORDER(row) &mw_layer_##row,
static const mw_layer_ops *const all[] = {MW_LAYER_LIST(IN_ORDER, READER_IN_ORDER)};
#define NALL ((int)(sizeof all / sizeof all[0]))

const mw_layer_ops *mw_layer_row(int kind)
{
    return (unsigned)kind < MW_LAYER_KINDS ? rows[kind] : NULL;
}

const mw_layer_ops *mw_layer_row_nth(int i)
{
    return (unsigned)i < (unsigned)NALL ? all[i] : NULL;
}

const char *mw_layer_keras_class(const char *entry)
{
    const size_t n = strlen(MW_LAYER_KERAS_HUB);
    return strncmp(entry, MW_LAYER_KERAS_HUB, n) ? entry : entry + n;
}

/* The row entry naming cls, NULL when none does. */
static const char *entry_of(const char *cls, const mw_layer_ops **row)
{
    for (int k = 0; k < NALL; k++)
        for (int j = 0; j < MW_LAYER_KERAS_MAX && all[k]->keras[j]; j++)
            if (!strcmp(mw_layer_keras_class(all[k]->keras[j]), cls)) {
                *row = all[k];
                return all[k]->keras[j];
            }
    return NULL;
}

const mw_layer_ops *mw_layer_row_keras(const char *cls)
{
    const mw_layer_ops *row = NULL;
    return entry_of(cls, &row) ? row : NULL;
}

const mw_layer_ops *mw_layer_row_keras_in(const char *cls, const char *module)
{
    const mw_layer_ops *first = mw_layer_row_keras(cls), *builtin = NULL;
    for (int k = 0; first && k < NALL; k++)
        for (int j = 0; j < MW_LAYER_KERAS_MAX && all[k]->keras[j]; j++) {
            if (strcmp(mw_layer_keras_class(all[k]->keras[j]), cls) != 0)
                continue;
            if (module && all[k]->module && !strcmp(all[k]->module, module))
                return all[k];
            if (!all[k]->module && !builtin)
                builtin = all[k];
        }
    return builtin ? builtin : first;
}

int mw_layer_keras_hub(const char *cls)
{
    const mw_layer_ops *row = NULL;
    const char *e = entry_of(cls, &row);
    return e && e != mw_layer_keras_class(e);
}

int mw_layer_keras_modules(const char *cls, char *buf, size_t len)
{
    size_t used = 0;
    int own = 0;
    buf[0] = '\0';
    for (int k = 0; k < NALL; k++)
        for (int j = 0; j < MW_LAYER_KERAS_MAX && all[k]->keras[j] && used < len; j++)
            if (!strcmp(mw_layer_keras_class(all[k]->keras[j]), cls)) {
                const char *m = all[k]->module ? all[k]->module : "keras.layers";
                used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", used ? ", " : "", m);
                own += all[k]->module != NULL;
            }
    return own;
}

/* The classes the rows read, ", "-separated, into list (hub: KerasHub's only). */
static void list_classes(char *list, size_t len, int hub)
{
    size_t used = 0;
    for (int k = 0; k < NALL; k++)
        for (int j = 0; j < MW_LAYER_KERAS_MAX && all[k]->keras[j] && used < len; j++) {
            const char *e = all[k]->keras[j];
            if (!hub || e != mw_layer_keras_class(e))
                used += (size_t)snprintf(list + used, len - used, "%s%s", used ? ", " : "",
                                         mw_layer_keras_class(e));
        }
}

const char *mw_layer_keras_list(void)
{
    static char list[2048];
    if (!list[0])
        list_classes(list, sizeof list, 0);
    return list;
}

const char *mw_layer_keras_hub_list(void)
{
    static char list[512];
    if (!list[0])
        list_classes(list, sizeof list, 1);
    return list;
}
