/* `mwtrain eval` and `mwtrain export`; see eval.h. Both are collective over the training
 * ranks and agree on every failure, so each rank returns the same status. */
#include "worker/eval.h"

#include <stdio.h>
#include <string.h>

#include "cluster/comm.h"
#include "worker/chief.h"
#include "worker/keras/export.h"
#include "worker/optimizers.h"
#include "worker/session.h"

/* Model (the checkpoint's, or --model), data and the restored weights. */
static mw_status open_restored(mw_session *s, const mw_train_opts *o, const mw_topology *topo,
                               mw_session_use use)
{
    if (topo->ntrain != topo->world_size)
        return mw_err(MW_EUNSUPPORTED, "eval and export run on training tasks only; remove "
                                       "cluster.evaluator from the TF_CONFIG");
    MW_TRY(mw_chief_fetch_model(s, o, topo->train));
    MW_TRY(mw_agree(topo->train, mw_session_open(s, o, topo, use), NULL));
    int restored = 0;
    return mw_chief_restore(s, 1, 1, &restored);
}

mw_status mw_eval_run(const mw_train_opts *o, const mw_topology *topo)
{
    mw_session s;
    mw_session_init(&s);
    mw_status rc = open_restored(&s, o, topo, MW_USE_EVAL);
    double loss = 0, metric[MW_METRICS_MAX];
    if (rc == MW_OK)
        rc = mw_agree(topo->train, mw_session_evaluate(&s, &loss, metric), NULL);
    if (rc == MW_OK && s.rank == 0) {
        printf("Restored the checkpoint of epoch %d (step %ld) from %s\n", s.start_epoch,
               s.global_step, o->checkpoint_dir);
        char te[160], plain[64];
        mw_session_metric_text(&s, te, sizeof te, "Test ", metric, 0);
        mw_session_metric_text(&s, plain, sizeof plain, "", metric, 1);
        printf("Test Loss: %.4f, %s\n", loss, te);
        if (s.world == 1) /* the tutorial's line: "Accuracy after restoring ...: X" */
            printf("%.*s after restoring the saved model without strategy:%s\n",
                   (int)strcspn(plain, ":"), plain, plain + strcspn(plain, ":") + 1);
        fflush(stdout);
    }
    mw_session_close(&s, 0);
    return rc;
}

/* The checkpoint's weights and, when it has them, its optimizer slots (Keras' optimizer
 * variables; iterations: Adam's t, or for SGD, which keeps no count, the steps done);
 * hyperparameters the checkpoint does not record are the flags' defaults. */
static mw_status export_file(const mw_session *s, const mw_train_opts *o)
{
    /* Keras' variables for the slots of an optimizer whose row says how (Adam, SGD); the
     * others go out without their state (Keras then starts them afresh), never with slots
     * under the wrong names */
    const char *name = s->saved_optimizer[0] ? s->saved_optimizer : mw_opts_optimizer_name(o);
    const int k = mw_optimizer_find(name, 0);
    const mw_optimizer_row *row = k >= 0 ? mw_optimizer_row_of((mw_optimizer)k) : NULL;
    const int saved = s->saved_optimizer[0] != 0 && row && row->keras_slots > 0;
    const mw_keras_optimizer opt = {
        .name = name,
        .learning_rate = o->learning_rate,
        .momentum = o->momentum,
        .beta1 = o->beta1,
        .beta2 = o->beta2,
        .epsilon = o->epsilon,
        /* Keras' iterations: the optimizer's own count, or for one whose old checkpoints kept
         * none (SGD), the steps done */
        .iterations = !saved              ? 0
                      : row->legacy_steps ? s->global_step
                                          : s->opt_step,
        .slot1 = saved ? s->m1.data : NULL,
        .slot2 = saved && row->keras_slots > 1 ? s->m2.data : NULL,
    };
    return mw_export_file(&s->model, s->model.params.data, o->export_format, &opt, o->export_path);
}

mw_status mw_export_run(const mw_train_opts *o, const mw_topology *topo)
{
    mw_session s;
    mw_session_init(&s);
    mw_status rc = open_restored(&s, o, topo, MW_USE_EXPORT);
    if (rc == MW_OK) {
        mw_status mine = MW_OK;
        if (s.rank == 0) {
            mine = export_file(&s, o);
            if (mine == MW_OK)
                printf("Exported %zu parameters (epoch %d, step %ld) to %s\n", s.model.nparams,
                       s.start_epoch, s.global_step, o->export_path);
        }
        rc = mw_agree(topo->train, mine, NULL);
    }
    mw_session_close(&s, 0);
    return rc;
}
