/* worker/memory and mw_model_ws_nbytes: the workspace estimate equals, byte for byte, the
 * block mw_model_ws_alloc takes (tutorial CNN, a CNN with dropout, an MLP; several batch
 * sizes); the run estimate follows the CPU backend's plan (threads, examples per thread)
 * and adds up; the check passes what fits, refuses what does not with MW_ENOMEM and a
 * message that breaks the estimate down and names the limit, its source and the flags,
 * divides among a node's ranks, and is skipped by MW_MEMORY_CHECK=off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util.h"
#include "worker/keras/keras.h"
#include "worker/memory.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"
#include "worker/opts.h"
#include "worker/replicas/replicas.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static void load_model(mw_model *m, const char *which)
{
    if (strcmp(which, "tutorial") == 0) {
        assert_int_equal(mw_keras_build_tutorial(m, 28, 28, 1, 10), MW_OK);
    } else {
        char *path = mw_test_srcpath(which);
        assert_int_equal(mw_keras_load_file(m, path, 28, 28, 1, 10), MW_OK);
        free(path);
    }
    assert_int_equal(mw_model_finalize(m, 64), MW_OK);
}

/* The estimate is the allocation's own plan: equal for every size, including the <= 0 that
 * allocates for one example. */
static void ws_nbytes_matches_alloc(void **state)
{
    (void)state;
    const char *models[] = {"tutorial", "tests/data/keras/cnn_dropout_k2.json",
                            "tests/data/keras/mlp_k3.json"};
    const int sizes[] = {0, 1, 2, 7, 16, 63, 64, 100, 257};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        mw_model m;
        load_model(&m, models[i]);
        size_t prev = 0;
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
            mw_model_ws ws;
            mw_model_ws_init(&ws);
            assert_int_equal(mw_model_ws_alloc(&ws, &m, sizes[j]), MW_OK);
            size_t est = mw_model_ws_nbytes(&m, sizes[j]);
            if (est != ws.nbytes)
                fail_msg("%s, max_n %d: estimate %zu bytes, allocated %zu", models[i], sizes[j],
                         est, ws.nbytes);
            assert_true(est >= prev); /* grows with the batch */
            prev = est;
            mw_model_ws_free(&ws);
        }
        /* a batch too large to allocate here is still estimated, linearly */
        size_t a = mw_model_ws_nbytes(&m, 1 << 15), b = mw_model_ws_nbytes(&m, 1 << 16);
        assert_true(b > a && b <= 2 * a + 4096);
        mw_model_free(&m);
    }
}

static mw_dataset fake_data(uint32_t count)
{
    mw_dataset d;
    mw_dataset_init(&d);
    d.count = count, d.rows = 28, d.cols = 28, d.channels = 1, d.num_classes = 10;
    return d;
}

/* The run estimate: the CPU backend's threads and examples per thread, each part as
 * documented, and the sum. */
