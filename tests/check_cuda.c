/* SPDX-License-Identifier: MIT */
/*
 * check_cuda.c - the cuda suite: real NVRTC compiles of every built-in
 * kernel, the compile cache and its records, the loaders' "unavailable"
 * paths, the CPU backend, and the GPU tests (which run only where a GPU is,
 * and say so when they skip).  The modes and the tuner have their own files
 * (check_cuda_modes.c, check_cuda_tuner.c); the helpers they share are here.
 */
#include "check_cuda.h"
#include "suites.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

bool tc_nvrtc(const char *test)
{
    char v[32];
    if (envlog_cuda_nvrtc_version(v, sizeof v) == ENVLOG_OK)
        return true;
    printf("check_cuda: %s skipped: %s\n", test, envlog_errmsg());
    return false;
}

static void begin(tc_env *t, envlog_level level, const envlog_cuda_opts *o)
{
    envlog_session_opts so = tu_opts("cuda-test", 0);
    so.level = level;
    ck_assert_ok(envlog_session_begin(t->env, &so, &t->s));
    envlog_cuda_opts def;
    if (!o) {
        envlog_cuda_opts_init(&def);
        def.device = ENVLOG_CUDA_DEVICE_NONE;
        o = &def;
    }
    ck_assert_ok(envlog_cuda_open(t->env, t->s, o, &t->c));
}

void tc_open(tc_env *t, const char *tag, envlog_level level, const envlog_cuda_opts *o)
{
    memset(t, 0, sizeof *t);
    t->dir = tu_mkdtemp(tag);
    t->env = tu_env(t->dir);
    begin(t, level, o);
}

void tc_reopen(tc_env *t, envlog_level level, const envlog_cuda_opts *o)
{
    tc_end(t);
    begin(t, level, o);
}

void tc_end(tc_env *t)
{
    envlog_cuda_close(t->c);
    t->c = NULL;
    if (t->s)
        ck_assert_ok(envlog_session_end(t->s));
    t->s = NULL;
}

void tc_free(tc_env *t)
{
    tc_end(t);
    envlog_env_close(t->env);
    tu_rmrf(t->dir);
    free(t->dir);
}

size_t tc_sessions(tc_env *t)
{
    envlog_session_info *in;
    size_t n;
    ck_assert_ok(envlog_sessions_list(t->env, &in, &n));
    envlog_sessions_free(in, n);
    return n;
}

envlog_cuda_opts tc_no_device(const char *compiler_version)
{
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    o.compiler_version = compiler_version;
    return o;
}

envlog_cuda_stream *tc_host_stream(tc_env *t)
{
    envlog_cuda_stream *s;
    ck_assert_ok(envlog_cuda_stream_open(t->c, ENVLOG_CUDA_STREAM_HOST, &s));
    return s;
}

static void copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

static envlog_err collect_one(void *ctx, const envlog_replay_rec *rr)
{
    tc_recs *out = ctx;
    const envlog_record *rec = rr->rec;
    if (rec->kind == ENVLOG_KIND_SESSION || rec->kind < ENVLOG_KIND_SESSION)
        return ENVLOG_OK;
    /* The sources the runtime records beside its compiles are counted, not
     * listed (test_source_recorded_once_at_basic looks at them). */
    if (rec->kind == ENVLOG_KIND_USER && !strcmp(rec->u.user.kind, ENVLOG_CUDA_SOURCE_KIND)) {
        out->sources++;
        return ENVLOG_OK;
    }
    tc_rec *p = realloc(out->r, (out->n + 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    out->r = p;
    tc_rec *r = &p[out->n++];
    memset(r, 0, sizeof *r);
    r->kind = rec->kind;
    r->effect = rec->effect;
    r->stamp = rec->stamp;
    if (rec->kind == ENVLOG_KIND_COMPILE) {
        const envlog_compile *c = &rec->u.compile;
        copy(r->name, sizeof r->name, c->name);
        r->outcome = c->outcome;
        r->has_binary = c->binary.size > 0;
        r->has_source = c->source != NULL;
        r->has_ir = c->ir.size > 0;
        r->has_tune = c->has_tune;
        r->tune = c->tune;
        copy(r->log, sizeof r->log, c->log);
        r->has_start = c->has_start;
        r->start_ns = c->start_ns;
        r->thread = c->thread;
        r->duration_ns = c->duration_ns;
    } else if (rec->kind == ENVLOG_KIND_TUNE) {
        const envlog_tune *t = &rec->u.tune;
        copy(r->name, sizeof r->name, t->key);
        r->stored = t->stored;
        r->within_noise = t->within_noise;
        r->short_circuit = t->short_circuit;
        r->winner = t->winner;
        r->margin = t->margin;
        r->n_trials = t->n_trials;
        for (size_t i = 0; i < t->n_trials && i < 16; i++) {
            r->trial_index[i] = t->trials[i].index;
            r->trial_samples[i] = t->trials[i].samples;
            r->trial_n_samples[i] = t->trials[i].n_sample_ns;
            r->trial_error[i] = t->trials[i].error != NULL;
            if (t->trials[i].error && !r->first_error[0])
                copy(r->first_error, sizeof r->first_error, t->trials[i].error);
            r->trial_has_start[i] = t->trials[i].has_start;
            r->trial_start_ns[i] = t->trials[i].start_ns;
            r->trial_wall_ns[i] = t->trials[i].wall_ns;
        }
        r->has_start = t->has_start;
        r->start_ns = t->start_ns;
        r->thread = t->thread;
        r->wall_ns = t->wall_ns;
        copy(r->policy, sizeof r->policy, t->policy);
        r->n_params = t->n_params;
    } else if (rec->kind == ENVLOG_KIND_SPAN) {
        const envlog_span_rec *s = &rec->u.span;
        copy(r->name, sizeof r->name, s->name);
        r->open_ns = s->open_ns;
        r->duration_ns = s->duration_ns;
        r->has_start = s->has_thread;
        r->thread = s->thread;
        r->span_open = s->open;
        size_t used = 0;
        for (size_t i = 0; i < s->n_attrs && used < sizeof r->attrs; i++)
            used += (size_t)snprintf(r->attrs + used, sizeof r->attrs - used, "%s%s=%s",
                                     i ? "," : "", s->attrs[i].key, s->attrs[i].value);
    }
    return ENVLOG_OK;
}

void tc_collect(envlog_env *env, tc_recs *out)
{
    out->r = NULL;
    out->n = 0;
    out->sources = 0;
    ck_assert_ok(envlog_replay_each(env, NULL, collect_one, out));
}

void tc_recs_free(tc_recs *r)
{
    free(r->r);
    r->r = NULL;
    r->n = 0;
}

size_t tc_count(const tc_recs *r, envlog_kind kind, int outcome)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->r[i].kind == kind &&
            (outcome < 0 || kind != ENVLOG_KIND_COMPILE || (int)r->r[i].outcome == outcome))
            n++;
    return n;
}

