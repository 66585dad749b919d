/* The defaults of a run's options; see opts.h. They are the tutorial's (docs/design.md). */
#include "worker/opts.h"

#include <string.h>

#include "worker/data/data.h"

void mw_train_opts_default(mw_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 10;
    o->batch_per_replica = 64;
    o->replicas_per_worker = 0; /* one per GPU the rank drives; 1 on the CPU */
    o->learning_rate = 1e-3;
    o->optimizer = MW_OPT_ADAM;
    o->momentum = 0.9;
    o->beta1 = 0.9, o->beta2 = 0.999, o->epsilon = 1e-7;
    o->seed = 42;
    o->data_dir = MW_DATA_DEFAULT_DIR;
    o->backend = "cpu";
    o->progress = MW_PROGRESS_AUTO;
    o->progress_interval = 5.0;
    o->allreduce = MW_AR_AUTO;
    o->micro_batch = 16;
    o->checkpoint_dir = "./training_checkpoints";
    o->checkpoint_every_epochs = 2;
    o->keep_checkpoints = 5;
    o->summary_dir = "./logs";
    o->device = "auto";
    o->collective_timeout = MW_DEFAULT_TIMEOUT;
    o->bucket_mb = 4.0;
    o->validation_seed = UINT64_MAX;
    o->decode_threads = -1; /* auto: a pool beside a GPU, none on the CPU */
    o->preemption_grace = 20;
    o->export_format = "safetensors";
    o->evaluator_device = "cpu";
    o->rho = 0.9;
    o->initial_accumulator = 0.1;
    o->loss_scale_initial = 32768.0;
    o->loss_scale_growth = 2000;
    mw_loss_default(&o->loss);
}

const char *mw_opts_device_for(const mw_train_opts *o, int is_evaluator)
{
    return is_evaluator ? o->evaluator_device : o->device;
}

#define MW_OPT_NAME(E, name) #name,
const char *const mw_optimizer_names[MW_OPT_COUNT + 1] = {MW_OPTIMIZERS(MW_OPT_NAME) NULL};
#undef MW_OPT_NAME

const char *mw_opts_optimizer_name(const mw_train_opts *o)
{
    return (unsigned)o->optimizer < MW_OPT_COUNT ? mw_optimizer_names[o->optimizer] : "?";
}
