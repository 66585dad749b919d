/* mwtrain's entry point: MPI up, parse, dispatch, and the one place that ends
 * the job.
 *   - Failures every rank can reach an agreement on (flags, TF_CONFIG, data,
 *     set-up) end with one message, printed once by the lowest failing rank,
 *     and the same non-zero exit code on every rank.
 *   - A failure in the middle of training (a collective timeout, a lost
 *     peer) cannot be agreed, since the peer may be gone: the rank prints it
 *     and MPI_Abort ends the whole job with the failure's exit code. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/comm.h"
#include "cluster/hostfile.h"
#include "cluster/topology.h"
#include "cluster/topology_print.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/preempt.h"
#include "common/status.h"
#include "common/watchdog.h"
#include "kernels/cpu/gemm.h"
#include "kernels/kernels.h"
#include "worker/cli.h"
#include "worker/data/preprocess.h"
#include "worker/eval.h"
#include "worker/evaluator.h"
#include "worker/keras/compile.h"
#include "worker/keras/keras.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/optimizer.h"
#include "worker/model/model.h"
#include "worker/model/summary.h"
#include "worker/replicas/device.h"
#include "worker/train.h"

#ifndef MW_VERSION
#define MW_VERSION "unknown"
#endif

static void print_version(void)
{
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    char *nl = strchr(mpi, '\n');
    if (nl)
        *nl = '\0';
    printf("mwtrain %s\n", MW_VERSION);
    const char *isa = mw_kernels_cpu_isa();
    printf("CPU kernels: im2col + %s sgemm%s%s\n", mw_kernels_cpu_blas(), *isa ? ", ISA " : "",
           isa);
    char cuda[1024];
    mw_device_version(cuda, sizeof cuda);
    printf("%s\n", cuda);
    printf("MPI: %s\n", mpi);
}

static mw_status run_summary(const char *model_path)
{
    mw_model m;
    if (model_path)
        MW_TRY(mw_keras_model_load(&m, model_path, 0, 0, 0, 0, NULL));
    else
        MW_TRY(mw_keras_build_tutorial(&m, 28, 28, 1, 10));
    mw_status rc = mw_model_plan(&m, 1); /* the counts only: no weights are allocated */
    if (rc == MW_OK)
        mw_model_summary(&m, stdout);
    if (rc == MW_OK && m.pre) { /* the leading preprocessing layers (worker/data/preprocess.h) */
        printf("Input pipeline (before the first layer, applied as batches are assembled):\n");
        mw_preprocess_summary(m.pre, stdout);
    }
    mw_model_free(&m);
    return rc;
}

/* `mwtrain cluster`: the table with what every rank would train on under --device
 * (mw_device_select, as train decides it), gathered on rank 0 and printed there. Collective
 * over the world; a bad --device (or gpu without a device) is one agreed error. */
#define DEVICE_LEN 32
static mw_status print_cluster(const mw_topology *t, const mw_train_opts *o, int json)
{
    mw_device_choice dev;
    char mine[DEVICE_LEN] = "cpu";
    mw_status rc = mw_device_select(mw_opts_device_for(o, t->is_evaluator), t->local_rank,
                                    t->local_size > 0 ? t->local_size : 1, &dev);
    if (rc == MW_OK && dev.use_gpu)
        snprintf(mine, sizeof mine, dev.n == 1 ? "cuda:%d" : "cuda:%d-%d", dev.first,
                 dev.first + dev.n - 1);
    MW_TRY(mw_agree(t->world, rc, NULL));
    char *all = t->rank == 0 ? calloc((size_t)t->world_size, DEVICE_LEN) : NULL;
    const char **rows = t->rank == 0 ? calloc((size_t)t->world_size, sizeof *rows) : NULL;
    rc = t->rank == 0 && (!all || !rows) ? mw_err(MW_ENOMEM, "out of memory") : MW_OK;
    /* agreed first: the root must not gather into a buffer it could not allocate */
    rc = mw_agree(t->world, rc, NULL);
    /* t->world is in task order, as the table: row i comes from its rank i */
    if (rc == MW_OK && MPI_Gather(mine, DEVICE_LEN, MPI_CHAR, all, DEVICE_LEN, MPI_CHAR, 0,
                                  t->world) != MPI_SUCCESS)
        rc = mw_err(MW_EMPI, "cluster: gathering the devices failed");
    if (rc == MW_OK && t->rank == 0) {
        for (int i = 0; i < t->world_size; i++)
            rows[i] = all + (size_t)i * DEVICE_LEN;
        mw_topology_print(t, stdout, json, rows);
    }
    free(all);
    free(rows);
    return mw_agree(t->world, rc, NULL);
}

/* End the whole job after a failure that cannot be agreed (a peer may be gone): say what this
 * rank saw, then MPI_Abort. When every rank fails at once (all see the same NCCL error or the
 * same timeout), rank 0 aborts first and the others half a second later: one abort usually
 * ends the job with one message, and Open MPI 4.1's mpiexec has crashed (SIGSEGV) handling
 * simultaneous aborts. A dead rank 0 delays the end by that half second only.
 * MPI_Abort goes through this node's MPI daemon; a daemon that is stopped, or cut off from
 * mpirun, may keep it from ever returning or ending the process. After ABORT_GRACE seconds the
 * watchdog ends this rank itself with the same exit code, so the daemon sees its rank exit
 * non-zero and no rank outlives a failed job (the `nodes` suite's faults, tests/nodes/). */
