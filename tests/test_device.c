/* --device auto|cpu|gpu (worker/replicas/device.h): the division of a node's GPUs among its ranks,
 * the decision and its messages for every probe answer (so the GPU branches run without a GPU), and
 * the decision on this machine. Suite 'unit': runs in every build. */
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/replicas/device.h"

/* The division of a node's GPUs among its ranks: pure arithmetic. */
static void test_select_divide(void **state)
{
    (void)state;
    static const struct {
        int lr, ls, count, first, n, sharing;
    } cs[] = {
        {0, 1, 1, 0, 1, 1}, {0, 1, 4, 0, 4, 1}, /* one rank drives every GPU */
        {0, 4, 4, 0, 1, 1}, {3, 4, 4, 3, 1, 1}, /* one rank per GPU */
        {0, 2, 4, 0, 2, 1}, {1, 2, 4, 2, 2, 1}, /* two GPUs per rank */
        {0, 2, 3, 0, 1, 1}, {1, 2, 3, 1, 1, 1}, /* device 2 idle */
        {1, 3, 8, 2, 2, 1}, {2, 3, 8, 4, 2, 1}, /* devices 6, 7 idle */
        {0, 4, 2, 0, 1, 2}, {1, 4, 2, 1, 1, 2}, /* shared round-robin */
        {2, 4, 2, 0, 1, 2}, {3, 4, 2, 1, 1, 2}, {0, 5, 2, 0, 1, 3}, {1, 5, 2, 1, 1, 2},
        {4, 5, 2, 0, 1, 3}, {0, 3, 1, 0, 1, 3}, {2, 3, 1, 0, 1, 3},
    };
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        int first = -1, n = -1;
        int sharing = mw_device_divide(cs[c].lr, cs[c].ls, cs[c].count, &first, &n);
        if (first != cs[c].first || n != cs[c].n || sharing != cs[c].sharing)
            fail_msg("mw_device_divide(local rank %d of %d, %d devices): devices %d+%d shared by "
                     "%d; want %d+%d shared by %d",
                     cs[c].lr, cs[c].ls, cs[c].count, first, n, sharing, cs[c].first, cs[c].n,
                     cs[c].sharing);
    }
    /* Every device of a node is driven by exactly one rank when local_size <= count. */
    for (int count = 1; count <= 8; count++)
        for (int ls = 1; ls <= count; ls++) {
            int seen[8] = {0};
            for (int lr = 0; lr < ls; lr++) {
                int first, n;
                assert_int_equal(mw_device_divide(lr, ls, count, &first, &n), 1);
                assert_int_equal(n, count / ls);
                for (int d = first; d < first + n; d++)
                    seen[d]++;
            }
            for (int d = 0; d < count; d++)
                assert_int_equal(seen[d], d < count / ls * ls ? 1 : 0);
        }
}

typedef struct {
    mw_status rc;
    int use_gpu, first, n, warn;
    char why[768];
} pick;

static pick select_warn(const char *mode, int count, int warn, const char *reason, int lr, int ls)
{
    pick p;
    memset(&p, 0x5a, sizeof p);
    mw_err_clear();
    mw_device_probe probe = {.count = count, .warn = warn};
    snprintf(probe.reason, sizeof probe.reason, "%s", reason ? reason : "");
    mw_device_choice c;
    memset(&c, 0x5a, sizeof c);
    p.rc = mw_device_select_with(mode, &probe, lr, ls, &c);
    p.use_gpu = c.use_gpu, p.first = c.first, p.n = c.n, p.warn = c.warn;
    snprintf(p.why, sizeof p.why, "%s", c.why);
    assert_null(c.module); /* only mw_device_select loads a module */
    if (p.rc == MW_OK)
        assert_int_equal(mw_err_status(), MW_OK);
    else
        assert_int_equal(mw_err_status(), p.rc);
    return p;
}

static pick select_with(const char *mode, int count, const char *reason, int lr, int ls)
{
    return select_warn(mode, count, 0, reason, lr, ls);
}

static void expect_cpu(const pick *p)
{
    assert_int_equal(p->use_gpu, 0);
    assert_int_equal(p->first, 0);
    assert_int_equal(p->n, 0);
}

static void expect_gpu(const pick *p, int first, int n)
{
    assert_int_equal(p->rc, MW_OK);
    assert_int_equal(p->use_gpu, 1);
    assert_int_equal(p->first, first);
    assert_int_equal(p->n, n);
}

