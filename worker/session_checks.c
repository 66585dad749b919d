/* The model checked against the data it is to train on; see session_checks.h. */
#include "worker/session_checks.h"

#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "worker/model/loss.h"

/* A model that does not fit the data: the loader's message (it names the model's file and
 * the mismatch), and which data the model was checked against. */
mw_status mw_fit_mismatch(const mw_fit *f, mw_status rc)
{
    if (rc != MW_EMODEL || !f->shape[0])
        return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mw_err_msg());
    mw_err_clear();
    if (f->shape[0] == 1 && f->shape[1] == 1) /* (N, F): features or token ids */
        return mw_err(rc, "%s (the data: %s, %d values per example, %d classes)", msg,
                      f->o->data_dir, f->shape[2], f->shape[3]);
    return mw_err(rc, "%s (the data: %s, %dx%dx%d images, %d classes)", msg, f->o->data_dir,
                  f->shape[0], f->shape[1], f->shape[2], f->shape[3]);
}

/* The model's last layer, as a Keras user names it, and whether it is a sigmoid or the folded
 * softmax. */
static const mw_layer *last_shown(const mw_model *m)
{
    const mw_layer *l = &m->layers[m->nlayers - 1];
    while (l->folded && l > m->layers)
        l--;
    return l;
}

/* The loss against the output's activation: from_logits=False wants the activation that
 * makes probabilities, from_logits=True a linear output (Keras would apply it twice). The
 * default loss takes either, as it always has. */
static mw_status check_activation(const mw_fit *f)
{
    const mw_model *m = f->model;
    const mw_loss *ls = &m->loss;
    const mw_layer *l = &m->layers[m->nlayers - 1];
    const int softmax = l->softmax, sigmoid = l->kind == MW_LAYER_ACT && l->act == MW_ACTK_SIGMOID;
    const mw_loss_out want = mw_loss_wants(ls);
    const char *cls = mw_loss_row(ls->kind)->keras, *from = f->o->loss_from;
    if (!from[0])
        return MW_OK;
    const int missing =
        (want == MW_LOSS_OUT_SOFTMAX && !softmax) || (want == MW_LOSS_OUT_SIGMOID && !sigmoid);
    const char *act = want == MW_LOSS_OUT_SOFTMAX ? "softmax" : "sigmoid";
    if (missing)
        return mw_err(MW_EMODEL,
                      "%s: %s(from_logits=False) wants probabilities, but the model's output "
                      "(layer '%s') has no %s; end it with activation=\"%s\", or use "
                      "from_logits=True",
                      from, cls, last_shown(m)->name, act, act);
    if (mw_loss_row(ls->kind)->has_logits && ls->d.from_logits && (softmax || sigmoid))
        return mw_err(MW_EMODEL,
                      "%s: %s(from_logits=True) wants logits, but the model's output (layer "
                      "'%s') ends in a %s; remove the activation, or use from_logits=False",
                      from, cls, last_shown(m)->name, softmax ? "softmax" : "sigmoid");
    return MW_OK;
}

/* A model whose output is an image (None, H, W, C) has a loss per pixel: the data's labels
 * (N, H, W), and such labels need such a model (of that height and width). */
static mw_status check_pixels(mw_fit *f)
{
    const mw_model *m = f->model;
    const mw_layer *last = &m->layers[m->nlayers - 1];
    const int H = f->train->targets ? 0 : f->train->label_rows;
    const int W = H > 0 ? f->train->label_width / H : 0;
    const int pixels = !last->flat && last->out_h > 1;
    char shape[64];
    if (last->flat)
        snprintf(shape, sizeof shape, "not an image: (None, %d)", last->out_c);
    else
        snprintf(shape, sizeof shape, "%s(None, %d, %d, %d)",
                 pixels ? "" : "not an image: ", last->out_h, last->out_w, last->out_c);
    if (H > 0 && (!pixels || last->out_h != H || last->out_w != W))
        return mw_err(MW_EDATA,
                      "%s: labels (N, %d, %d), a class per pixel, but the model's output (layer "
                      "'%s') is %s; a model of labels per pixel ends in an image of the labels' "
                      "size: (None, %d, %d, classes)",
                      f->o->data_dir, H, W, last_shown(m)->name, shape, H, W);
    if (pixels && H == 0)
        return mw_err(MW_EDATA,
                      "%s: the model's output (layer '%s') is (None, %d, %d, %d), a class per "
                      "pixel; expected labels (N, %d, %d), but the data have %d per example",
                      f->o->data_dir, last_shown(m)->name, last->out_h, last->out_w, last->out_c,
                      last->out_h, last->out_w,
                      f->train->targets ? f->train->target_width : f->train->label_width);
    return MW_OK;
}