#define ABORT_GRACE 10.0
static void end_job(mw_status rc, int already_printed)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!already_printed)
        mw_log_error("%s", *mw_err_msg() ? mw_err_msg() : mw_status_desc(rc));
    mw_log_error("aborting the job (exit code %d)", mw_status_exit_code(rc));
    fflush(stderr);
    mw_watchdog_arm_exit("MPI_Abort", ABORT_GRACE, mw_status_exit_code(rc));
    if (rank > 0)
        usleep(500 * 1000);
    mw_preempt_dir_remove(); /* a singleton's own directory: MPI_Abort may not return */
    MPI_Abort(MPI_COMM_WORLD, mw_status_exit_code(rc));
    _exit(mw_status_exit_code(rc)); /* MPI_Abort returned: the job must end all the same */
}

/* A failure with a retryable exit code (an MPI failure, a lost peer, a timeout) means the
 * cluster is broken: no agreement can be reached, so the job ends here. */
static void abort_if_broken(mw_status rc, int already_printed)
{
    /* a preempted run ended by agreement: every rank exits, nothing to abort */
    if (mw_status_exit_code(rc) >= 128 && rc != MW_EPREEMPTED)
        end_job(rc, already_printed);
}

/* Every rank agrees on the outcome (under the deadline); the lowest failing rank prints its
 * message once, unless it was printed already. */
static mw_status finish(MPI_Comm comm, mw_status rc, int already_printed)
{
    abort_if_broken(rc, already_printed);
    int me = 0, first = -1;
    MPI_Comm_rank(comm, &me);
    mw_status all = mw_agree(comm, rc, &first);
    if (first < 0)
        abort_if_broken(all, 0); /* the agreement itself timed out */
    if (!already_printed && all != MW_OK && first == me)
        fprintf(stderr, "mwtrain: error: %s\n", *mw_err_msg() ? mw_err_msg() : mw_status_desc(all));
    return all;
}

/* `mwtrain train`. A failure mid-run cannot be agreed (a peer may be gone): print it here and
 * abort the job. Training's other failures were agreed and come back as rc. */
static mw_status run_train(const mw_cli *cli, const mw_topology *topo)
{
    int mid_run = 0;
    /* the evaluator task evaluates the chief's checkpoints; every other task trains */
    mw_status rc = topo->is_evaluator ? mw_evaluator_run(&cli->train, topo, &mid_run)
                                      : mw_train_run(&cli->train, topo, NULL, &mid_run);
    if (mid_run)
        end_job(rc, 0);
    return rc;
}

/* cluster, eval, export and train: the topology is resolved and agreed by every rank. Their
 * failures are agreed too, so every rank holds the failing rank's message: rank 0 alone
 * prints it, and *printed says so. */
static mw_status run_on_cluster(const mw_cli *cli, mw_topology *topo, int rank, int *printed)
{
    mw_status rc = mw_topology_resolve(topo, cli->train.tf_config);
    if (rc != MW_OK) {
        if (rank == 0)
            fprintf(stderr, "mwtrain: error: %s\n", mw_err_msg());
        *printed = 1;
    } else {
        mw_log_set_rank(topo->rank, topo->world_size);
        if (cli->cmd == MW_CMD_CLUSTER) {
            rc = print_cluster(topo, &cli->train, cli->json);
            if (rc != MW_OK) {
                if (topo->rank == 0)
                    fprintf(stderr, "mwtrain: error: %s\n", mw_err_msg());
                *printed = 1;
            }
        } else if (cli->cmd == MW_CMD_EVAL || cli->cmd == MW_CMD_EXPORT) {
            /* agreed failures: every rank holds the message */
            rc = cli->cmd == MW_CMD_EVAL ? mw_eval_run(&cli->train, topo)
                                         : mw_export_run(&cli->train, topo);
            if (rc != MW_OK) {
                if (topo->rank == 0)
                    fprintf(stderr, "mwtrain: error: %s\n", mw_err_msg());
                *printed = 1;
            }
        } else {
            rc = run_train(cli, topo);
            /* training's own failures were agreed: every rank has the message (a preempted
             * run's is not an error: where it stopped and what was saved) */
            if (rc != MW_OK) {
                if (topo->rank == 0)
                    fprintf(stderr, "mwtrain: %s%s\n",
                            rc == MW_EPREEMPTED ? "" : "error: ", mw_err_msg());
                *printed = 1;
            }
        }
    }
    return rc;
}

