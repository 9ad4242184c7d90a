/* SPDX-License-Identifier: MIT */
/*
 * nvrtc.c - NVRTC, loaded at run time, and one compile with it.
 *
 * One binary must serve machines with and without the CUDA Toolkit, so the
 * library is found with dlopen ($ENVLOG_NVRTC, else libnvrtc.so.13, .12,
 * libnvrtc.so) and its version is part of every kernel key.  NVRTC reports
 * only MAJOR.MINOR, and two patch releases of one minor can generate
 * different code, so at load the full version is read from the header of a
 * probe compile's PTX ("Cuda compilation tools, release 13.0, V13.0.88").
 */
#include "cuda_int.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t nv_mu = PTHREAD_MUTEX_INITIALIZER;
static bool nv_tried;
static envlog_err nv_err;
static char nv_msg[768];
static envlog_cuda_nvrtc_api nv_api;

#define SYM(field, sym)                                                        \
    do {                                                                       \
        void *p_ = dlsym(h, sym);                                              \
        if (!p_) {                                                             \
            snprintf(why, why_size, "%s: no symbol %s", path, sym);            \
            return false;                                                      \
        }                                                                      \
        memcpy(&api->field, &p_, sizeof p_);                                   \
    } while (0)

static bool resolve(void *h, const char *path, envlog_cuda_nvrtc_api *api, char *why,
                    size_t why_size)
{
    SYM(Version, "nvrtcVersion");
    SYM(CreateProgram, "nvrtcCreateProgram");
    SYM(DestroyProgram, "nvrtcDestroyProgram");
    SYM(CompileProgram, "nvrtcCompileProgram");
    SYM(GetPTXSize, "nvrtcGetPTXSize");
    SYM(GetPTX, "nvrtcGetPTX");
    SYM(GetCUBINSize, "nvrtcGetCUBINSize");
    SYM(GetCUBIN, "nvrtcGetCUBIN");
    SYM(GetProgramLogSize, "nvrtcGetProgramLogSize");
    SYM(GetProgramLog, "nvrtcGetProgramLog");
    SYM(GetErrorString, "nvrtcGetErrorString");
    return true;
}

/* Finds "V<digits>.<digits>.<digits>" in the PTX header of a probe compile. */
static void probe_version(envlog_cuda_nvrtc_api *api, int major, int minor)
{
    snprintf(api->version, sizeof api->version, "%d.%d", major, minor);
    void *prog = NULL;
    if (api->CreateProgram(&prog, "extern \"C\" __global__ void envlog_probe() {}",
                           "envlog_probe.cu", 0, NULL, NULL))
        return;
    /* A fixed buffer: the probe's PTX is a few hundred bytes, and a failed
     * allocation must never change the version (it is part of every key). */
    static char ptx[8192];
    size_t n = 0;
    if (!api->CompileProgram(prog, 0, NULL) && !api->GetPTXSize(prog, &n) && n &&
        n <= sizeof ptx && !api->GetPTX(prog, ptx)) {
        ptx[n - 1] = 0;
        char want[32];
        snprintf(want, sizeof want, ", V%d.%d.", major, minor);
        const char *p = strstr(ptx, want);
        if (p) {
            p += 3; /* past ", V" */
            size_t len = strspn(p, "0123456789.");
            if (len < sizeof api->version) {
                memcpy(api->version, p, len);
                api->version[len] = 0;
            }
        }
    }
    api->DestroyProgram(&prog);
}

static envlog_err try_load(const char *path, char *why, size_t why_size)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_size, "%s", e ? e : path);
        return ENVLOG_UNAVAILABLE;
    }
    envlog_cuda_nvrtc_api api = {0};
    if (!resolve(h, path, &api, why, why_size)) {
        dlclose(h);
        return ENVLOG_UNAVAILABLE;
    }
    int major = 0, minor = 0;
    if (api.Version(&major, &minor)) {
        snprintf(why, why_size, "%s: nvrtcVersion failed", path);
        dlclose(h);
        return ENVLOG_UNAVAILABLE;
    }
    probe_version(&api, major, minor);
    snprintf(api.path, sizeof api.path, "%s", path);
    nv_api = api; /* the handle stays open for the life of the process */
    return ENVLOG_OK;
}

envlog_err envlog_cuda__nvrtc(const envlog_cuda_nvrtc_api **api)
{
    pthread_mutex_lock(&nv_mu);
    if (!nv_tried) {
        nv_tried = true;
        const char *over = getenv("ENVLOG_NVRTC");
        char why[512];
        if (over && *over) {
            nv_err = try_load(over, why, sizeof why);
            if (nv_err)
                snprintf(nv_msg, sizeof nv_msg, "NVRTC unavailable: ENVLOG_NVRTC=%s: %s",
                         over, why);
        } else {
            static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12",
                                                "libnvrtc.so"};
            size_t used = (size_t)snprintf(nv_msg, sizeof nv_msg,
                                           "NVRTC unavailable (install the CUDA "
                                           "Toolkit's NVRTC or set ENVLOG_NVRTC):");
            nv_err = ENVLOG_UNAVAILABLE;
            for (size_t i = 0; i < sizeof names / sizeof names[0] && nv_err; i++) {
                nv_err = try_load(names[i], why, sizeof why);
                if (nv_err && used < sizeof nv_msg)
                    used += (size_t)snprintf(nv_msg + used, sizeof nv_msg - used,
                                             "%s %s", i ? ";" : "", why);
            }
        }
    }
    envlog_err e = nv_err;
    pthread_mutex_unlock(&nv_mu);
    if (e)
        return envlog__fail(e, "%s", nv_msg);
    *api = &nv_api;
    return ENVLOG_OK;
}