/* The decision and its messages for every mode, with a fake probe answer, so the GPU branches
 * run without a GPU. */
static void test_select_modes(void **state)
{
    (void)state;
    static const char nodev[] = "cudaGetDeviceCount: no CUDA-capable device is detected";
    pick p;

    /* cpu: always the CPU, whatever the devices */
    for (int count = -1; count <= 4; count++) {
        p = select_with("cpu", count, count <= 0 ? nodev : NULL, 0, 1);
        assert_int_equal(p.rc, MW_OK);
        expect_cpu(&p);
        assert_string_equal(p.why, "--device cpu: training on the CPU");
    }

    /* auto without a device: the CPU, and why */
    p = select_with("auto", 0, nodev, 0, 1);
    assert_int_equal(p.rc, MW_OK);
    expect_cpu(&p);
    assert_string_equal(p.why, "no CUDA device (cudaGetDeviceCount: no CUDA-capable device is "
                               "detected): training on the CPU");
    print_message("auto, no device: %s\n", p.why);
    p = select_with(NULL, 0, nodev, 1, 2); /* NULL is auto */
    assert_int_equal(p.rc, MW_OK);
    expect_cpu(&p);
    expect_contains(p.why, "training on the CPU");
    p = select_with("auto", -1, "built without CUDA (-Dcuda=disabled)", 0, 1);
    assert_int_equal(p.rc, MW_OK);
    expect_cpu(&p);
    assert_string_equal(p.why, "built without CUDA (-Dcuda=disabled): training on the CPU");
    p = select_with("auto", 0, NULL, 0, 1);
    assert_string_equal(p.why, "no CUDA device (cudaGetDeviceCount found 0 devices): training "
                               "on the CPU");

    /* gpu without a device: one clear error */
    p = select_with("gpu", 0, nodev, 0, 1);
    assert_int_equal(p.rc, MW_EDEVICE);
    expect_cpu(&p);
    assert_string_equal(p.why, "");
    assert_string_equal(mw_err_msg(), "--device gpu: no CUDA device is available "
                                      "(cudaGetDeviceCount: no CUDA-capable device is detected)");
    print_message("gpu, no device: %s\n", mw_err_msg());
    p = select_with("gpu", -1, "built without CUDA", 0, 1);
    assert_int_equal(p.rc, MW_EDEVICE);
    assert_string_equal(mw_err_msg(), "--device gpu: no CUDA device is available (built "
                                      "without CUDA)");

    /* a bad mode, whatever the devices */
    p = select_with("tpu", 4, NULL, 0, 1);
    assert_int_equal(p.rc, MW_EINVAL);
    expect_cpu(&p);
    assert_string_equal(mw_err_msg(), "--device 'tpu': expected one of auto, cpu, gpu");
    p = select_with("", 0, nodev, 0, 1);
    assert_int_equal(p.rc, MW_EINVAL);
    assert_string_equal(mw_err_msg(), "--device '': expected one of auto, cpu, gpu");
    p = select_with("auto", 4, NULL, 2, 2); /* local rank out of range */
    assert_int_equal(p.rc, MW_EINVAL);

    /* with devices, auto and gpu agree */
    const char *modes[] = {"auto", "gpu"};
    for (int m = 0; m < 2; m++) {
        p = select_with(modes[m], 4, NULL, 0, 1); /* one rank drives all */
        expect_gpu(&p, 0, 4);
        assert_string_equal(p.why, "local rank 0 of 1 drives CUDA devices 0-3 (of 4 on the "
                                   "node)");
        p = select_with(modes[m], 4, NULL, 2, 4); /* one rank per GPU */
        expect_gpu(&p, 2, 1);
        assert_string_equal(p.why, "local rank 2 of 4 drives CUDA device 2 (of 4 on the node)");
        p = select_with(modes[m], 8, NULL, 1, 4);
        expect_gpu(&p, 2, 2);
        p = select_with(modes[m], 3, NULL, 1, 2); /* one idle: a warning */
        expect_gpu(&p, 1, 1);
        assert_int_equal(p.warn, 1);
        assert_string_equal(p.why, "local rank 1 of 2 drives CUDA device 1; the node's 3 CUDA "
                                   "devices do not divide among 2 ranks, so 1 stays idle");
        p = select_with(modes[m], 2, NULL, 3, 4); /* fewer seen than ranks: both readings */
        expect_gpu(&p, 1, 1);
        assert_string_equal(p.why, "local rank 3 of 4 sees 2 CUDA devices for 4 ranks and "
                                   "drives CUDA device 1: right when each rank was given its own "
                                   "GPU (per-rank CUDA_VISIBLE_DEVICES, as srun --gpus-per-task "
                                   "does); ranks sharing one GPU are refused when NCCL starts, so "
                                   "then start at most 2 ranks per node");
        print_message("%s, 2 devices, 4 ranks: %s\n", modes[m], p.why);
        p = select_with(modes[m], 1, NULL, 1, 3);
        expect_gpu(&p, 0, 1);
        expect_contains(p.why, "start at most 1 rank per node");
    }

    /* no probe taken: the CPU, whatever the mode */
    mw_device_choice c;
    assert_int_equal(mw_device_select_with("gpu", NULL, 0, 1, &c), MW_OK);
    assert_int_equal(c.use_gpu, 0);
    assert_string_equal(c.why, "--device cpu: training on the CPU");
    mw_err_clear();
}