/* A process no launcher started (no mpirun, srun or hydra rank in its environment) is an MPI
 * singleton: one rank alone, which mwtrain never grows (no spawn, no connect). Open MPI would
 * start a helper daemon for it and open every messaging layer, one of which (PSM2's) times
 * each CPU for 0.1 s as it loads: 0.35 s of every `mwtrain version` on 2 cores. With ob1 alone
 * (shared memory and TCP) it is 0.22 s, and as Open MPI's isolated singleton (no daemon) 0.03
 * s. An isolated singleton's names are the same in every such process (job 1 of family 0), so
 * each gets a directory of its own for its session files and shared-memory segments, removed
 * at its exit: without it, one that ends removes the shared session directory under another
 * that starts (MPI_Init failed in 5 of 200 runs 8 at a time; test_singleton.sh). What the
 * user set is kept: their own isolated singleton, or any of these places. */
static void singleton_env(void)
{
    const char *launched[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof launched / sizeof *launched; i++)
        if (getenv(launched[i]))
            return;
    setenv("OMPI_MCA_pml", "ob1", 0);
    if (getenv("OMPI_MCA_ess_singleton_isolated") || getenv("OMPI_MCA_orte_tmpdir_base") ||
        getenv("OMPI_MCA_btl_vader_backing_directory"))
        return;
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    int n = snprintf(dir, sizeof dir, "%s/mwtrain-mpi-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof dir || !mkdtemp(dir))
        return; /* no directory: the daemon's names, unique per process */
    /* removed at exit, when a signal ends the process, or after MPI_Finalize */
    mw_preempt_dir_register(dir);
    atexit(mw_preempt_dir_remove);
    setenv("OMPI_MCA_orte_tmpdir_base", dir, 1);
    setenv("OMPI_MCA_btl_vader_backing_directory", dir, 1);
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 1);
}

int main(int argc, char **argv)
{
    /* SIGTERM, SIGINT, SIGUSR1 handled before anything else, before any file is read or
     * thread made: a signal during start-up is never the default action (a silent end, which
     * can leave mpirun waiting). train: stop at the next step and save it (worker/train.c);
     * every other command: end at once, removing its temporary files. */
    mw_preempt_start();
    mw_fault_point("start", -1);
    /* The flags first (they need no MPI), so that every blocking point of the run is under
     * --collective-timeout, MPI_Init included: a rank stopped at launch cannot hold the
     * others there forever (common/watchdog.h). */
    mw_cli cli;
    mw_status rc = mw_cli_parse(&cli, argc, argv);
    if (rc == MW_OK && !cli.help && cli.cmd == MW_CMD_TRAIN)
        mw_preempt_install(cli.train.preemption_grace);
    else
        mw_preempt_at_once();
    if (rc == MW_OK && !cli.help) /* the optimizer's files: read once argv is parsed */
        rc = mw_optimizer_resolve(&cli.train);
    if (rc == MW_OK && !cli.help) /* the loss's: --loss-config, or the archive's compile_config */
        rc = mw_loss_resolve(&cli.train);
    const double timeout = rc == MW_OK ? cli.train.collective_timeout : MW_DEFAULT_TIMEOUT;
    mw_comm_set_timeout(timeout);
    mw_fault_point("init", -1);
    mw_watchdog_arm("MPI_Init", timeout);
    singleton_env();
    int provided;
    /* serialized: the overlapped all-reduce's thread calls MPI while the training thread
     * does not (worker/replicas/overlap.h) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    mw_watchdog_disarm();
    /* Errors from MPI calls come back as codes we translate, never a silent abort. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    mw_log_init_from_env();
    mw_log_set_rank(rank, world);

    if (rc == MW_OK) /* a test's MW_FAULT=status:NAME ends here (common/fault.h) */
        rc = mw_fault_status();
    mw_topology topo;
    mw_topology_init(&topo);
    int printed = 0;
    if (rc == MW_OK && cli.log_level >= 0)
        mw_log_set_level((mw_log_level)cli.log_level);
    if (rc != MW_OK || cli.help || cli.cmd == MW_CMD_HELP) {
        if (rc == MW_OK && rank == 0)
            mw_cli_help(stdout, cli.cmd);
    } else if (cli.cmd == MW_CMD_VERSION) {
        if (rank == 0)
            print_version();
    } else if (cli.cmd == MW_CMD_TFCONFIG) {
        /* a local tool: no cluster to resolve */
        if (rank == 0) {
            int task = -1;
            if (cli.task)
                rc = mw_hostfile_parse_task(cli.task, &task);
            if (rc == MW_OK)
                rc = mw_hostfile_print(stdout, cli.hostfile, cli.port, task);
        }
    } else if (cli.cmd == MW_CMD_SUMMARY) {
        if (rank == 0)
            rc = run_summary(cli.train.model_path);
    } else {
        rc = run_on_cluster(&cli, &topo, rank, &printed);
    }
    mw_fault_point("finish", rank);
    mw_status all = finish(topo.world != MPI_COMM_NULL ? topo.world : MPI_COMM_WORLD, rc, printed);
    /* freeing communicators and MPI_Finalize synchronize with the other ranks */
    mw_watchdog_arm("MPI_Finalize (shut-down)", timeout);
    mw_topology_free(&topo);
    MPI_Finalize();
    mw_watchdog_disarm();
    mw_preempt_dir_remove();
    return mw_status_exit_code(all);
}