static envlog_err clock_start(void *ctx, envlog_cuda_stream *s)
{
    (void)ctx;
    (void)s;
    return ENVLOG_OK;
}

static envlog_err clock_stop(void *ctx, envlog_cuda_stream *s, double *ns)
{
    (void)s;
    tc_clock *clk = ctx;
    size_t i = clk->cur;
    ck_assert_uint_gt(clk->len[i], 0);
    *ns = clk->script[i][clk->pos[i]++ % clk->len[i]];
    return ENVLOG_OK;
}

void tc_clock_init(tc_clock *clk)
{
    memset(clk, 0, sizeof *clk);
    clk->fail_index = -1;
    clk->timer = (envlog_cuda_timer){"test-clock", clock_start, clock_stop, clk};
}

void tc_clock_fixed(tc_clock *clk, const double *ns, size_t n)
{
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        clk->script[i] = ns + i;
        clk->len[i] = 1;
    }
}

envlog_cuda_tune_req tc_clock_req(tc_clock *clk, envlog_cuda_stream *s, const char *key,
                                  const char *const *names, size_t n)
{
    return (envlog_cuda_tune_req){.key = key, .candidates = names, .n_candidates = n,
                                  .run = tc_clock_run, .ctx = clk, .stream = s,
                                  .timer = &clk->timer};
}

static void nothing(void *arg)
{
    (void)arg;
}

envlog_err tc_clock_run(void *ctx, envlog_cuda_stream *s, size_t index)
{
    tc_clock *clk = ctx;
    clk->cur = index;
    if (index < 8) {
        clk->runs[index]++;
        clk->seen[index] = envlog_cuda_stream_mode_get(s);
    }
    if ((int)index == clk->fail_index || clk->fail_index == TC_FAIL_ALL) {
        if (clk->fail_code)
            return clk->fail_code;
        return envlog__fail(ENVLOG_BAD_DATA, "candidate %zu refuses to run", index);
    }
    return envlog_cuda_host_launch(s, nothing, NULL);
}

/* ------------------------------------------------------------ kernel keys */

/* The documented byte layout, built by hand. */
static envlog_hash128 key_by_hand(const char *src, const char *opt, const char *ver,
                                  const char *arch)
{
    uint8_t buf[4096];
    size_t n = 0;
    memcpy(buf, "envlog-cuda-kernel-key/1", 25);
    n = 25;
    const char *parts[] = {src, opt, ver, arch};
    for (int i = 0; i < 4; i++) {
        uint64_t len = strlen(parts[i]);
        for (int b = 0; b < 8; b++)
            buf[n++] = (uint8_t)(len >> (8 * b));
        memcpy(buf + n, parts[i], len);
        n += len;
    }
    return envlog_hash128_bytes(buf, n);
}

START_TEST(test_kernel_key_layout)
{
    envlog_cuda_kernel_desc d = {"k", "extern \"C\" __global__ void k() {}", "-DX=1",
                                 "sm_90"};
    envlog_hash128 k1, k2, k3, k4;
    ck_assert_ok(envlog_cuda_kernel_key(&d, "13.0.88", &k1));
    envlog_hash128 want = key_by_hand(d.source, d.options, "13.0.88", "sm_90");
    ck_assert_mem_eq(k1.b, want.b, 16);
    d.options = NULL; /* NULL is "" */
    ck_assert_ok(envlog_cuda_kernel_key(&d, "13.0.88", &k2));
    want = key_by_hand(d.source, "", "13.0.88", "sm_90");
    ck_assert_mem_eq(k2.b, want.b, 16);
    ck_assert_mem_ne(k1.b, k2.b, 16);
    d.arch = "compute_90";
    ck_assert_ok(envlog_cuda_kernel_key(&d, "13.0.88", &k3));
    ck_assert_mem_ne(k2.b, k3.b, 16);
    ck_assert_ok(envlog_cuda_kernel_key(&d, "12.4", &k4));
    ck_assert_mem_ne(k3.b, k4.b, 16);
    /* The name is not part of the key: one module serves all its kernels. */
    d.name = "other";
    ck_assert_ok(envlog_cuda_kernel_key(&d, "12.4", &k1));
    ck_assert_mem_eq(k1.b, k4.b, 16);
    /* Length prefixes keep the fields apart. */
    envlog_cuda_kernel_desc a = {"k", "ab", "c", "sm_90"}, b = {"k", "a", "bc", "sm_90"};
    ck_assert_ok(envlog_cuda_kernel_key(&a, "1", &k1));
    ck_assert_ok(envlog_cuda_kernel_key(&b, "1", &k2));
    ck_assert_mem_ne(k1.b, k2.b, 16);
    ck_assert_err(envlog_cuda_kernel_key(&a, NULL, &k1), ENVLOG_INVALID_ARG);
}
END_TEST

