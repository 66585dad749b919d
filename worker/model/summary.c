/* The Keras-like summary table of a model (mw_model_summary, model.h). */
#include <stdio.h>

#include "worker/model/model.h"
#include "worker/model/summary.h"

/* The Keras layer whose output tensor idx is (a folded activation belongs to its layer). */
static const char *shown_name(const mw_model *m, int idx)
{
    while (idx >= 0 && m->layers[idx].folded)
        idx--;
    return idx < 0 ? (m->input_name[0] ? m->input_name : "input_layer") : m->layers[idx].name;
}

/* A sequence (None, T, C) is held as 1 x T x C (the rule Dense and LayerNormalization read it
 * by): shown as Keras shows it. */
static void shape_text(char *s, size_t n, const mw_layer *l)
{
    if (l->flat)
        snprintf(s, n, "(None, %d)", l->out_c);
    else if (l->out_h == 1 && l->out_w > 1)
        snprintf(s, n, "(None, %d, %d)", l->out_w, l->out_c);
    else
        snprintf(s, n, "(None, %d, %d, %d)", l->out_h, l->out_w, l->out_c);
}

/* A graph's rows: Keras' "Connected to" column names each input as layer[0][0]. */
static size_t summary_graph(const mw_model *m, FILE *f)
{
    char shape[48];
    if (m->flat_input)
        snprintf(shape, sizeof shape, "(None, %d)", m->in_c);
    else
        snprintf(shape, sizeof shape, "(None, %d, %d, %d)", m->in_h, m->in_w, m->in_c);
    char label[160];
    snprintf(label, sizeof label, "%s (InputLayer)", shown_name(m, -1));
    if (!m->parts.n) /* several named inputs: their own InputLayers stand for the row */
        fprintf(f, "%-48s %-22s %10d  %s\n", label, shape, 0, "-");
    size_t total = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        if (l->folded)
            continue;
        char conn[512] = "";
        size_t used = 0;
        for (int j = 0; j < l->nin && used < sizeof conn && l->kind != MW_LAYER_INPUT; j++)
            used += (size_t)snprintf(conn + used, sizeof conn - used, "%s%s[0][0]", j ? ", " : "",
                                     shown_name(m, l->in[j]));
        if (l->kind == MW_LAYER_INPUT)
            snprintf(conn, sizeof conn, "-");
        else if (l->kind == MW_LAYER_MHA && l->mha.kmask && used < sizeof conn)
            snprintf(conn + used, sizeof conn - used, ", %s[0][0] (padding mask)",
                     shown_name(m, l->mha.kmask - 1));
        snprintf(label, sizeof label, "%s (%s)", l->name, l->cls);
        shape_text(shape, sizeof shape, l);
        size_t np = l->w_count + l->b_count + l->stats_count;
        total += np;
        fprintf(f, "%-48s %-22s %10zu  %s\n", label, shape, np, conn);
    }
    return total;
}

void mw_model_summary(const mw_model *m, FILE *f)
{
    fprintf(f, "Model: \"%s\"\n", m->name);
    size_t total = 0, state = 0;
    for (int i = 0; i < m->nlayers; i++)
        state += m->layers[i].stats_count;
    if (m->graph) {
        fprintf(f, "%-48s %-22s %10s  %s\n", "Layer (type)", "Output Shape", "Param #",
                "Connected to");
        fprintf(f, "==================================================================="
                   "==================\n");
        total = summary_graph(m, f);
        fprintf(f, "==================================================================="
                   "==================\n");
    } else {
        fprintf(f, "%-32s %-22s %10s\n", "Layer (type)", "Output Shape", "Param #");
        fprintf(f, "=================================================================\n");
        for (int i = 0; i < m->nlayers; i++) {
            const mw_layer *l = &m->layers[i];
            if (l->folded)
                continue;
            char label[160], shape[48];
            snprintf(label, sizeof label, "%s (%s)", l->name, l->cls);
            shape_text(shape, sizeof shape, l);
            size_t np = l->w_count + l->b_count + l->stats_count;
            total += np;
            fprintf(f, "%-32s %-22s %10zu\n", label, shape, np);
        }
        fprintf(f, "=================================================================\n");
    }
    fprintf(f, "Total params: %zu\nTrainable params: %zu\nNon-trainable params: %zu\n", total,
            total - state, state);
}
