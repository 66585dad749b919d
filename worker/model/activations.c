/* The activation table: the rows of activations.h's list. */
#include "worker/model/activations.h"

#include <stdio.h>
#include <string.h>

#define ROW_(ID, keras, kernel, param, name) [MW_ACT_##ID] = {keras, kernel, param, name},
static const mw_act_info rows[] = {MW_ACTIVATION_LIST(ROW_)};
_Static_assert(sizeof rows / sizeof rows[0] == MW_ACT_COUNT, "a row per mw_activation");

const mw_act_info *mw_act_info_of(mw_activation a)
{
    return &rows[(unsigned)a < MW_ACT_COUNT ? a : MW_ACT_LINEAR];
}

int mw_act_find(const char *s, mw_activation *out)
{
    for (int a = 0; a < MW_ACT_COUNT; a++)
        if (!strcmp(s, rows[a].keras)) {
            *out = (mw_activation)a;
            return 0;
        }
    return -1;
}

const char *mw_act_kernel_name(int k)
{
    for (int a = 0; a < MW_ACT_COUNT; a++)
        if (rows[a].kernel == k)
            return rows[a].name;
    return "?";
}

const char *mw_act_supported(void)
{
    static char list[512];
    if (list[0])
        return list;
    size_t used = 0;
    for (int a = 0; a < MW_ACT_COUNT && used < sizeof list; a++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%s\"", a ? ", " : "",
                                 rows[a].keras);
    return list;
}