START_TEST(test_arch_and_options_checked)
{
    ck_assert(envlog_cuda__arch_valid("sm_90"));
    ck_assert(envlog_cuda__arch_valid("sm_90a"));
    ck_assert(envlog_cuda__arch_valid("compute_80"));
    ck_assert(envlog_cuda__arch_valid("sm_100"));
    ck_assert(!envlog_cuda__arch_valid("sm_"));
    ck_assert(!envlog_cuda__arch_valid("sm90"));
    ck_assert(!envlog_cuda__arch_valid("sm_90ab"));
    ck_assert(!envlog_cuda__arch_valid("compute_x"));
    ck_assert(!envlog_cuda__arch_valid(NULL));
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    o.compiler_version = "test-1"; /* no NVRTC needed to key */
    tc_env t;
    tc_open(&t, "cuda-args", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_kernel *k;
    envlog_cuda_kernel_desc d = {"k", "int x;", "-arch=sm_80", "sm_90"};
    ck_assert_err(envlog_cuda_kernel_new(t.c, &d, &k), ENVLOG_INVALID_ARG);
    d.options = "-DX --gpu-architecture=sm_80";
    ck_assert_err(envlog_cuda_kernel_new(t.c, &d, &k), ENVLOG_INVALID_ARG);
    d.options = "";
    d.arch = "gfx90a";
    ck_assert_err(envlog_cuda_kernel_new(t.c, &d, &k), ENVLOG_INVALID_ARG);
    d.arch = NULL; /* the device's: there is none */
    ck_assert_err(envlog_cuda_kernel_new(t.c, &d, &k), ENVLOG_UNAVAILABLE);
    d.arch = "sm_90";
    d.source = "";
    ck_assert_err(envlog_cuda_kernel_new(t.c, &d, &k), ENVLOG_INVALID_ARG);
    d.source = "int x;";
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
    ck_assert_ptr_null(envlog_cuda_kernel_binary(k));
    envlog_cuda_kernel_free(k);
    /* a runtime on a session of another environment */
    tc_env u;
    tc_open(&u, "cuda-args2", ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda *c2;
    ck_assert_err(envlog_cuda_open(t.env, u.s, &o, &c2), ENVLOG_INVALID_ARG);
    o.runtime = "a/b";
    ck_assert_err(envlog_cuda_open(u.env, u.s, &o, &c2), ENVLOG_INVALID_ARG);
    tc_free(&u);
    tc_free(&t);
}
END_TEST

/* ------------------------------------------------------------ real NVRTC */

/* Every built-in variant to PTX and CUBIN, as one COMPILE_ONLY batch. */
START_TEST(test_nvrtc_every_builtin)
{
    if (!tc_nvrtc("compiling every built-in kernel"))
        return;
    tc_env t;
    tc_open(&t, "cuda-builtins", ENVLOG_LEVEL_FULL, NULL);
    size_t nb;
    const demo_kernel *b = demo_kernels(&nb);
    ck_assert_uint_ge(nb, 10);
    static const char *const archs[] = {"compute_80", "sm_80"};
    envlog_cuda_kernel **k = calloc(2 * nb, sizeof *k);
    for (size_t a = 0; a < 2; a++)
        for (size_t i = 0; i < nb; i++) {
            envlog_cuda_kernel_desc d = {b[i].entry, b[i].source, b[i].options, archs[a]};
            ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k[a * nb + i]));
            ck_assert_ok(envlog_cuda_kernel_queue(k[a * nb + i]));
        }
    envlog_cuda_batch bt;
    ck_assert_ok(envlog_cuda_compile_queued(t.c, &bt));
    ck_assert_uint_eq(bt.kernels, 2 * nb);
    ck_assert_uint_eq(bt.compiled, 2 * nb);
    ck_assert_uint_eq(bt.failed, 0);
    for (size_t i = 0; i < 2 * nb; i++) {
        const envlog_cuda_binary *bin = envlog_cuda_kernel_binary(k[i]);
        ck_assert_ptr_nonnull(bin);
        ck_assert_int_eq(bin->outcome, ENVLOG_COMPILED);
        ck_assert_uint_gt(bin->size, 64);
        const demo_kernel *bi = &b[i % nb];
        if (i < nb) {
            ck_assert(bin->ptx);
            const char *ptx = bin->data;
            ck_assert_int_eq(ptx[bin->size - 1], 0);
            char entry[128];
            snprintf(entry, sizeof entry, ".entry %s(", bi->entry);
            ck_assert_msg(strstr(ptx, entry), "%s: no %s in its PTX", bi->variant, entry);
            ck_assert_ptr_nonnull(strstr(ptx, ".target sm_80"));
        } else {
            ck_assert(!bin->ptx);
            ck_assert_mem_eq(bin->data, "\177ELF", 4);
        }
        envlog_cuda_kernel_free(k[i]);
    }
    free(k);
    tc_end(&t);
    tc_recs r;
    tc_collect(t.env, &r);
    ck_assert_uint_eq(tc_count(&r, ENVLOG_KIND_COMPILE, ENVLOG_COMPILED), 2 * nb);
    size_t with_ir = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.r[i].kind == ENVLOG_KIND_COMPILE) {
            ck_assert(r.r[i].has_source); /* FULL */
            ck_assert(r.r[i].has_binary);
            with_ir += r.r[i].has_ir;
        }
    ck_assert_uint_eq(with_ir, nb); /* each CUBIN carries its PTX at FULL */
    tc_recs_free(&r);
    tc_free(&t);
}
END_TEST

static const char good_src[] =
    "extern \"C\" __global__ void tc_scale(float *x, float a, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n";