static void estimate_parts(void **state)
{
    (void)state;
    mw_model m;
    load_model(&m, "tutorial");
    mw_train_opts o;
    mw_train_opts_default(&o);
    const mw_dataset train = fake_data(60000), test = fake_data(10000);
    const struct {
        int bpr, micro, threads, want_threads, want_per_thread;
    } cases[] = {
        {64, 16, 2, 2, 16},
        {10, 16, 4, 4, 3},
        {8192, 8192, 2, 2, 4096},
        {65536, 65536, 2, 2, 32768},
        {1, 16, 1, 1, 1},
        {64, 16, 0, 1, 16},
        {64, 16, 1000, MW_CPU_MAX_THREADS, 1},
    };
    const uint64_t grad = (uint64_t)m.params.count * sizeof(float);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        o.batch_per_replica = cases[i].bpr, o.micro_batch = cases[i].micro;
        mw_memory_estimate e;
        mw_memory_estimate_run(&e, &m, &train, &test, &o, cases[i].threads, 0);
        assert_int_equal(e.threads, cases[i].want_threads);
        assert_int_equal(e.per_thread, cases[i].want_per_thread);
        assert_int_equal(mw_cpu_examples_per_thread(&o, e.threads), e.per_thread);
        assert_int_equal(e.activations,
                         (uint64_t)e.threads * mw_model_ws_nbytes(&m, cases[i].want_per_thread));
        assert_int_equal(e.gradients, (uint64_t)e.threads * grad);
        assert_int_equal(e.model, 12 * grad); /* params, 3 slots; 4 checkpoint copies, 4 more */
        assert_int_equal(e.data, 70000 * (784 + 4) + 60001 * 4);
        assert_int_equal(e.margin, MW_MEMORY_MARGIN);
        assert_int_equal(e.total, e.activations + e.gradients + e.model + e.data + e.margin);
    }
    /* on a GPU the activations are device memory: not counted */
    mw_memory_estimate e;
    o.batch_per_replica = 8192, o.micro_batch = 8192;
    mw_memory_estimate_run(&e, &m, &train, NULL, &o, 4, 1);
    assert_int_equal(e.threads, 1);
    assert_int_equal(e.activations, 0);
    assert_int_equal(e.data, 60000 * (784 + 4) + 60001 * 4);
    mw_model_free(&m);
    /* a BatchNormalization model trains each slice in one backward, into one gradient arena */
    load_model(&m, "tests/data/keras/graph/resblock_k3.json");
    assert_true(mw_model_has_batchnorm(&m));
    const uint64_t bn_grad = (uint64_t)m.params.count * sizeof(float);
    o.batch_per_replica = 64, o.micro_batch = 64;
    for (int threads = 1; threads <= 4; threads++) {
        mw_memory_estimate_run(&e, &m, &train, NULL, &o, threads, 0);
        assert_int_equal(e.threads, threads);
        assert_int_equal(mw_cpu_grad_arenas(&m, threads), 1);
        assert_int_equal(e.gradients, bn_grad);
    }
    mw_model_free(&m);
}

static mw_sysmem cgroup_mem(uint64_t limit, uint64_t usage)
{
    mw_sysmem mem;
    memset(&mem, 0, sizeof mem);
    mem.source = MW_SYSMEM_CGROUP_V2;
    mem.limit = limit, mem.usage = usage, mem.available = limit - usage;
    snprintf(mem.cgroup, sizeof mem.cgroup, "/mwtrain-test-1");
    return mem;
}

static void check(void **state)
{
    (void)state;
    mw_model m;
    load_model(&m, "tutorial");
    mw_train_opts o;
    mw_train_opts_default(&o);
    const mw_dataset train = fake_data(60000), test = fake_data(10000);
    mw_memory_estimate e;

    /* the default run fits in 1 GiB, even shared by 4 ranks */
    mw_memory_estimate_run(&e, &m, &train, &test, &o, 2, 0);
    mw_sysmem mem = cgroup_mem(GIB, 16 * MIB);
    assert_int_equal(mw_memory_check(&e, &mem, 1, &o), MW_OK);
    assert_int_equal(mw_memory_check(&e, &mem, 4, &o), MW_OK);
    /* ... not by 8 (126 MiB each) */
    expect_err(mw_memory_check(&e, &mem, 8, &o), MW_ENOMEM, "shared by 8 ranks on this node",
               "126.0 MiB each", "libraries 64.0 MiB");
    mw_err_clear();

    /* 8192 x 8192 on 2 threads: 2 x 4096 examples of activations */
    o.batch_per_replica = 8192, o.micro_batch = 8192;
    mw_memory_estimate_run(&e, &m, &train, &test, &o, 2, 0);
    expect_err(mw_memory_check(&e, &mem, 1, &o), MW_ENOMEM, "this run needs about ",
               "activations 3.6 GiB for 2 threads x 4096 examples",
               "cgroup v2 memory.max of /mwtrain-test-1: limit 1.0 GiB, 16.0 MiB in use",
               "--micro-batch (now 8192", "--batch-per-replica (now 8192) or --threads (now 2)",
               "MW_MEMORY_CHECK=off", "data 52.8 MiB");
    assert_null(strstr(mw_err_msg(), "shared by"));
    mw_err_clear();
    /* one thread: fewer threads is no advice */
    mw_memory_estimate one;
    mw_memory_estimate_run(&one, &m, &train, &test, &o, 1, 0);
    expect_err(mw_memory_check(&one, &mem, 1, &o), MW_ENOMEM,
               "activations 3.6 GiB for 1 thread x 8192 examples",
               "lower --micro-batch (now 8192, the examples a thread holds) or "
               "--batch-per-replica (now 8192), or set MW_MEMORY_CHECK=off");
    assert_null(strstr(mw_err_msg(), "--threads"));
    mw_err_clear();
    /* exactly at the limit passes; a byte less fails */
    mem = cgroup_mem(e.total, 0);
    assert_int_equal(mw_memory_check(&e, &mem, 1, &o), MW_OK);
    mem = cgroup_mem(e.total - 1, 0);
    assert_int_equal(mw_memory_check(&e, &mem, 1, &o), MW_ENOMEM);
    mw_err_clear();
    /* no information: nothing to check against */
    memset(&mem, 0, sizeof mem);
    assert_int_equal(mw_memory_check(&e, &mem, 1, &o), MW_OK);

    char line[1536];
    mem = cgroup_mem(4 * GIB, 0);
    mw_memory_describe(&e, &mem, 2, line, sizeof line);
    printf("%s\n", line);
    expect_contains(line, "memory: about 3.7 GiB per rank (activations 3.6 GiB");
    assert_non_null(
        strstr(line, "2.0 GiB available to it (cgroup v2 memory.max of /mwtrain-test-1"));
    expect_contains(line, "in use; shared by 2 ranks on this node: 2.0 GiB each)");
    mw_model_free(&m);
}