/* A probe that failed for another reason than "no device" (a driver too old, a module that
 * cannot be loaded): auto still trains on the CPU but says so as a warning; gpu is an error
 * naming the reason. */
static void test_select_warnings(void **state)
{
    (void)state;
    static const char broken[] = "the CUDA module cannot be loaded: libcudart.so.13: cannot "
                                 "open shared object file: No such file or directory";
    pick p = select_warn("auto", 0, 1, broken, 0, 1);
    assert_int_equal(p.rc, MW_OK);
    expect_cpu(&p);
    assert_int_equal(p.warn, 1);
    assert_string_equal(p.why, "cannot use the GPU (the CUDA module cannot be loaded: "
                               "libcudart.so.13: cannot open shared object file: No such file "
                               "or directory): training on the CPU");
    p = select_warn("gpu", 0, 1, broken, 0, 1);
    assert_int_equal(p.rc, MW_EDEVICE);
    expect_cpu(&p);
    assert_string_equal(mw_err_msg(), "--device gpu: the CUDA devices cannot be used (the CUDA "
                                      "module cannot be loaded: libcudart.so.13: cannot open "
                                      "shared object file: No such file or directory)");
    /* "no device" is information, not a warning */
    p = select_warn("auto", 0, 0, "cuInit: no CUDA-capable device is detected (CUDA error 100)", 0,
                    1);
    assert_int_equal(p.warn, 0);
    assert_string_equal(p.why, "no CUDA device (cuInit: no CUDA-capable device is detected "
                               "(CUDA error 100)): training on the CPU");
    p = select_with("cpu", 0, NULL, 0, 1);
    assert_int_equal(p.warn, 0);
    mw_err_clear();
}

/* mw_device_select on this machine: cpu never probes; auto and gpu agree with the probe. */
static void test_select_here(void **state)
{
    (void)state;
    mw_device_probe probe;
    mw_device_probe_run(&probe);
    print_message("probe: %d device(s)%s%s%s\n", probe.count, probe.warn ? " (warning)" : "",
                  probe.count > 0 ? "" : ": ", probe.count > 0 ? "" : probe.reason);
    mw_device_choice c;
    mw_err_clear();
    assert_int_equal(mw_device_select("cpu", 0, 1, &c), MW_OK);
    assert_int_equal(c.use_gpu, 0);
    assert_string_equal(c.why, "--device cpu: training on the CPU");

    assert_int_equal(mw_device_select("auto", 0, 1, &c), MW_OK);
    print_message("--device auto: %s%s\n", c.warn ? "warning: " : "", c.why);
    mw_status rc = mw_device_select("gpu", 0, 1, &c);
    if (probe.count <= 0) {
        assert_int_equal(rc, MW_EDEVICE);
        assert_int_equal(c.use_gpu, 0);
        assert_true(probe.reason[0] != '\0');
        expect_contains(mw_err_msg(), probe.reason);
        print_message("--device gpu: %s\n", mw_err_msg());
        mw_err_clear();
        assert_int_equal(mw_device_select("auto", 0, 1, &c), MW_OK);
        assert_int_equal(c.use_gpu, 0);
        assert_null(c.module);
        expect_contains(c.why, "training on the CPU");
        return;
    }
    assert_int_equal(rc, MW_OK);
    assert_int_equal(c.use_gpu, 1);
    assert_int_equal(c.first, 0);
    assert_int_equal(c.n, probe.count);
    assert_non_null(c.module);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select_divide),
        cmocka_unit_test(test_select_modes),
        cmocka_unit_test(test_select_warnings),
        cmocka_unit_test(test_select_here),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