START_TEST(test_compile_hit_and_records)
{
    if (!tc_nvrtc("the compile cache"))
        return;
    tc_env t;
    tc_open(&t, "cuda-hit", ENVLOG_LEVEL_BASIC, NULL);
    envlog_cuda_kernel_desc d = {"tc_scale", good_src, "-DUNUSED=1", "sm_80"};
    envlog_cuda_binary *b1, *b2;
    ck_assert_ok(envlog_cuda_compile(t.c, &d, &b1));
    ck_assert_int_eq(b1->outcome, ENVLOG_COMPILED);
    ck_assert(b1->recorded);
    ck_assert_uint_gt(b1->duration_ns, 0);
    envlog_hash128 key;
    char v[32];
    ck_assert_ok(envlog_cuda_nvrtc_version(v, sizeof v));
    ck_assert_ok(envlog_cuda_kernel_key(&d, v, &key));
    ck_assert_mem_eq(b1->kernel_key.b, key.b, 16);
    ck_assert_ok(envlog_cuda_compile(t.c, &d, &b2));
    ck_assert_int_eq(b2->outcome, ENVLOG_LOADED);
    ck_assert_uint_eq(b2->duration_ns, 0);
    ck_assert_uint_eq(b1->size, b2->size);
    ck_assert_mem_eq(b1->data, b2->data, b1->size);
    ck_assert_mem_eq(b1->binary_hash.b, b2->binary_hash.b, 16);
    envlog_cuda_counts st;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &st);
    ck_assert_uint_eq(st.kernels_registered, 2);
    ck_assert_uint_eq(st.kernels_compiled, 1);
    ck_assert_uint_eq(st.kernels_loaded, 1);
    ck_assert_uint_eq(st.kernels_stored, 1);
    envlog_cuda_binary_free(b1);
    envlog_cuda_binary_free(b2);
    /* A later session finds it and writes nothing. */
    tc_reopen(&t, ENVLOG_LEVEL_BASIC, NULL);
    ck_assert_ok(envlog_cuda_compile(t.c, &d, &b1));
    ck_assert_int_eq(b1->outcome, ENVLOG_LOADED);
    envlog_cuda_binary_free(b1);
    envlog_session_stats ss;
    envlog_session_stats_get(t.s, &ss);
    ck_assert(!ss.on_disk);
    tc_end(&t);
    ck_assert_uint_eq(tc_sessions(&t), 1);
    tc_recs r;
    tc_collect(t.env, &r);
    ck_assert_uint_eq(r.n, 2); /* the held `loaded` record of session 2 is gone */
    ck_assert_int_eq(r.r[0].outcome, ENVLOG_COMPILED);
    ck_assert_int_eq(r.r[0].effect, ENVLOG_CHANGED);
    ck_assert(r.r[0].has_binary);
    ck_assert(!r.r[0].has_source); /* BASIC */
    ck_assert_int_eq(r.r[1].outcome, ENVLOG_LOADED);
    ck_assert_int_eq(r.r[1].effect, ENVLOG_OBSERVED);
    ck_assert(!r.r[1].has_binary);
    tc_recs_free(&r);
    tc_free(&t);
}
END_TEST

/* The order of compile records and source records, and the bodies. */
typedef struct src_walk {
    char seq[16]; /* 's' a source record, 'c' a compile record */
    size_t n;
    envlog_hash128 hash[4];
    size_t n_hash;
    bool bodies_ok;
} src_walk;

static envlog_err src_one(void *ctx, const envlog_replay_rec *rr)
{
    src_walk *w = ctx;
    const envlog_record *rec = rr->rec;
    if (rec->kind == ENVLOG_KIND_COMPILE && w->n < sizeof w->seq - 1)
        w->seq[w->n++] = 'c';
    if (rec->kind != ENVLOG_KIND_USER || strcmp(rec->u.user.kind, ENVLOG_CUDA_SOURCE_KIND))
        return ENVLOG_OK;
    if (w->n < sizeof w->seq - 1)
        w->seq[w->n++] = 's';
    /* [h'<16 bytes>', "<source>"] with the source over 23 bytes long */
    const uint8_t *b = rec->u.user.body.data;
    size_t n = rec->u.user.body.size;
    envlog_hash128 h;
    if (n < 21 || b[0] != 0x82 || b[1] != 0x50 || (b[18] >> 5) != 3) {
        w->bodies_ok = false;
        return ENVLOG_OK;
    }
    memcpy(h.b, b + 2, 16);
    size_t hl = (b[18] & 31) == 24 ? 2 : (b[18] & 31) == 25 ? 3 : 1;
    envlog_hash128 want = envlog_hash128_bytes(b + 18 + hl, n - 18 - hl);
    if (memcmp(want.b, h.b, 16) || w->n_hash == 4)
        w->bodies_ok = false;
    else
        w->hash[w->n_hash++] = h;
    return ENVLOG_OK;
}

START_TEST(test_source_recorded_once_at_basic)
{
    if (!tc_nvrtc("sources recorded beside compiles"))
        return;
    tc_env t;
    tc_open(&t, "cuda-src", ENVLOG_LEVEL_BASIC, NULL);
    /* One source for two archs, another one, and a loaded kernel. */
    envlog_cuda_kernel_desc d[] = {{"tc_scale", good_src, NULL, "sm_80"},
                                   {"tc_scale", good_src, NULL, "compute_80"},
                                   {"tc_bad", "extern \"C\" __global__ void tc_bad() { nope(); }",
                                    NULL, "sm_80"},
                                   {"tc_scale", good_src, NULL, "sm_80"}};
    for (size_t i = 0; i < 4; i++) {
        envlog_cuda_binary *b = NULL;
        envlog_err e = envlog_cuda_compile(t.c, &d[i], &b);
        ck_assert(e == ENVLOG_OK || (i == 2 && e == ENVLOG_BAD_DATA));
        envlog_cuda_binary_free(b);
    }
    tc_end(&t);
    src_walk w = {.bodies_ok = true};
    ck_assert_ok(envlog_replay_each(t.env, NULL, src_one, &w));
    /* Each source once, before the first compile record that names it;
     * the compile records carry none at BASIC. */
    ck_assert_str_eq(w.seq, "sccscc");
    ck_assert(w.bodies_ok);
    ck_assert_uint_eq(w.n_hash, 2);
    ck_assert_mem_eq(w.hash[0].b, envlog_hash128_bytes(good_src, strlen(good_src)).b, 16);
    tc_recs r;
    tc_collect(t.env, &r);
    ck_assert_uint_eq(r.sources, 2);
    for (size_t i = 0; i < r.n; i++)
        ck_assert(!r.r[i].has_source);
    tc_recs_free(&r);
    tc_free(&t);
}
END_TEST

