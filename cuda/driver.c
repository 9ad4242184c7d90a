/* SPDX-License-Identifier: MIT */
/*
 * driver.c - the CUDA driver API, loaded at run time, and the devices.
 *
 * libcuda.so.1 ships with the GPU driver, not the toolkit, so it is present
 * exactly where a GPU is; it is opened with dlopen ($ENVLOG_CUDA_DRIVER
 * overrides) and initialized once.  A device's fingerprint (name, compute
 * capability, driver version, SM count, memory) is the device component of
 * tune namespaces: a winner measured on one device is never looked up on
 * another.
 */
#include "cuda_int.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t drv_mu = PTHREAD_MUTEX_INITIALIZER;
static bool drv_tried;
static envlog_err drv_err;
static char drv_msg[512];
static envlog_cuda_drv drv_api;

#define SYM(field, sym)                                                        \
    do {                                                                       \
        void *p_ = dlsym(h, sym);                                              \
        if (!p_) {                                                             \
            snprintf(drv_msg, sizeof drv_msg,                                  \
                     "CUDA driver unavailable: %s has no %s (driver too old?)", \
                     path, sym);                                               \
            return false;                                                      \
        }                                                                      \
        memcpy(&d->field, &p_, sizeof p_);                                     \
    } while (0)

static bool resolve(void *h, const char *path, envlog_cuda_drv *d)
{
    SYM(Init, "cuInit");
    SYM(DriverGetVersion, "cuDriverGetVersion");
    SYM(DeviceGetCount, "cuDeviceGetCount");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetName, "cuDeviceGetName");
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(DeviceTotalMem, "cuDeviceTotalMem_v2");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(ModuleLoadData, "cuModuleLoadData");
    SYM(ModuleUnload, "cuModuleUnload");
    SYM(ModuleGetFunction, "cuModuleGetFunction");
    SYM(LaunchKernel, "cuLaunchKernel");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(StreamCreate, "cuStreamCreate");
    SYM(StreamDestroy, "cuStreamDestroy_v2");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(EventCreate, "cuEventCreate");
    SYM(EventDestroy, "cuEventDestroy_v2");
    SYM(EventRecord, "cuEventRecord");
    SYM(EventSynchronize, "cuEventSynchronize");
    SYM(GetErrorName, "cuGetErrorName");
    SYM(GetErrorString, "cuGetErrorString");
    /* CUDA 12.8 added _v2 (same signature); older drivers have only v1. */
    void *p = dlsym(h, "cuEventElapsedTime_v2");
    if (!p)
        p = dlsym(h, "cuEventElapsedTime");
    if (!p) {
        snprintf(drv_msg, sizeof drv_msg, "CUDA driver unavailable: %s has no "
                 "cuEventElapsedTime", path);
        return false;
    }
    memcpy(&d->EventElapsedTime, &p, sizeof p);
    return true;
}

static envlog_err load(void)
{
    const char *over = getenv("ENVLOG_CUDA_DRIVER");
    const char *path = over && *over ? over : "libcuda.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(drv_msg, sizeof drv_msg,
                 "CUDA driver unavailable: %s (no NVIDIA driver on this machine%s)",
                 e ? e : path, over && *over ? ", ENVLOG_CUDA_DRIVER" : "");
        return ENVLOG_UNAVAILABLE;
    }
    envlog_cuda_drv d = {0};
    if (!resolve(h, path, &d)) {
        dlclose(h);
        return ENVLOG_UNAVAILABLE;
    }
    int r = d.Init(0);
    if (r) {
        const char *name = "?", *text = "?";
        d.GetErrorName(r, &name);
        d.GetErrorString(r, &text);
        snprintf(drv_msg, sizeof drv_msg, "CUDA driver unavailable: cuInit: %s (%s)",
                 name ? name : "?", text ? text : "?");
        dlclose(h);
        return ENVLOG_UNAVAILABLE;
    }
    d.DriverGetVersion(&d.version);
    drv_api = d;
    return ENVLOG_OK;
}

envlog_err envlog_cuda__drv(const envlog_cuda_drv **drv)
{
    pthread_mutex_lock(&drv_mu);
    if (!drv_tried) {
        drv_tried = true;
        drv_err = load();
    }
    envlog_err e = drv_err;
    pthread_mutex_unlock(&drv_mu);
    if (e)
        return envlog__fail(e, "%s", drv_msg);
    *drv = &drv_api;
    return ENVLOG_OK;
}

void envlog_cuda__drv_forget(void)
{
    pthread_mutex_lock(&drv_mu);
    drv_tried = false;
    drv_err = ENVLOG_OK;
    pthread_mutex_unlock(&drv_mu);
}

envlog_err envlog_cuda__drv_fail(int res, const char *what)
{
    const char *name = NULL, *text = NULL;
    if (drv_api.GetErrorName) {
        drv_api.GetErrorName(res, &name);
        drv_api.GetErrorString(res, &text);
    }
    return envlog__fail(ENVLOG_UNAVAILABLE, "%s: %s (%s)", what,
                        name ? name : "CUDA error", text ? text : "no description");
}

envlog_err envlog_cuda_driver_version(int *version)
{
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    if (version)
        *version = d->version;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_device_count(int *n)
{
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    int r = d->DeviceGetCount(n);
    return r ? envlog_cuda__drv_fail(r, "cuDeviceGetCount") : ENVLOG_OK;
}

void envlog_cuda__sanitize(const char *in, char *out, size_t size)
{
    size_t i = 0;
    for (; in[i] && i + 1 < size; i++) {
        unsigned char ch = (unsigned char)in[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        out[i] = ok ? (char)ch : '-';
    }
    if (size)
        out[i] = 0;
}

envlog_err envlog_cuda_device_get(int ordinal, envlog_cuda_device *out)
{
    const envlog_cuda_drv *d;
    envlog_err e = envlog_cuda__drv(&d);
    if (e)
        return e;
    int n = 0, r = d->DeviceGetCount(&n);
    if (r)
        return envlog_cuda__drv_fail(r, "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= n)
        return envlog__fail(ENVLOG_INVALID_ARG, "no CUDA device %d (%d present)",
                            ordinal, n);
    memset(out, 0, sizeof *out);
    int dev;
    size_t mem = 0;
    if ((r = d->DeviceGet(&dev, ordinal)) ||
        (r = d->DeviceGetName(out->name, (int)sizeof out->name - 1, dev)) ||
        (r = d->DeviceGetAttribute(&out->cc_major, ENVLOG_CU_ATTR_CC_MAJOR, dev)) ||
        (r = d->DeviceGetAttribute(&out->cc_minor, ENVLOG_CU_ATTR_CC_MINOR, dev)) ||
        (r = d->DeviceGetAttribute(&out->sm_count, ENVLOG_CU_ATTR_SM_COUNT, dev)) ||
        (r = d->DeviceTotalMem(&mem, dev)))
        return envlog_cuda__drv_fail(r, "describing a CUDA device");
    out->ordinal = ordinal;
    out->driver_version = d->version;
    out->memory_bytes = mem;
    snprintf(out->arch, sizeof out->arch, "sm_%d%d", out->cc_major, out->cc_minor);
    char name[sizeof out->name];
    envlog_cuda__sanitize(out->name, name, sizeof name);
    snprintf(out->fingerprint, sizeof out->fingerprint, "%s-%s-drv%d-%dsm-%lluMiB",
             name, out->arch, out->driver_version, out->sm_count,
             (unsigned long long)(mem >> 20));
    return ENVLOG_OK;
}
