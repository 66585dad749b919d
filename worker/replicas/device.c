/* Device policy and the CUDA module; see device.h. The driver probe declares the three
 * driver entry points it needs itself, so mwtrain builds without CUDA headers and links no
 * CUDA library. */
#include "worker/replicas/device.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CU_NO_DEVICE 100 /* CUDA_ERROR_NO_DEVICE */

int mw_device_divide(int local_rank, int local_size, int count, int *first, int *n)
{
    if (local_size <= count) {
        int per = count / local_size;
        *first = local_rank * per;
        *n = per;
        return 1;
    }
    *first = local_rank % count;
    *n = 1;
    /* ranks r with r % count == *first among 0..local_size-1 */
    return (local_size - 1 - *first) / count + 1;
}

/* "CUDA device 3" or "CUDA devices 0-3". */
static void device_range(char *buf, size_t len, int first, int n)
{
    if (n == 1)
        snprintf(buf, len, "CUDA device %d", first);
    else
        snprintf(buf, len, "CUDA devices %d-%d", first, first + n - 1);
}

/* The line for a rank that drives devices [first, first + n) of count. */
static void gpu_line(mw_device_choice *c, int local_rank, int local_size, int count)
{
    char mine[48];
    device_range(mine, sizeof mine, c->first, c->n);
    if (local_size > count) {
        /* Either each rank was given its own GPU (per-rank CUDA_VISIBLE_DEVICES, as srun
         * --gpus-per-task does: every rank sees one device 0) or ranks really share GPUs.
         * Only the PCI bus ids tell, and cluster/nccl.c compares them across the node and
         * refuses a shared GPU; this line says both. */
        snprintf(c->why, sizeof c->why,
                 "local rank %d of %d sees %d CUDA device%s for %d ranks and drives %s: right "
                 "when each rank was given its own GPU (per-rank CUDA_VISIBLE_DEVICES, as srun "
                 "--gpus-per-task does); ranks sharing one GPU are refused when NCCL starts, so "
                 "then start at most %d rank%s per node",
                 local_rank, local_size, count, count == 1 ? "" : "s", local_size, mine, count,
                 count == 1 ? "" : "s");
    } else if (count % local_size) {
        int idle = count % local_size;
        c->warn = 1;
        snprintf(c->why, sizeof c->why,
                 "local rank %d of %d drives %s; the node's %d CUDA devices do not divide among "
                 "%d ranks, so %d stay%s idle",
                 local_rank, local_size, mine, count, local_size, idle, idle == 1 ? "s" : "");
    } else {
        snprintf(c->why, sizeof c->why, "local rank %d of %d drives %s (of %d on the node)",
                 local_rank, local_size, mine, count);
    }
}

mw_status mw_device_select_with(const char *mode, const mw_device_probe *p, int local_rank,
                                int local_size, mw_device_choice *out)
{
    memset(out, 0, sizeof *out);
    if (!mode)
        mode = "auto";
    const int want_gpu = !strcmp(mode, "gpu");
    if (strcmp(mode, "auto") && strcmp(mode, "cpu") && !want_gpu)
        return mw_err(MW_EINVAL, "--device '%s': expected one of auto, cpu, gpu", mode);
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return mw_err(MW_EINVAL, "device selection: local rank %d of %d ranks on the node",
                      local_rank, local_size);
    if (!strcmp(mode, "cpu") || !p) {
        snprintf(out->why, sizeof out->why, "--device cpu: training on the CPU");
        return MW_OK;
    }
    const char *reason = p->reason[0]   ? p->reason
                         : p->count < 0 ? "built without CUDA"
                                        : "cudaGetDeviceCount found 0 devices";
    if (p->count <= 0 && p->warn) {
        if (want_gpu)
            return mw_err(MW_EDEVICE, "--device gpu: the CUDA devices cannot be used (%s)", reason);
        out->warn = 1;
        snprintf(out->why, sizeof out->why, "cannot use the GPU (%s): training on the CPU", reason);
        return MW_OK;
    }
    if (p->count <= 0) {
        if (want_gpu)
            return mw_err(MW_EDEVICE, "--device gpu: no CUDA device is available (%s)", reason);
        if (p->count < 0)
            snprintf(out->why, sizeof out->why, "%s: training on the CPU", reason);
        else
            snprintf(out->why, sizeof out->why, "no CUDA device (%s): training on the CPU", reason);
        return MW_OK;
    }
    out->use_gpu = 1;
    mw_device_divide(local_rank, local_size, p->count, &out->first, &out->n);
    gpu_line(out, local_rank, local_size, p->count);
    return MW_OK;
}

/* ---- the driver probe and the module ------------------------------------------------------ */

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_count_fn)(int *count);
typedef int (*cu_errstr_fn)(int code, const char **str);