START_TEST(test_compile_error_returns_log)
{
    if (!tc_nvrtc("a refused compile"))
        return;
    tc_env t;
    tc_open(&t, "cuda-err", ENVLOG_LEVEL_FULL, NULL);
    envlog_cuda_kernel_desc d = {"tc_bad",
                                 "extern \"C\" __global__ void tc_bad(float *x)\n"
                                 "{ x[0] = undeclared_thing; }\n",
                                 NULL, "sm_80"};
    envlog_cuda_binary *b;
    ck_assert_err(envlog_cuda_compile(t.c, &d, &b), ENVLOG_BAD_DATA);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "tc_bad"));
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b->outcome, ENVLOG_FAILED);
    ck_assert_ptr_null(b->data);
    ck_assert_ptr_nonnull(strstr(b->log, "undeclared_thing"));
    ck_assert(b->recorded);
    envlog_cuda_binary_free(b);
    /* Through a kernel object: the load fails, the log stays readable. */
    envlog_cuda_kernel *k;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
    ck_assert_err(envlog_cuda_kernel_load(k), ENVLOG_BAD_DATA);
    ck_assert_err(envlog_cuda_kernel_load(k), ENVLOG_BAD_DATA); /* tried again */
    const envlog_cuda_binary *kb = envlog_cuda_kernel_binary(k);
    ck_assert_ptr_nonnull(kb);
    ck_assert_int_eq(kb->outcome, ENVLOG_FAILED);
    ck_assert_ptr_nonnull(strstr(kb->log, "undeclared_thing"));
    envlog_cuda_kernel_free(k);
    /* A bad option is refused the same way. */
    d.source = good_src;
    d.name = "tc_scale";
    d.options = "--no-such-option";
    ck_assert_err(envlog_cuda_compile(t.c, &d, &b), ENVLOG_BAD_DATA);
    ck_assert_int_eq(b->outcome, ENVLOG_FAILED);
    ck_assert_str_ne(b->log, "");
    envlog_cuda_binary_free(b);
    envlog_cuda_counts st;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &st);
    ck_assert_uint_eq(st.kernels_failed, 4);
    ck_assert_uint_eq(st.kernels_compiled, 0);
    ck_assert_uint_eq(st.kernels_settled, st.kernels_registered);
    /* A failure is OBSERVED: nothing reached the disk. */
    envlog_session_stats ss;
    envlog_session_stats_get(t.s, &ss);
    ck_assert(!ss.on_disk);
    ck_assert_uint_eq(ss.held, 6); /* four failures, the two sources */
    /* ...until something changes the environment. */
    d.options = NULL;
    ck_assert_ok(envlog_cuda_compile(t.c, &d, &b));
    envlog_cuda_binary_free(b);
    tc_end(&t);
    tc_recs r;
    tc_collect(t.env, &r);
    ck_assert_uint_eq(tc_count(&r, ENVLOG_KIND_COMPILE, ENVLOG_FAILED), 4);
    ck_assert_int_eq(r.r[0].outcome, ENVLOG_FAILED);
    ck_assert_ptr_nonnull(strstr(r.r[0].log, "undeclared_thing"));
    ck_assert(r.r[0].has_source); /* FULL */
    ck_assert(!r.r[0].has_binary);
    tc_recs_free(&r);
    tc_free(&t);
}
END_TEST

/* Where NVRTC is missing: clear errors, and the cache still serves a runtime
 * told the compiler version (a machine that only runs a shipped bundle). */
START_TEST(test_nvrtc_unavailable)
{
    bool have = tc_nvrtc("the cache without NVRTC (its first half)");
    char v[32] = "";
    envlog_cuda_kernel_desc d = {"tc_scale", good_src, NULL, "sm_80"};
    tc_env t;
    tc_open(&t, "cuda-nonvrtc", ENVLOG_LEVEL_BASIC, NULL);
    if (have) {
        ck_assert_ok(envlog_cuda_nvrtc_version(v, sizeof v));
        envlog_cuda_binary *b;
        ck_assert_ok(envlog_cuda_compile(t.c, &d, &b));
        envlog_cuda_binary_free(b);
    }
    tc_end(&t);

    setenv("ENVLOG_NVRTC", "/nonexistent/libnvrtc.so.99", 1);
    envlog_cuda__nvrtc_forget();
    char w[32];
    ck_assert_err(envlog_cuda_nvrtc_version(w, sizeof w), ENVLOG_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "ENVLOG_NVRTC"));
    envlog_cuda_binary *b;
    ck_assert_err(envlog_cuda_nvrtc_compile(&d, &b), ENVLOG_UNAVAILABLE);
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = ENVLOG_CUDA_DEVICE_NONE;
    tc_reopen(&t, ENVLOG_LEVEL_BASIC, &o);
    envlog_cuda_kernel *k;
    ck_assert_err(envlog_cuda_kernel_new(t.c, &d, &k), ENVLOG_UNAVAILABLE);
    if (have) {
        o.compiler_version = v;
        tc_reopen(&t, ENVLOG_LEVEL_BASIC, &o);
        ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
        ck_assert_ok(envlog_cuda_kernel_load(k));
        ck_assert_int_eq(envlog_cuda_kernel_binary(k)->outcome, ENVLOG_LOADED);
        envlog_cuda_kernel_free(k);
        /* A miss cannot compile, and says so. */
        envlog_cuda_kernel_desc d2 = {"tc_scale", good_src, "-DNEW=1", "sm_80"};
        ck_assert_ok(envlog_cuda_kernel_new(t.c, &d2, &k));
        ck_assert_err(envlog_cuda_kernel_load(k), ENVLOG_UNAVAILABLE);
        ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "not in the cache"));
        /* Queued, it stays queued. */
        ck_assert_ok(envlog_cuda_kernel_queue(k));
        ck_assert_err(envlog_cuda_compile_queued(t.c, NULL), ENVLOG_UNAVAILABLE);
        ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 1);
        envlog_cuda_kernel_free(k);
        ck_assert_uint_eq(envlog_cuda_queue_length(t.c), 0);
    }
    unsetenv("ENVLOG_NVRTC");
    envlog_cuda__nvrtc_forget();
    tc_free(&t);
}
END_TEST