/* A model whose output is a sequence (None, T, C), or an image (None, H, W, C), has a loss per
 * position: the data's labels (N, T) (or (N, H, W): check_pixels), the sparse loss; and labels
 * per position need such a model. */
static mw_status check_positions(mw_fit *f, const char *from)
{
    const mw_model *m = f->model;
    const mw_layer *last = &m->layers[m->nlayers - 1];
    MW_TRY(check_pixels(f));
    const int T =
        !last->flat && (last->out_h > 1 || last->out_w > 1) ? last->out_h * last->out_w : 1;
    const int W = f->train->targets ? 1 : f->train->label_width > 1 ? f->train->label_width : 1;
    if (T != W && T == 1)
        return mw_err(MW_EDATA,
                      "%s: labels (N, %d), one per position, but the model's output (layer '%s') "
                      "is (None, %d); a model of labels per position ends in a Dense on each "
                      "position: (None, %d, classes)",
                      f->o->data_dir, W, last_shown(m)->name, last->out_c, W);
    if (T != W)
        return mw_err(MW_EDATA,
                      "%s: %d label(s) per example, but the model's output (layer '%s') is "
                      "(None, %d, %d), one per position; expected labels (N, %d)",
                      f->o->data_dir, W, last_shown(m)->name, T, last->out_c, T);
    if (T > 1 && m->loss.kind != MW_LOSS_SPARSE_XENT)
        return mw_err(MW_EUNSUPPORTED,
                      "%s: a loss per position is SparseCategoricalCrossentropy, for now; the "
                      "model's output is a %s (layer '%s')",
                      from, last->out_h > 1 ? "class per pixel" : "sequence", last_shown(m)->name);
    if (T > 1 && (last->out_c < f->train->num_classes ||
                  (f->o->classes > 0 && last->out_c != f->train->num_classes)))
        return mw_err(MW_EMODEL,
                      "%s: the model's output has %d units per position (layer '%s') but %s has "
                      "%d classes; expected a last Dense(%d)%s",
                      from, last->out_c, last_shown(m)->name, f->o->data_dir, f->train->num_classes,
                      f->train->num_classes,
                      f->o->classes > 0 ? " (--classes)" : " or wider (a vocabulary)");
    if (T > 1) /* the model's vocabulary: the labels are below it */
        f->train->num_classes = f->test->num_classes = last->out_c;
    return MW_OK;
}

/* Beside ignore_class the model says how many classes there are: its output must have a unit
 * for every other label (and match --classes when given); the ignore label is a class of the
 * model's when below its width (Keras' ignore_class=0 for padding), else none. */
static mw_status check_ignore_width(mw_fit *f, const char *from)
{
    const mw_model *m = f->model;
    const int width = m->layers[m->nlayers - 1].out_c, nc = f->train->num_classes;
    if (width < nc || (f->o->classes > 0 && width != nc))
        return mw_err(MW_EMODEL,
                      "%s: the model's output has %d units (layer '%s') but %s has %d classes "
                      "(labels other than ignore_class %d); expected a last Dense(%d)%s",
                      from, width, last_shown(m)->name, f->o->data_dir, nc,
                      (int)m->loss.ignore_class, nc, f->o->classes > 0 ? " (--classes)" : "");
    f->train->num_classes = f->test->num_classes = width;
    return MW_OK;
}

/* The loss (o->loss) set on the model and checked against the data's targets and the
 * model's output; integer labels become float targets for a loss that takes floats. */
