/* Several named inputs (worker/data/data_parts.h): the arrays x_train.<name> of a .npz packed
 * into one row of int32 ids per example.
 *
 * Why one row: every path that moves examples (the shuffle, a replica's slice, the batch
 * assembly, the device copy) moves one row of values per example; the parts side by side in
 * that row reach the model unchanged, and the model's InputLayers take their parts out of it
 * (worker/model/inputs.h). The parts are integer sequences (token ids, a padding mask, segment
 * ids), so the row is a token row (MW_IMAGES_TOKENS, 4 bytes per value). */
#include "worker/data/data_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sysmem.h"

int mw_data_part_name(const char *member, const char *split, char *name, size_t cap)
{
    const size_t ls = strlen(split), lm = strlen(member);
    if (lm <= ls + 1 + 4 || strncmp(member, split, ls) != 0 || member[ls] != '.' ||
        strcmp(member + lm - 4, ".npy") != 0)
        return 0;
    const size_t n = lm - ls - 1 - 4;
    if (n + 1 > cap)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char c = member[ls + 1 + i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return -1;
    }
    memcpy(name, member + ls + 1, n);
    name[n] = '\0';
    return 1;
}

/* One part: (N, T) of integers or booleans, N the first part's. */
static mw_status check_part(const mw_npy_array *a, uint64_t n)
{
    const mw_npy_header *h = &a->h;
    if (h->ndim != 2 || h->shape[1] == 0 || h->shape[1] > (1u << 20))
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': %d dimensions (%llu values per example); "
                      "expected a named input of (N, T), T from 1 to %u: a sequence per example "
                      "(token ids, a padding mask, segment ids)",
                      a->name, h->ndim, (unsigned long long)(h->ndim == 2 ? h->shape[1] : 0),
                      1u << 20);
    if (h->kind != 'i' && h->kind != 'u' && h->kind != 'b')
        return mw_err(MW_EDATA,
                      "%s: npy header field 'descr': '%s'; expected integers or booleans "
                      "(token ids, a padding mask, segment ids)",
                      a->name, h->descr);
    if (h->shape[0] != n)
        return mw_err(MW_EDATA,
                      "%s: npy header field 'shape': %llu examples; expected %llu, as the "
                      "split's other arrays",
                      a->name, (unsigned long long)h->shape[0], (unsigned long long)n);
    return MW_OK;
}

/* Part a's values into column off.. of the rows (width values each), each in [0, 2^24). */
static mw_status copy_part(const mw_npy_array *a, int32_t *rows, uint64_t width, uint64_t off)
{
    const uint64_t n = a->h.shape[0], t = a->h.shape[1];
    const int size = a->h.itemsize, sgn = a->h.kind == 'i';
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < t; j++) {
            const int64_t v = mw_token_at(a->data + (i * t + j) * (uint64_t)size, size, sgn);
            if (v < 0 || v >= (INT64_C(1) << 24))
                return mw_err(MW_EDATA,
                              "%s: example %llu has %lld at position %llu; expected a value in "
                              "0..%d",
                              a->name, (unsigned long long)i, (long long)v, (unsigned long long)j,
                              (1 << 24) - 1);
            rows[i * width + off + j] = (int32_t)v;
        }
    return MW_OK;
}

/* Parts in the order of their names: sorted, and order[k] the index in p of its part k. */
static void sort_names(const mw_input_parts *p, mw_input_parts *sorted, int *order)
{
    *sorted = *p;
    mw_input_parts_sort(sorted);
    for (int k = 0; k < p->n; k++)
        for (int j = 0; j < p->n; j++)
            if (!strcmp(sorted->name[k], p->name[j]))
                order[k] = j;
}

mw_status mw_data_pack_parts(const mw_npy_array *parts, mw_input_parts *p, const char *what,
                             mw_npy_array *out)
{
    int order[MW_MAX_MODEL_INPUTS];
    mw_input_parts sorted;
    sort_names(p, &sorted, order);
    const uint64_t n = parts[0].h.ndim >= 1 ? parts[0].h.shape[0] : 0;
    uint64_t width = 0;
    for (int k = 0; k < p->n; k++) {
        MW_TRY(check_part(&parts[k], n));
        width += parts[k].h.shape[1];
    }
    if (n == 0)
        return mw_err(MW_EDATA, "%s: no examples; expected N > 0", what);
    const uint64_t nbytes = n * width * sizeof(int32_t);
    MW_TRY(mw_sysmem_check_load(nbytes, "%s: the %d named inputs side by side take", what, p->n));
    int32_t *rows = malloc((size_t)nbytes);
    if (!rows)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %llu bytes for the named inputs", what,
                      (unsigned long long)nbytes);
    uint64_t off = 0;
    for (int k = 0; k < p->n; k++) {
        const mw_npy_array *a = &parts[order[k]];
        mw_status rc = copy_part(a, rows, width, off);
        if (rc != MW_OK) {
            free(rows);
            return rc;
        }
        sorted.width[k] = (int)a->h.shape[1];
        off += a->h.shape[1];
    }
    *p = sorted;
    mw_npy_array_init(out);
    snprintf(out->name, sizeof out->name, "%s", what);
    out->h.kind = 'i', out->h.itemsize = 4, out->h.ndim = 2;
    snprintf(out->h.descr, sizeof out->h.descr, "<i4");
    out->h.shape[0] = n, out->h.shape[1] = width, out->h.count = n * width;
    out->heap = rows, out->data = (uint8_t *)rows;
    return MW_OK;
}

mw_status mw_data_same_parts(const mw_input_parts *train, const mw_input_parts *test,
                             const char *where)
{
    for (int k = 0; k < train->n || k < test->n; k++) {
        const char *a = k < train->n ? train->name[k] : NULL,
                   *b = k < test->n ? test->name[k] : NULL;
        if (a && b && !strcmp(a, b) && train->width[k] == test->width[k])
            continue;
        if (a && b && !strcmp(a, b))
            return mw_err(MW_EDATA,
                          "%s: x_test.%s has %d values per example, x_train.%s %d; expected "
                          "the same length",
                          where, a, test->width[k], a, train->width[k]);
        const int in_train = a && (!b || strcmp(a, b) < 0);
        return mw_err(MW_EDATA,
                      "%s: x_%s.%s has no x_%s.%s beside it; expected the same named "
                      "inputs in both splits",
                      where, in_train ? "train" : "test", in_train ? a : b,
                      in_train ? "test" : "train", in_train ? a : b);
    }
    return MW_OK;
}