void envlog_cuda__nvrtc_forget(void)
{
    pthread_mutex_lock(&nv_mu);
    nv_tried = false;
    nv_err = ENVLOG_OK;
    pthread_mutex_unlock(&nv_mu);
}

envlog_err envlog_cuda_nvrtc_version(char *out, size_t size)
{
    const envlog_cuda_nvrtc_api *api;
    envlog_err e = envlog_cuda__nvrtc(&api);
    if (e)
        return e;
    if (!out || strlen(api->version) >= size)
        return envlog__fail(ENVLOG_TOO_BIG, "the NVRTC version does not fit in %zu bytes",
                            size);
    memcpy(out, api->version, strlen(api->version) + 1);
    return ENVLOG_OK;
}

bool envlog_cuda__arch_valid(const char *arch)
{
    if (!arch)
        return false;
    const char *p;
    if (!strncmp(arch, "sm_", 3))
        p = arch + 3;
    else if (!strncmp(arch, "compute_", 8))
        p = arch + 8;
    else
        return false;
    size_t d = strspn(p, "0123456789");
    if (d == 0 || d > 4)
        return false;
    p += d;
    return *p == 0 || (islower((unsigned char)p[0]) && p[1] == 0);
}

envlog_cuda_binary *envlog_cuda__binary_new(const void *data, size_t size,
                                            const char *log)
{
    size_t loglen = log ? strlen(log) : 0;
    if (size > SIZE_MAX / 2 || loglen > SIZE_MAX / 4)
        return NULL;
    envlog_cuda_binary *b = envlog_calloc(1, sizeof *b + size + loglen + 1);
    if (!b)
        return NULL;
    uint8_t *p = (uint8_t *)(b + 1);
    if (size)
        memcpy(p, data, size);
    char *l = (char *)p + size;
    if (loglen)
        memcpy(l, log, loglen);
    l[loglen] = 0;
    b->data = size ? p : NULL;
    b->size = size;
    b->log = l;
    if (size)
        b->binary_hash = envlog_hash128_bytes(p, size);
    return b;
}

void envlog_cuda_binary_free(envlog_cuda_binary *b)
{
    envlog_free(b);
}

/* Splits `opts` at spaces into `argv` (pointing into `copy`), after one
 * "-arch=" option; refuses an -arch among them. */
static envlog_err split_options(const envlog_cuda_kernel_desc *d, char *copy,
                                char *arch_opt, size_t arch_size,
                                const char ***argv, int *argc)
{
    size_t n = 1;
    for (const char *p = copy; *p; p++)
        if (*p != ' ' && (p == copy || p[-1] == ' '))
            n++;
    const char **v = envlog_malloc(n * sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for compiler options");
    snprintf(arch_opt, arch_size, "-arch=%s", d->arch);
    int k = 0;
    v[k++] = arch_opt;
    char *save = NULL; /* batches compile on many threads: strtok_r */
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (!strncmp(tok, "-arch", 5) || !strncmp(tok, "--gpu-architecture", 18) ||
            !strncmp(tok, "--gpu-name", 10)) {
            envlog_free(v);
            return envlog__fail(ENVLOG_INVALID_ARG,
                                "option '%s' of kernel %s: give the target as the arch, "
                                "not among the options", tok, d->name);
        }
        v[k++] = tok;
    }
    *argv = v;
    *argc = k;
    return ENVLOG_OK;
}

/* The program's log, or "" (never NULL; free with envlog_free). */
static char *program_log(const envlog_cuda_nvrtc_api *api, void *prog)
{
    size_t n = 0;
    char *log = NULL;
    if (!api->GetProgramLogSize(prog, &n) && n && n < (64u << 20) &&
        (log = envlog_malloc(n + 1))) {
        if (api->GetProgramLog(prog, log))
            log[0] = 0;
        log[n] = 0;
        return log;
    }
    return envlog_strdup("");
}

/* The first line of `log` that says something, for an error message. */
static void first_line(const char *log, char *out, size_t size)
{
    const char *p = log;
    while (*p == '\n' || *p == ' ')
        p++;
    size_t len = strcspn(p, "\n");
    if (len >= size)
        len = size - 1;
    memcpy(out, p, len);
    out[len] = 0;
}

