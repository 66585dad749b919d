/* Suite 'cuda' (runs without a GPU): the CUDA host stand-in's kernel table (tests/hostdev.c),
 * whose wrappers are made from kernels/kernel_list.h. Each entry of the table is the stand-in's
 * wrapper, and a wrapped kernel on fake device memory computes what the CPU table does. A
 * misuse aborts naming the kernel and the argument, each checked in a child process (exit by
 * SIGABRT and the message on its stderr): a host array, a device array one element short, an
 * optional array checked when given, a condition of the arguments (Concatenate's channels),
 * and the last update rule of the list (adamax_step). The reduce stream's order (the
 * overlapped all-reduce's buckets): a collective over memory a kernel used after the last
 * mw_cuda_reduce_after_compute, and a kernel on memory a collective writes before
 * mw_cuda_compute_after_reduce, abort; in order, neither does. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/table.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/table.h"
#include "kernels/kernels.h"
#include "tests/nccl_mock.h"
#include "tests/util.h"

/* Device memory of n floats, filled with 0.25 i - 1. */
static float *dev_floats(size_t n)
{
    float *p = NULL;
    assert_int_equal(mw_cuda_alloc((void **)&p, n * sizeof *p), MW_OK);
    for (size_t i = 0; i < n; i++)
        p[i] = 0.25f * (float)i - 1.0f;
    return p;
}

typedef void (*misuse_fn)(const mw_kernels *t, const mw_kctx *k);

/* Run f in a child: it must die by SIGABRT with want on its stderr. */
static void expect_abort(misuse_fn f, const mw_kernels *t, const mw_kctx *k, const char *want)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        f(t, k);
        _exit(0); /* not reached when the wrapper catches the misuse */
    }
    close(fd[1]);
    char buf[1024];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
        fail_msg("expected an abort with \"%s\"; status 0x%x, stderr: %s", want, st, buf);
    expect_contains(buf, want);
}

static float host_x[6 * 4];

static void dense_host_x(const mw_kernels *t, const mw_kctx *k)
{
    t->dense_fwd(k, dev_floats(6 * 3), host_x, dev_floats(4 * 3), NULL, 6, 4, 3);
}

static void dense_short_y(const mw_kernels *t, const mw_kctx *k)
{
    t->dense_fwd(k, dev_floats(6 * 3 - 1), dev_floats(6 * 4), dev_floats(4 * 3), NULL, 6, 4, 3);
}

static void dense_host_bias(const mw_kernels *t, const mw_kctx *k)
{
    t->dense_fwd(k, dev_floats(6 * 3), dev_floats(6 * 4), dev_floats(4 * 3), host_x, 6, 4, 3);
}

static void concat_past_cy(const mw_kernels *t, const mw_kctx *k)
{
    t->concat_fwd(k, dev_floats(5 * 8), dev_floats(5 * 3), 5, 3, 8, 6);
}

static void adamax_host_g(const mw_kernels *t, const mw_kctx *k)
{
    const mw_optim_hyper h = {.lr = 0.01f, .gscale = 1.0f, .beta2 = 0.999f, .bias1 = 0.1f};
    t->adamax_step(k, dev_floats(6), dev_floats(6), dev_floats(6), NULL, host_x, 6, &h);
}

/* A collective on k's reduce stream over n floats at p, as the mock reports one. */
static void post_reduce(const mw_kctx *k, float *p, size_t n)
{
    mock_on_post(mw_cuda_reduce_stream(k), p, n * sizeof *p, p, n * sizeof *p);
}

static float *reduced; /* 18 floats the collectives below sum */

/* The bucket's last kernel is after the reduce stream's wait: the collective reads it early. */
static void reduce_before_mark(const mw_kernels *t, const mw_kctx *k)
{
    assert_int_equal(mw_cuda_reduce_after_compute(k), MW_OK);
    t->dense_fwd(k, reduced, dev_floats(6 * 4), dev_floats(4 * 3), NULL, 6, 4, 3);
    post_reduce(k, reduced, 18);
}