/* The estimate comes from the plan alone (no parameter arena yet: what the session checks
 * before allocating); export counts the model only; the advice names what takes the most. */
static void planned_and_advice(void **state)
{
    (void)state;
    mw_model planned, full;
    assert_int_equal(mw_keras_build_tutorial(&planned, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_plan(&planned, 64), MW_OK);
    assert_null(planned.params.data);
    load_model(&full, "tutorial");
    mw_train_opts o;
    mw_train_opts_default(&o);
    const mw_dataset train = fake_data(60000), test = fake_data(10000);
    mw_memory_estimate a, b;
    mw_memory_estimate_run(&a, &planned, &train, &test, &o, 2, 0);
    mw_memory_estimate_run(&b, &full, &train, &test, &o, 2, 0);
    assert_memory_equal(&a, &b, sizeof a);

    mw_memory_estimate_export(&a, &planned);
    const uint64_t grad = (uint64_t)planned.params.count * sizeof(float);
    assert_int_equal(a.model, 12 * grad);
    assert_int_equal(a.activations + a.gradients + a.data, 0);
    assert_int_equal(a.total, a.model + MW_MEMORY_MARGIN);

    /* one example on one thread, no data: the model takes the most */
    o.batch_per_replica = 1, o.micro_batch = 1;
    mw_memory_estimate_run(&a, &planned, NULL, NULL, &o, 1, 0);
    assert_true(a.model + a.gradients > a.activations);
    mw_sysmem mem = cgroup_mem(a.total - 1, 0);
    expect_err(mw_memory_check(&a, &mem, 1, &o), MW_ENOMEM,
               "; use a smaller model (its parameters, gradients and optimizer state take the "
               "most; `mwtrain summary` counts them), or set MW_MEMORY_CHECK=off");
    mw_err_clear();
    /* the same with 70000 examples: the data take the most */
    mw_memory_estimate_run(&a, &planned, &train, &test, &o, 1, 0);
    mem = cgroup_mem(a.total - 1, 0);
    expect_err(mw_memory_check(&a, &mem, 1, &o), MW_ENOMEM, "data 52.8 MiB",
               "; use a smaller data set (its arrays take the most), or set MW_MEMORY_CHECK=off");
    mw_err_clear();
    mw_model_free(&planned);
    mw_model_free(&full);
}

static void env_switch(void **state)
{
    (void)state;
    unsetenv("MW_MEMORY_CHECK");
    assert_int_equal(mw_memory_check_enabled(), 1);
    const char *off[] = {"off", "OFF", "0", "no", "false"}, *on[] = {"on", "1", "", "yes"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        setenv("MW_MEMORY_CHECK", off[i], 1);
        assert_int_equal(mw_memory_check_enabled(), 0);
    }
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
        setenv("MW_MEMORY_CHECK", on[i], 1);
        assert_int_equal(mw_memory_check_enabled(), 1);
    }
    unsetenv("MW_MEMORY_CHECK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ws_nbytes_matches_alloc),
        cmocka_unit_test(estimate_parts),
        cmocka_unit_test(check),
        cmocka_unit_test(planned_and_advice),
        cmocka_unit_test(env_switch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