START_TEST(test_driver_unavailable_or_present)
{
    int n = -1;
    envlog_err e = envlog_cuda_device_count(&n);
    if (e) {
        ck_assert_err(e, ENVLOG_UNAVAILABLE);
        ck_assert_ptr_nonnull(strstr(envlog_errmsg(), "CUDA driver unavailable"));
        printf("check_cuda: no CUDA driver here (%s); the GPU tests skip\n", envlog_errmsg());
        envlog_cuda_device dev;
        ck_assert_err(envlog_cuda_device_get(0, &dev), ENVLOG_UNAVAILABLE);
        int ver;
        ck_assert_err(envlog_cuda_driver_version(&ver), ENVLOG_UNAVAILABLE);
        /* AUTO opens without a device; an ordinal asked for fails. */
        tc_env t;
        tc_open(&t, "cuda-nodrv", ENVLOG_LEVEL_BASIC, NULL);
        envlog_cuda_opts o;
        envlog_cuda_opts_init(&o);
        envlog_cuda *c;
        ck_assert_ok(envlog_cuda_open(t.env, t.s, &o, &c));
        ck_assert_err(envlog_cuda_device_info(c, &dev), ENVLOG_UNAVAILABLE);
        envlog_cuda_stream *s;
        ck_assert_err(envlog_cuda_stream_open(c, ENVLOG_CUDA_STREAM_DEVICE, &s),
                      ENVLOG_UNAVAILABLE);
        envlog_cuda_dptr p;
        ck_assert_err(envlog_cuda_mem_alloc(c, 64, &p), ENVLOG_UNAVAILABLE);
        envlog_cuda_close(c);
        o.device = 0;
        ck_assert_err(envlog_cuda_open(t.env, t.s, &o, &c), ENVLOG_UNAVAILABLE);
        tc_free(&t);
        return;
    }
    ck_assert_int_ge(n, 0);
}
END_TEST

/* ------------------------------------------------------------ CPU backend */

START_TEST(test_cpu_fingerprint_and_variants)
{
    char fp[200];
    ck_assert_ok(envlog_cuda_cpu_fingerprint(fp, sizeof fp));
    ck_assert_int_eq(strncmp(fp, "cpu-", 4), 0);
    ck_assert_ptr_null(strchr(fp, '/'));
    ck_assert_ptr_null(strchr(fp, ' '));
    char small[6];
    ck_assert_err(envlog_cuda_cpu_fingerprint(small, sizeof small), ENVLOG_TOO_BIG);
    size_t nv;
    demo_cpu_variants(&nv);
    ck_assert_uint_ge(nv, 4);
    size_t m = 37, n = 53, k = 29;
    float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *ref = malloc(m * n * 4),
          *c = malloc(m * n * 4);
    for (size_t i = 0; i < m * k; i++)
        a[i] = (float)((i * 7) % 13) - 6;
    for (size_t i = 0; i < k * n; i++)
        b[i] = (float)((i * 5) % 11) - 5;
    /* small integers: every summation order gives the exact same result */
    ck_assert_ok(demo_cpu_matmul(0, m, n, k, a, b, ref));
    for (size_t i = 0; i < m; i += 9)
        for (size_t j = 0; j < n; j += 7) {
            double want = 0;
            for (size_t p = 0; p < k; p++)
                want += (double)a[i * k + p] * b[p * n + j];
            ck_assert_float_eq(ref[i * n + j], (float)want);
        }
    for (size_t v = 1; v < nv; v++) {
        memset(c, 0x7f, m * n * 4);
        ck_assert_ok(demo_cpu_matmul(v, m, n, k, a, b, c));
        ck_assert_mem_eq(c, ref, m * n * 4);
    }
    ck_assert_err(demo_cpu_matmul(nv, m, n, k, a, b, c), ENVLOG_INVALID_ARG);
    free(a);
    free(b);
    free(ref);
    free(c);
}
END_TEST

START_TEST(test_builtin_grid)
{
    size_t nb;
    const demo_kernel *b = demo_kernels(&nb);
    for (size_t i = 0; i < nb; i++) {
        ck_assert_uint_le(b[i].block.x * b[i].block.y * b[i].block.z, 1024);
        envlog_cuda_dim3 g = demo_kernel_grid(&b[i], 100, 1000);
        if (!strcmp(b[i].family, "matmul")) {
            ck_assert_uint_eq(b[i].block.x, b[i].tile);
            ck_assert_uint_eq(b[i].block.y * b[i].work, b[i].tile);
            ck_assert_uint_ge(g.x * b[i].tile, 1000);
            ck_assert_uint_lt((g.x - 1) * b[i].tile, 1000);
            ck_assert_uint_ge(g.y * b[i].tile, 100);
        } else {
            ck_assert_str_eq(b[i].family, "reduce");
            ck_assert_uint_eq(b[i].block.x % 32, 0);
            ck_assert_uint_ge(g.x * b[i].block.x * b[i].work, 1000);
        }
        ck_assert_ptr_nonnull(strstr(b[i].source, b[i].entry));
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(b[i].variant, b[j].variant);
    }
}
END_TEST

/* ------------------------------------------------------------------- GPU */

static bool have_gpu(const char *test)
{
    int n = 0;
    if (envlog_cuda_device_count(&n) || n == 0) {
        printf("check_cuda: %s skipped (no GPU here): %s\n", test,
               n == 0 && !strstr(envlog_errmsg(), "unavailable") ? "no CUDA device"
                                                                  : envlog_errmsg());
        return false;
    }
    return tc_nvrtc(test);
}

/* Points the driver loader at tests/fake_cuda.c's library, built beside the
 * runner.  False (saying so) when it is not there or NVRTC is absent. */
