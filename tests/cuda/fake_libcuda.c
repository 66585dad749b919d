/* A stand-in for the CUDA driver library (libcuda.so.1) with the three entry points that
 * mwtrain's driver probe (worker/replicas/device.c) uses, so tests/cuda/test_module_load.sh can
 * show what mwtrain does where a driver reports devices but the rest of CUDA is broken or missing.
 * Its answers come from the environment:
 *   MW_FAKE_CUINIT=N     cuInit returns N (default 0, success; 100 is CUDA_ERROR_NO_DEVICE)
 *   MW_FAKE_DEVICES=N    cuDeviceGetCount reports N devices (default 1)
 * The CUDA runtime, if it ever loads this library, finds none of its other entry points and
 * reports an error of its own. */
#include <stdlib.h>

int cuInit(unsigned flags);
int cuDeviceGetCount(int *count);
int cuGetErrorString(int code, const char **str);

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int cuInit(unsigned flags)
{
    (void)flags;
    return env_int("MW_FAKE_CUINIT", 0);
}

int cuDeviceGetCount(int *count)
{
    *count = env_int("MW_FAKE_DEVICES", 1);
    return 0;
}

int cuGetErrorString(int code, const char **str)
{
    *str = code == 100 ? "no CUDA-capable device is detected" : "fake driver error";
    return 0;
}