envlog_err envlog_cuda__nvrtc_build(const envlog_cuda_kernel_desc *d,
                                    envlog_cuda_binary **out, envlog_buf *ir)
{
    *out = NULL;
    if (!d || !d->name || !d->source || !*d->name)
        return envlog__fail(ENVLOG_INVALID_ARG, "a kernel needs a name and a source");
    if (!envlog_cuda__arch_valid(d->arch))
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "kernel %s: arch '%s' is not sm_XX or compute_XX", d->name,
                            d->arch ? d->arch : "(null)");
    const envlog_cuda_nvrtc_api *api;
    envlog_err e = envlog_cuda__nvrtc(&api);
    if (e)
        return e;
    char *copy = envlog_strdup(d->options ? d->options : "");
    if (!copy)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for compiler options");
    char arch_opt[48];
    const char **argv = NULL;
    int argc = 0;
    if ((e = split_options(d, copy, arch_opt, sizeof arch_opt, &argv, &argc))) {
        envlog_free(copy);
        return e;
    }
    char file[160];
    snprintf(file, sizeof file, "%s.cu", d->name);
    void *prog = NULL;
    int r = api->CreateProgram(&prog, d->source, file, 0, NULL, NULL);
    if (r) {
        envlog_free(argv);
        envlog_free(copy);
        return envlog__fail(r == 1 ? ENVLOG_NOMEM : ENVLOG_INVALID_ARG,
                            "nvrtcCreateProgram(%s): %s", d->name, api->GetErrorString(r));
    }
    uint64_t t0 = envlog_cuda__now_ns();
    r = api->CompileProgram(prog, argc, argv);
    uint64_t dur = envlog_cuda__now_ns() - t0;
    envlog_free(argv);
    envlog_free(copy);
    char *log = program_log(api, prog);
    if (!log) {
        api->DestroyProgram(&prog);
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a compiler log");
    }
    bool ptx = !strncmp(d->arch, "compute_", 8);
    envlog_cuda_binary *b = NULL;
    if (r) {
        /* A refused source or option is the caller's to see: a FAILED
         * binary whose log says why. */
        char *full = log;
        if (!*log) {
            size_t n = strlen(api->GetErrorString(r)) + 32;
            if ((full = envlog_malloc(n)))
                snprintf(full, n, "nvrtcCompileProgram: %s\n", api->GetErrorString(r));
            envlog_free(log);
            log = full;
        }
        if (!log || !(b = envlog_cuda__binary_new(NULL, 0, log))) {
            envlog_free(log);
            api->DestroyProgram(&prog);
            return envlog__fail(ENVLOG_NOMEM, "out of memory for a compiler log");
        }
        char line[200];
        first_line(log, line, sizeof line);
        envlog_free(log);
        api->DestroyProgram(&prog);
        b->outcome = ENVLOG_FAILED;
        b->ptx = ptx;
        b->duration_ns = dur;
        *out = b;
        return envlog__fail(ENVLOG_BAD_DATA, "NVRTC refused kernel %s for %s: %s",
                            d->name, d->arch, line);
    }
    size_t n = 0;
    char *img = NULL;
    r = ptx ? api->GetPTXSize(prog, &n) : api->GetCUBINSize(prog, &n);
    if (!r && n && n < (1u << 30) && (img = envlog_malloc(n)))
        r = ptx ? api->GetPTX(prog, img) : api->GetCUBIN(prog, img);
    if (r || !n || !img) {
        envlog_free(img);
        envlog_free(log);
        api->DestroyProgram(&prog);
        if (!r && n && !img)
            return envlog__fail(ENVLOG_NOMEM, "out of memory for a %zu-byte binary", n);
        return envlog__fail(ENVLOG_UNAVAILABLE, "NVRTC gave no %s for kernel %s: %s",
                            ptx ? "PTX" : "CUBIN", d->name,
                            r ? api->GetErrorString(r) : "empty output");
    }
    if (!ptx && ir) {
        size_t pn = 0;
        if (!api->GetPTXSize(prog, &pn) && pn && pn < (1u << 30) &&
            envlog_buf_reserve(ir, pn) == ENVLOG_OK && !api->GetPTX(prog, (char *)ir->p + ir->len))
            ir->len += pn;
    }
    api->DestroyProgram(&prog);
    b = envlog_cuda__binary_new(img, n, log);
    envlog_free(img);
    envlog_free(log);
    if (!b)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a %zu-byte binary", n);
    b->outcome = ENVLOG_COMPILED;
    b->ptx = ptx;
    b->duration_ns = dur;
    *out = b;
    return ENVLOG_OK;
}

envlog_err envlog_cuda_nvrtc_compile(const envlog_cuda_kernel_desc *d,
                                     envlog_cuda_binary **out)
{
    if (!out)
        return envlog__fail(ENVLOG_INVALID_ARG, "no output for the binary");
    envlog_err e = envlog_cuda__nvrtc_build(d, out, NULL);
    if (*out) {
        const char *v = NULL;
        const envlog_cuda_nvrtc_api *api;
        if (envlog_cuda__nvrtc(&api) == ENVLOG_OK)
            v = api->version;
        envlog_err ke = v ? envlog_cuda_kernel_key(d, v, &(*out)->kernel_key) : ENVLOG_OK;
        if (ke && !e) {
            envlog_cuda_binary_free(*out);
            *out = NULL;
            return ke;
        }
    }
    return e;
}