static bool use_fake_driver(const char *test)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
    if (n <= 0) {
        printf("check_cuda: %s on the fake driver skipped: no /proc/self/exe\n", test);
        return false;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    snprintf(slash ? slash + 1 : exe, 32, "libfake_cuda.so");
    if (!tu_exists(exe)) {
        printf("check_cuda: %s on the fake driver skipped: %s was not built\n", test, exe);
        return false;
    }
    if (!tc_nvrtc(test))
        return false;
    setenv("ENVLOG_CUDA_DRIVER", exe, 1);
    envlog_cuda__drv_forget();
    return true;
}

static void drop_fake_driver(void)
{
    unsetenv("ENVLOG_CUDA_DRIVER");
    envlog_cuda__drv_forget();
}

static void gpu_runtime(tc_env *t, const char *tag)
{
    envlog_cuda_opts o;
    envlog_cuda_opts_init(&o);
    o.device = 0;
    tc_open(t, tag, ENVLOG_LEVEL_BASIC, &o);
}

static void device_launch_events(bool fake)
{
    tc_env t;
    gpu_runtime(&t, "cuda-gpu1");
    envlog_cuda_device dev;
    ck_assert_ok(envlog_cuda_device_info(t.c, &dev));
    ck_assert_str_ne(dev.name, "");
    ck_assert_int_ge(dev.cc_major, 3);
    ck_assert_int_gt(dev.sm_count, 0);
    ck_assert_uint_gt(dev.memory_bytes, 0);
    ck_assert_ptr_null(strchr(dev.fingerprint, '/'));
    ck_assert_ptr_nonnull(strstr(dev.fingerprint, dev.arch));
    if (fake)
        ck_assert_str_eq(dev.fingerprint, "Fake-GPU-Test-sm_80-drv12080-4sm-1024MiB");
    int ver;
    ck_assert_ok(envlog_cuda_driver_version(&ver));
    ck_assert_int_eq(ver, dev.driver_version);
    char ns[512];
    ck_assert_ok(envlog_cuda_tune_ns(t.c, ENVLOG_CUDA_STREAM_DEVICE, ns, sizeof ns));
    ck_assert_ptr_nonnull(strstr(ns, dev.fingerprint));

    envlog_cuda_stream *s;
    ck_assert_ok(envlog_cuda_stream_open(t.c, ENVLOG_CUDA_STREAM_DEVICE, &s));
    envlog_cuda_kernel_desc d = {"tc_scale", good_src, NULL, NULL}; /* the device's arch */
    envlog_cuda_kernel *k;
    ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &k));
    int n = 1 << 16;
    float *x = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++)
        x[i] = (float)i;
    envlog_cuda_dptr dx;
    ck_assert_ok(envlog_cuda_mem_alloc(t.c, (size_t)n * 4, &dx));
    ck_assert_ok(envlog_cuda_memcpy_htod(t.c, dx, x, (size_t)n * 4));
    float a = 2.5f;
    void *args[] = {&dx, &a, &n};
    const envlog_cuda_timer *ev = envlog_cuda_timer_events();
    ck_assert_ok(ev->start(ev->ctx, s));
    ck_assert_ok(envlog_cuda_launch(s, k, (envlog_cuda_dim3){(unsigned)n / 256, 1, 1},
                                    (envlog_cuda_dim3){256, 1, 1}, 0, args));
    double ns_el = -1;
    ck_assert_ok(ev->stop(ev->ctx, s, &ns_el));
    ck_assert(ns_el > 0 && ns_el < 10e9);
    ck_assert_ok(envlog_cuda_stream_sync(s));
    ck_assert_ok(envlog_cuda_memcpy_dtoh(t.c, x, dx, (size_t)n * 4));
    for (int i = 0; i < n; i++)
        ck_assert_float_eq(x[i], (float)i * 2.5f);
    /* A discarded launch leaves the buffer as it was. */
    envlog_cuda_stream_override so;
    ck_assert_ok(envlog_cuda_stream_override_begin(s, ENVLOG_CUDA_STREAM_DISCARD, &so));
    ck_assert_ok(envlog_cuda_launch(s, k, (envlog_cuda_dim3){(unsigned)n / 256, 1, 1},
                                    (envlog_cuda_dim3){256, 1, 1}, 0, args));
    ck_assert_ok(envlog_cuda_stream_override_end(&so));
    ck_assert_ok(envlog_cuda_stream_sync(s));
    ck_assert_ok(envlog_cuda_memcpy_dtoh(t.c, x, dx, (size_t)n * 4));
    ck_assert_float_eq(x[3], 3 * 2.5f);
    envlog_cuda_counts st;
    envlog_cuda_stats_read(envlog_cuda_stats_of(t.c), &st);
    ck_assert_uint_eq(st.launches_executed, 1);
    ck_assert_uint_eq(st.launches_discarded, 1);
    /* The events timer refuses a host stream. */
    envlog_cuda_stream *hs = tc_host_stream(&t);
    ck_assert_err(ev->start(ev->ctx, hs), ENVLOG_INVALID_ARG);
    envlog_cuda_stream_close(hs);
    envlog_cuda_mem_free(t.c, dx);
    envlog_cuda_kernel_free(k);
    envlog_cuda_stream_close(s);
    free(x);
    tc_free(&t);
}

START_TEST(test_gpu_device_launch_events)
{
    if (have_gpu("driver load, launch and event timing"))
        device_launch_events(false);
}
END_TEST

START_TEST(test_fake_device_launch_events)
{
    if (!use_fake_driver("driver load, launch and event timing"))
        return;
    device_launch_events(true);
    drop_fake_driver();
}
END_TEST

typedef struct gpu_mm {
    envlog_cuda_kernel *k[16];
    const demo_kernel *b[16];
    void **args;
    unsigned m, n;
} gpu_mm;

static envlog_err gpu_mm_run(void *ctx, envlog_cuda_stream *s, size_t i)
{
    gpu_mm *g = ctx;
    return envlog_cuda_launch(s, g->k[i], demo_kernel_grid(g->b[i], g->m, g->n),
                              g->b[i]->block, 0, g->args)
               ? -1
               : 0;
}