static void driver_probe(mw_device_probe *p)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(p->reason, sizeof p->reason, "no CUDA driver: %s", e ? e : "libcuda.so.1");
        return;
    }
    cu_init_fn init = (cu_init_fn)dlsym(lib, "cuInit");
    cu_count_fn count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
    cu_errstr_fn errstr = (cu_errstr_fn)dlsym(lib, "cuGetErrorString");
    if (!init || !count) {
        p->warn = 1;
        snprintf(p->reason, sizeof p->reason,
                 "the CUDA driver libcuda.so.1 lacks cuInit or "
                 "cuDeviceGetCount (a broken driver install?)");
        return; /* the library stays loaded: the driver may hold threads */
    }
    int rc = init(0), n = 0;
    if (rc == 0)
        rc = count(&n);
    if (rc != 0) {
        const char *s = NULL;
        if (!errstr || errstr(rc, &s) != 0 || !s)
            s = "unknown error";
        p->warn = rc != CU_NO_DEVICE;
        snprintf(p->reason, sizeof p->reason, "%s: %s (CUDA error %d)",
                 p->warn ? "the CUDA driver failed to start, cuInit" : "cuInit", s, rc);
        return;
    }
    p->count = n;
    if (n <= 0)
        snprintf(p->reason, sizeof p->reason, "cuDeviceGetCount found 0 devices");
}

/* The module's path: $MW_CUDA_MODULE, or MW_GPU_MODULE_FILE in the binary's directory. */
static int module_path(char *buf, size_t len)
{
    const char *env = getenv("MW_CUDA_MODULE");
    if (env && *env)
        return snprintf(buf, len, "%s", env) < (int)len;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return snprintf(buf, len, "%s/%s", exe, MW_GPU_MODULE_FILE) < (int)len;
}

const mw_gpu_module *mw_device_module(char *why, size_t len)
{
    static int tried;
    static const mw_gpu_module *mod;
    static char msg[512];
    if (!tried) {
        tried = 1;
        char path[PATH_MAX + 32];
        void *h = NULL;
        if (!module_path(path, sizeof path)) {
            snprintf(msg, sizeof msg, "the CUDA module %s: cannot find the binary's directory",
                     MW_GPU_MODULE_FILE);
        } else if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            snprintf(msg, sizeof msg, "the CUDA module cannot be loaded: %.400s", e ? e : path);
        } else {
            const mw_gpu_module *(*get)(void) =
                (const mw_gpu_module *(*)(void))dlsym(h, MW_GPU_MODULE_ENTRY);
            const mw_gpu_module *m = get ? get() : NULL;
            if (!m)
                snprintf(msg, sizeof msg, "%.300s: no %s(): not an mwtrain CUDA module", path,
                         MW_GPU_MODULE_ENTRY);
            else if (m->abi != MW_GPU_MODULE_ABI)
                snprintf(msg, sizeof msg,
                         "%.300s: interface version %d, this mwtrain needs %d (a "
                         "module from another build)",
                         path, m->abi, MW_GPU_MODULE_ABI);
            else
                mod = m, snprintf(msg, sizeof msg, "%.400s", path);
        }
    }
    if (why && len)
        snprintf(why, len, "%s", mod ? "" : msg);
    return mod;
}

void mw_device_probe_run(mw_device_probe *p)
{
    memset(p, 0, sizeof *p);
    const char *env = getenv("MW_CUDA_MODULE");
    const int forced = env && *env;
    if (!forced) {
#ifndef MW_CUDA_BUILT
        p->count = -1;
        snprintf(p->reason, sizeof p->reason, "built without CUDA (-Dcuda=disabled)");
        return;
#endif
        driver_probe(p);
        if (p->count <= 0)
            return;
    }
    char why[sizeof p->reason];
    const mw_gpu_module *m = mw_device_module(why, sizeof why);
    if (!m) { /* the driver sees devices (or a module was named) that cannot be used */
        p->count = 0;
        p->warn = 1;
        snprintf(p->reason, sizeof p->reason, "%s", why);
        return;
    }
    const int drv = p->count;
    p->count = m->probe(p->reason, sizeof p->reason);
    if (p->count <= 0) {
        /* the runtime disagrees with the driver: a driver too old for the runtime, ... */
        p->count = 0;
        p->warn = !forced;
        if (!forced) {
            char r[sizeof p->reason];
            snprintf(r, sizeof r, "%s", p->reason);
            snprintf(p->reason, sizeof p->reason,
                     "the driver sees %d device%s, the CUDA "
                     "runtime none: %.300s",
                     drv, drv == 1 ? "" : "s", r);
        }
    }
}

mw_status mw_device_select(const char *mode, int local_rank, int local_size, mw_device_choice *out)
{
    /* "cpu" (and a bad mode) never touches CUDA: no driver start-up, nothing to fail */
    if (mode && strcmp(mode, "auto") && strcmp(mode, "gpu"))
        return mw_device_select_with(mode, NULL, local_rank, local_size, out);
    mw_device_probe p;
    mw_device_probe_run(&p);
    MW_TRY(mw_device_select_with(mode, &p, local_rank, local_size, out));
    if (out->use_gpu)
        out->module = mw_device_module(NULL, 0);
    return MW_OK;
}

void mw_device_version(char *buf, size_t len)
{
    const char *env = getenv("MW_CUDA_MODULE");
#ifndef MW_CUDA_BUILT
    if (!(env && *env)) {
        snprintf(buf, len, "CUDA: not built");
        return;
    }
#endif
    (void)env;
    char why[512];
    const mw_gpu_module *m = mw_device_module(why, sizeof why);
    if (!m) {
        snprintf(buf, len, "CUDA: %s (GPU training unavailable)", why);
        return;
    }
    char path[PATH_MAX + 32] = "";
    module_path(path, sizeof path);
    snprintf(buf, len, "CUDA: %s (module %s)", m->version(), path);
}