mw_status mw_fit_check_loss(mw_fit *f)
{
    mw_model *m = f->model;
    mw_loss_accuracy_by_shape(&m->loss, m->layers[m->nlayers - 1].out_c);
    const mw_loss_ops *row = mw_loss_row(m->loss.kind);
    const char *from = f->o->loss_from[0] ? f->o->loss_from : "the default loss";
    /* the loss chosen for data it does not fit: a configuration error (exit 2), as the output's
     * width against the targets below; the data itself is sound */
    if (m->loss.kind == MW_LOSS_CCE && !f->train->targets)
        return mw_err(MW_ECONFIG,
                      "%s: CategoricalCrossentropy takes one-hot (or soft) float32 targets "
                      "(N, K), but %s has integer class labels; use "
                      "SparseCategoricalCrossentropy for labels",
                      from, f->o->data_dir);
    if (!row->dense && f->train->targets)
        return mw_err(MW_ECONFIG,
                      "%s: %s takes integer class labels, but %s has float32 targets (%d per "
                      "example); use CategoricalCrossentropy (one-hot targets), "
                      "BinaryCrossentropy or a regression loss (--loss, --loss-config)",
                      from, row->keras, f->o->data_dir, f->train->target_width);
    MW_TRY(check_positions(f, from));
    if (!row->dense && m->loss.has_ignore)
        MW_TRY(check_ignore_width(f, from));
    if (row->dense) {
        MW_TRY(mw_dataset_labels_as_targets(f->train, f->o->data_dir));
        MW_TRY(mw_dataset_labels_as_targets(f->test, f->o->data_dir));
        const int width = m->layers[m->nlayers - 1].out_c; /* m->nclasses once finalized */
        if (width != f->train->target_width)
            return mw_err(MW_EMODEL,
                          "%s: %s: the model's output has %d units (layer '%s') but %s has %d "
                          "target value(s) per example; expected a last Dense(%d)%s",
                          from, row->keras, width, last_shown(m)->name, f->o->data_dir,
                          f->train->target_width, f->train->target_width,
                          m->loss.kind == MW_LOSS_CCE && f->train->target_width == 1
                              ? " (CategoricalCrossentropy takes one-hot targets (N, K); "
                                "integer labels go with SparseCategoricalCrossentropy)"
                              : "");
        if (f->test->count && f->test->target_width != f->train->target_width)
            return mw_err(MW_EDATA,
                          "%s: the test targets have %d value(s) per example, the "
                          "training targets %d",
                          f->o->data_dir, f->test->target_width, f->train->target_width);
    }
    return check_activation(f);
}

/* A model that starts with an Embedding reads token ids: the data must hold integer ids
 * (N, T), each below its input_dim (the first one that is not names the example and the
 * position). */
/* Embedding e reads ids below its input_dim: in the model's input, or in the named input
 * (an InputLayer) it reads. */
static mw_status check_embedding(mw_fit *f, const mw_layer *e)
{
    const mw_model *m = f->model;
    const mw_layer *part = e->in[0] >= 0 ? &m->layers[e->in[0]] : NULL;
    const mw_dataset *sets[2] = {f->train, f->test};
    const char *names[2] = {"training", "test"};
    char where[sizeof part->name + 32] = "";
    if (part)
        snprintf(where, sizeof where, " of input '%s'", part->name);
    for (int i = 0; i < 2; i++) {
        uint32_t ex = 0, pos = 0;
        int64_t v = 0;
        if (sets[i]->count && sets[i]->type != MW_IMAGES_TOKENS)
            return mw_err(MW_EDATA,
                          "%s: the %s set holds %s, but the model's layer '%s' "
                          "(Embedding) reads integer token ids (N, T)",
                          f->o->data_dir, names[i],
                          sets[i]->type == MW_IMAGES_F32 ? "float32 values" : "uint8 images",
                          e->name);
        const size_t off = part ? (size_t)part->part_off : 0;
        const size_t per =
            part ? (size_t)part->out_c : (size_t)sets[i]->rows * sets[i]->cols * sets[i]->channels;
        if (mw_dataset_find_token_in(sets[i], off, per, e->vocab, &ex, &pos, &v))
            return mw_err(MW_EDATA,
                          "%s: %s example %u has token id %lld at position %u%s; the model's "
                          "Embedding '%s' has input_dim %d (ids 0..%d)",
                          f->o->data_dir, names[i], ex, (long long)v, pos, where, e->name, e->vocab,
                          e->vocab - 1);
    }
    return MW_OK;
}

mw_status mw_fit_check_tokens(mw_fit *f)
{
    const mw_model *m = f->model;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *e = &m->layers[i];
        if (e->kind == MW_LAYER_EMBED &&
            (e->in[0] < 0 || m->layers[e->in[0]].kind == MW_LAYER_INPUT))
            MW_TRY(check_embedding(f, e));
    }
    return MW_OK;
}