static void autotune_matches_cpu(bool fake)
{
    tc_env t;
    gpu_runtime(&t, "cuda-gpu2");
    envlog_cuda_stream *s;
    ck_assert_ok(envlog_cuda_stream_open(t.c, ENVLOG_CUDA_STREAM_DEVICE, &s));
    size_t nb;
    const demo_kernel *all = demo_kernels(&nb);
    gpu_mm g = {.m = 192, .n = 160};
    const char *names[16];
    size_t nc = 0;
    for (size_t i = 0; i < nb && nc < 16; i++)
        if (!strcmp(all[i].family, "matmul")) {
            envlog_cuda_kernel_desc d = {all[i].entry, all[i].source, all[i].options, NULL};
            ck_assert_ok(envlog_cuda_kernel_new(t.c, &d, &g.k[nc]));
            g.b[nc] = &all[i];
            names[nc++] = all[i].variant;
        }
    unsigned m = 192, n = 160, kk = 136;
    float *a = malloc((size_t)m * kk * 4), *b = malloc((size_t)kk * n * 4),
          *ref = malloc((size_t)m * n * 4), *got = malloc((size_t)m * n * 4);
    for (size_t i = 0; i < (size_t)m * kk; i++)
        a[i] = (float)((i * 7) % 13) - 6;
    for (size_t i = 0; i < (size_t)kk * n; i++)
        b[i] = (float)((i * 5) % 11) - 5;
    ck_assert_ok(demo_cpu_matmul(0, m, n, kk, a, b, ref));
    envlog_cuda_dptr da, db, dc;
    ck_assert_ok(envlog_cuda_mem_alloc(t.c, (size_t)m * kk * 4, &da));
    ck_assert_ok(envlog_cuda_mem_alloc(t.c, (size_t)kk * n * 4, &db));
    ck_assert_ok(envlog_cuda_mem_alloc(t.c, (size_t)m * n * 4, &dc));
    ck_assert_ok(envlog_cuda_memcpy_htod(t.c, da, a, (size_t)m * kk * 4));
    ck_assert_ok(envlog_cuda_memcpy_htod(t.c, db, b, (size_t)kk * n * 4));
    int im = (int)m, in = (int)n, ik = (int)kk;
    void *args[] = {&da, &db, &dc, &im, &in, &ik};
    g.args = args;
    envlog_cuda_tune_req r = {.key = "matmul-gpu/test", .candidates = names,
                              .n_candidates = nc, .run = gpu_mm_run, .ctx = &g,
                              .stream = s};
    envlog_cuda_tune_result res;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &res));
    ck_assert(res.measured);
    ck_assert(res.stored);
    ck_assert_int_ge(res.winner, 0);
    if (fake) {
        /* the fake device is fastest at 256 threads a block: three variants
         * tie, and the first of them wins */
        ck_assert_str_eq(names[res.winner], "matmul_t16w1");
        ck_assert(res.within_noise);
    }
    /* Every variant computes the same exact result (small integers). */
    for (size_t i = 0; i < nc; i++) {
        ck_assert_ok(envlog_cuda_memcpy_htod(t.c, dc, ref, 4)); /* disturb */
        ck_assert_int_eq(gpu_mm_run(&g, s, i), 0);
        ck_assert_ok(envlog_cuda_stream_sync(s));
        ck_assert_ok(envlog_cuda_memcpy_dtoh(t.c, got, dc, (size_t)m * n * 4));
        ck_assert_msg(!memcmp(got, ref, (size_t)m * n * 4), "variant %s differs from the CPU",
                      names[i]);
    }
    envlog_cuda_tune_result again;
    ck_assert_ok(envlog_cuda_tune(t.c, &r, &again));
    ck_assert(again.hit);
    ck_assert_int_eq(again.winner, res.winner);
    for (size_t i = 0; i < nc; i++)
        envlog_cuda_kernel_free(g.k[i]);
    envlog_cuda_mem_free(t.c, da);
    envlog_cuda_mem_free(t.c, db);
    envlog_cuda_mem_free(t.c, dc);
    envlog_cuda_stream_close(s);
    free(a);
    free(b);
    free(ref);
    free(got);
    tc_free(&t);
}

START_TEST(test_gpu_autotune_matches_cpu)
{
    if (have_gpu("the GPU autotune"))
        autotune_matches_cpu(false);
}
END_TEST

START_TEST(test_fake_autotune_matches_cpu)
{
    if (!use_fake_driver("the GPU autotune"))
        return;
    autotune_matches_cpu(true);
    drop_fake_driver();
}
END_TEST

/* ----------------------------------------------------------------- suite */

Suite *suite_cuda(void)
{
    Suite *s = suite_create("cuda");
    TCase *tc = tu_tcase(s, "compile", 300);
    tcase_add_test(tc, test_kernel_key_layout);
    tcase_add_test(tc, test_arch_and_options_checked);
    tcase_add_test(tc, test_nvrtc_every_builtin);
    tcase_add_test(tc, test_compile_hit_and_records);
    tcase_add_test(tc, test_compile_error_returns_log);
    tcase_add_test(tc, test_source_recorded_once_at_basic);
    tcase_add_test(tc, test_nvrtc_unavailable);
    tc = tu_tcase(s, "backends", 120);
    tcase_add_test(tc, test_cpu_fingerprint_and_variants);
    tcase_add_test(tc, test_builtin_grid);
    tcase_add_test(tc, test_driver_unavailable_or_present);
    tcase_add_test(tc, test_gpu_device_launch_events);
    tcase_add_test(tc, test_gpu_autotune_matches_cpu);
    tcase_add_test(tc, test_fake_device_launch_events);
    tcase_add_test(tc, test_fake_autotune_matches_cpu);
    tc_cuda_modes(s);
    tc_cuda_tuner(s);
    tc_cuda_settle(s);
    return s;
}