/* The update reads the sums without the compute stream's wait for the reduce stream. */
static void update_before_wait(const mw_kernels *t, const mw_kctx *k)
{
    assert_int_equal(mw_cuda_reduce_after_compute(k), MW_OK);
    post_reduce(k, reduced, 18);
    const mw_optim_hyper h = {.lr = 0.5f, .gscale = 1.0f};
    t->sgd_step(k, dev_floats(18), NULL, NULL, NULL, reduced, 18, &h);
}

static void test_hostdev_reduce_order(void **state)
{
    (void)state;
    mw_kernels t;
    mw_kernels_init_cpu(&t);
    mw_kernels_init_cuda(&t);
    mw_kctx k;
    assert_int_equal(mw_cuda_ctx_open(&k, 0), MW_OK);
    assert_non_null(mw_cuda_reduce_stream(&k));
    assert_ptr_not_equal(mw_cuda_reduce_stream(&k), mw_cuda_stream(&k));
    reduced = dev_floats(18);
    /* in order: the kernel, the wait, the collective, the wait back, the update */
    t.dense_fwd(&k, reduced, dev_floats(6 * 4), dev_floats(4 * 3), NULL, 6, 4, 3);
    assert_int_equal(mw_cuda_reduce_after_compute(&k), MW_OK);
    post_reduce(&k, reduced, 18);
    t.dense_fwd(&k, dev_floats(18), dev_floats(6 * 4), dev_floats(4 * 3), NULL, 6, 4, 3);
    assert_int_equal(mw_cuda_compute_after_reduce(&k), MW_OK);
    const mw_optim_hyper h = {.lr = 0.5f, .gscale = 1.0f};
    t.sgd_step(&k, dev_floats(18), NULL, NULL, NULL, reduced, 18, &h);
    expect_abort(reduce_before_mark, &t, &k,
                 "misuse in a collective on the reduce stream: the collective's input (72 bytes "
                 "at ");
    expect_abort(update_before_wait, &t, &k, "misuse in hd_sgd_step: g (72 bytes at ");
    expect_abort(update_before_wait, &t, &k, "mw_cuda_compute_after_reduce not called");
    mw_cuda_ctx_close(&k);
}

static void test_hostdev_table(void **state)
{
    (void)state;
    mw_kernels cpu, t;
    mw_kernels_init_cpu(&cpu);
    t = cpu;
    mw_kernels_init_cuda(&t);
    assert_string_equal(t.name, "cuda");
    /* every entry is the stand-in's own wrapper, none the CPU kernel itself */
#define MW_KERNEL(op, fast, params, args, arrays)                                                  \
    if (!t.op || !memcmp(&t.op, &cpu.op, sizeof t.op))                                             \
        fail_msg("%s: not wrapped by the host stand-in", #op);
#include "kernels/kernel_list.h"
#undef MW_KERNEL
    mw_kctx k;
    assert_int_equal(mw_cuda_ctx_open(&k, 0), MW_OK);
    /* a wrapped kernel on device memory computes what the CPU table does */
    float *x = dev_floats(6 * 4), *w = dev_floats(4 * 3), *b = dev_floats(3), *y = dev_floats(18);
    t.dense_fwd(&k, y, x, w, b, 6, 4, 3);
    float want[18];
    const mw_kctx h = {.nthreads = 1};
    cpu.dense_fwd(&h, want, x, w, b, 6, 4, 3);
    assert_memory_equal(y, want, sizeof want);
    expect_abort(dense_host_x, &t, &k, "hostdev: misuse in hd_dense_fwd: x (96 bytes at 0x");
    expect_abort(dense_short_y, &t, &k, "misuse in hd_dense_fwd: y (72 bytes at ");
    expect_abort(dense_host_bias, &t, &k, "misuse in hd_dense_fwd: b (12 bytes at ");
    expect_abort(concat_past_cy, &t, &k,
                 "misuse in hd_concat_fwd: channels [off, off + CX) outside [0, CY)");
    expect_abort(adamax_host_g, &t, &k, "misuse in hd_adamax_step: g (24 bytes at ");
    mw_cuda_ctx_close(&k);
}

int main(void)
{
    setenv("MW_HOSTDEV_GPUS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostdev_table),
        cmocka_unit_test(test_hostdev_reduce_order),
    };
    return cmocka_run_group_tests_name("hostdev", tests, NULL, NULL);
}
