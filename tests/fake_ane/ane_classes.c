/* The fake _ANE classes: _ANEInMemoryModelDescriptor, _ANEInMemoryModel, _ANERequest,
 * _ANEIOSurfaceObject and _ANEDeviceInfo, with the methods the runtime calls. The
 * program runs through aneforge's own MIL reader and CPU executor in fp16, reading
 * model.mil and weights/weight.bin from the model's temporary directory as the daemon
 * does. Every trap the references document fails here, clearly:
 *   MIL given as NSString      descriptor is nil (the real framework crashes)
 *   nil weights dictionary     the compile fails with no error object ("silent")
 *   files not staged           the compile fails naming the directory it read
 *   compile budget             after FAKE_ANE_COMPILE_BUDGET (119) compiles per process
 *   load                       fake_ane_fail_loads(n) makes loads fail like a busy daemon
 *   unloaded model             evaluate fails
 *   surfaces                   count, index, size (each exactly its tensor's fp16 bytes)
 *                              and CPU locks are checked against the program
 * A net.plist program (+modelWithNetworkDescription:weights:optionsPlist:, weights keyed
 * weights.0 / weights.1, staged as net.plist and weights.N) is read with aneforge's
 * plist reader and rebuilt unit by unit from the project's ops (netplist_prog.c).
 * Each failure is also kept for fake_ane_last_error(). */
#define _DEFAULT_SOURCE 1 /* strdup, aligned_alloc */
#include "fake.h"
#include "fake_netplist.h"

#include "ane/darwin/ane_runtime.h"
#include "mil/mil.h"
#include "ir/fp16.h"
#include "data/sha256.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PORTS 256
#define MAX_LOADED 128 /* programs loaded at once per process (ane-formats.md 4.4) */

static atomic_long compiles, evaluations, budget = -1, loaded;
static atomic_int failing_loads;
static char subtype[32] = "";
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void fake_ane_set_compile_budget(long n) { atomic_store(&budget, n); }
long fake_ane_compiles(void) { return atomic_load(&compiles); }
long fake_ane_evaluations(void) { return atomic_load(&evaluations); }
void fake_ane_fail_loads(int n) { atomic_store(&failing_loads, n); }
void fake_ane_set_subtype(const char *s) {
    pthread_mutex_lock(&lock);
    snprintf(subtype, sizeof subtype, "%s", s ? s : "");
    pthread_mutex_unlock(&lock);
}

/* The engine subtype the fake reports: set by a test, else $FAKE_ANE_SUBTYPE, else "h13"
 * (an M1: the base engine, and seed 000's).
 * Returns a copy (valid until the next call on this thread). */
static const char *current_subtype(void) {
    static _Thread_local char copy[32];
    pthread_mutex_lock(&lock);
    if (!subtype[0]) {
        const char *env = getenv("FAKE_ANE_SUBTYPE");
        snprintf(subtype, sizeof subtype, "%s", env && *env ? env : "h13");
    }
    snprintf(copy, sizeof copy, "%s", subtype);
    pthread_mutex_unlock(&lock);
    return copy;
}

/* The simulated engine the fake compiles on: its own, without ane-sim's budgets (the
 * fake daemon keeps its own count, above). */
static af_sim_engine *sim_engine(void) {
    static af_sim_engine *e;
    pthread_mutex_lock(&lock);
    if (!e && (e = af_sim_engine_new())) af_ane_budget_set_limits(e, INT_MAX, INT_MAX);
    pthread_mutex_unlock(&lock);
    return e;
}

static long compile_budget(void) {
    long b = atomic_load(&budget);
    if (b < 0) {
        const char *env = getenv("FAKE_ANE_COMPILE_BUDGET");
        b = env && *env ? atol(env) : 119;
        atomic_store(&budget, b);
    }
    return b;
}

/* Foundation's NSTemporaryDirectory(): $TMPDIR or /tmp/, with a trailing slash. */
CFStringRef NSTemporaryDirectory(void);
CFStringRef NSTemporaryDirectory(void) {
    const char *t = getenv("TMPDIR");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%s", t && *t ? t : "/tmp", t && *t && t[strlen(t) - 1] == '/' ? "" : "/");
    return fake_autorelease((void *)fake_string(buf));
}

/* ---------------------------------------------------------------- _ANEIOSurfaceObject */

typedef struct { struct objc_object h; IOSurfaceRef s; } fsurfobj;

static void surfobj_dealloc(void *o) { fake_release(((fsurfobj *)o)->s); }
static id surfobj_new(Class self, SEL op, IOSurfaceRef s);
static IOSurfaceRef surfobj_surface(id self, SEL op) { (void)op; return ((fsurfobj *)self)->s; }
static const fake_method surfobj_cm[] = { { "objectWithIOSurface:", (void (*)(void))surfobj_new } };
static const fake_method surfobj_im[] = { { "ioSurface", (void (*)(void))surfobj_surface } };
static struct objc_class surfobj_meta = { NULL, 0, "_ANEIOSurfaceObject", NULL, surfobj_cm, 1, 0, NULL, 1 };
static struct objc_class c_surfobj = { &surfobj_meta, 0, "_ANEIOSurfaceObject", &fake_NSObject, surfobj_im, 1, 0, surfobj_dealloc, 0 };

static id surfobj_new(Class self, SEL op, IOSurfaceRef s) {
    (void)self; (void)op;
    uint8_t *base;
    size_t n;
    int locked;
    if (!fake_surface(s, &base, &n, &locked)) {
        fake_note("+[_ANEIOSurfaceObject objectWithIOSurface:]: the argument is not an IOSurfaceRef");
        return NULL;
    }
    fsurfobj *o = fake_new(&c_surfobj, sizeof *o);
    if (!o) return NULL;
    fake_retain(s);
    o->s = s;
    return fake_autorelease(o);
}

/* ---------------------------------------------------------------- _ANERequest */

typedef struct { struct objc_object h; CFTypeRef ins, in_idx, outs, out_idx, proc; } frequest;

static void request_dealloc(void *o) {
    frequest *r = o;
    fake_release((void *)r->ins);
    fake_release((void *)r->in_idx);
    fake_release((void *)r->outs);
    fake_release((void *)r->out_idx);
    fake_release((void *)r->proc);
}

static int surfaces_ok(CFTypeRef objs, CFTypeRef idx, const char *what) {
    CFIndex n = fake_array_count(objs);
    if (n < 0 || fake_array_count(idx) != n) {
        fake_note("+[_ANERequest requestWith...]: %s and their indices must be arrays of equal length", what);
        return 0;
    }
    for (CFIndex i = 0; i < n; i++) {
        int64_t v;
        if (!fake_is(fake_array_get(objs, i), &c_surfobj) || !fake_number(fake_array_get(idx, i), &v)) {
            fake_note("+[_ANERequest requestWith...]: %s[%ld] is not an _ANEIOSurfaceObject with an NSNumber index", what, (long)i);
            return 0;
        }
    }
    return 1;
}

static id request_new(Class self, SEL op, id ins, id in_idx, id outs, id out_idx, id weights_buffer, id perf_stats, id proc) {
    (void)op;
    int64_t p;
    if (!surfaces_ok(ins, in_idx, "inputs") || !surfaces_ok(outs, out_idx, "outputs")) return NULL;
    if (!fake_number(proc, &p) || (weights_buffer && !fake_is(weights_buffer, &c_surfobj))) {
        fake_note("+[_ANERequest requestWith...]: procedureIndex must be an NSNumber and weightsBuffer nil or a surface");
        return NULL;
    }
    (void)perf_stats;
    frequest *r = fake_new(self, sizeof *r);
    if (!r) return NULL;
    CFTypeRef *slots[5] = { &r->ins, &r->in_idx, &r->outs, &r->out_idx, &r->proc };
    id vals[5] = { ins, in_idx, outs, out_idx, proc };
    for (int i = 0; i < 5; i++) {
        fake_retain(vals[i]);
        *slots[i] = vals[i];
    }
    return fake_autorelease(r);
}

static const fake_method request_cm[] = {
    { "requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:perfStats:procedureIndex:", (void (*)(void))request_new },
};
static struct objc_class request_meta = { NULL, 0, "_ANERequest", NULL, request_cm, 1, 0, NULL, 1 };
static struct objc_class c_request = { &request_meta, 0, "_ANERequest", &fake_NSObject, NULL, 0, 0, request_dealloc, 0 };

/* ---------------------------------------------------------------- _ANEInMemoryModelDescriptor */

typedef struct { struct objc_object h; CFTypeRef mil, weights, options; int netplist; } fdesc;

static void desc_dealloc(void *o) {
    fake_release((void *)((fdesc *)o)->mil);
    fake_release((void *)((fdesc *)o)->weights);
    fake_release((void *)((fdesc *)o)->options);
}

/* weights: nil, or {"@model_path/...": {"offset": NSNumber, "data": NSData}}; for a
 * net.plist, keyed "weights.0" and "weights.1". */
static int weights_ok(CFTypeRef w, int netplist) {
    if (!w) return 1;
    if (fake_dict_count(w) < 0) {
        fake_note("+[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]: weights is not a dictionary");
        return 0;
    }
    for (CFIndex i = 0; i < fake_dict_count(w); i++) {
        const char *k = fake_string_text(fake_dict_key(w, i));
        CFTypeRef e = k ? fake_dict_get(w, k) : NULL;
        int64_t off;
        size_t n;
        bool key_ok = k && (netplist ? !strcmp(k, "weights.0") || !strcmp(k, "weights.1") : !strncmp(k, "@model_path/", 12));
        if (!key_ok || !fake_number(fake_dict_get(e, "offset"), &off) ||
            !fake_data_bytes(fake_dict_get(e, "data"), &n)) {
            fake_note("+[_ANEInMemoryModelDescriptor ...:weights:optionsPlist:]: weights entry %ld must map %s to "
                      "{offset: NSNumber, data: NSData}", (long)i, netplist ? "\"weights.0\" or \"weights.1\"" : "an \"@model_path/...\" string");
            return 0;
        }
    }
    return 1;
}

static id desc_make(Class self, id mil, id weights, id options, int netplist) {
    size_t n;
    if (fake_string_text(mil)) {
        fake_note("+[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]: the MIL text is an NSString; "
                  "it must be NSData holding UTF-8 (the real framework crashes on a string)");
        return NULL;
    }
    if (!fake_data_bytes(mil, &n) || !n) {
        fake_note("+[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]: the MIL text must be non-empty NSData");
        return NULL;
    }
    if (!weights_ok(weights, netplist)) return NULL;
    if (options && fake_dict_count(options) < 0) {
        fake_note("+[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]: optionsPlist must be nil or a dictionary");
        return NULL;
    }
    fdesc *d = fake_new(self, sizeof *d);
    if (!d) return NULL;
    fake_retain(mil);
    fake_retain(weights);
    fake_retain(options);
    d->mil = mil;
    d->weights = weights;
    d->options = options;
    d->netplist = netplist;
    return fake_autorelease(d);
}

static id desc_new(Class self, SEL op, id mil, id weights, id options) { (void)op; return desc_make(self, mil, weights, options, 0); }
static id desc_new_net(Class self, SEL op, id plist, id weights, id options) {
    (void)op;
    return desc_make(self, plist, weights, options, 1);
}

static const fake_method desc_cm[] = { { "modelWithMILText:weights:optionsPlist:", (void (*)(void))desc_new },
                                       { "modelWithNetworkDescription:weights:optionsPlist:", (void (*)(void))desc_new_net } };
static struct objc_class desc_meta = { NULL, 0, "_ANEInMemoryModelDescriptor", NULL, desc_cm, 2, 0, NULL, 1 };
static struct objc_class c_desc = { &desc_meta, 0, "_ANEInMemoryModelDescriptor", &fake_NSObject, NULL, 0, 0, desc_dealloc, 0 };

/* ---------------------------------------------------------------- _ANEInMemoryModel */

enum { CREATED, COMPILED, LOADED };

typedef struct {
    struct objc_object h;
    fdesc *desc;
    int state;
    char hex[200];
    mil_module mod;
    af_model *prog;
    int out_u8;      /* a net.plist whose output is UInt8: 2-byte cells, the low byte the value */
} fmodel;

static void model_dealloc(void *o) {
    fmodel *m = o;
    if (m->state == LOADED) atomic_fetch_sub(&loaded, 1);
    af_model_free(m->prog);
    af_graph_free(m->mod.g);
    fake_release(m->desc);
}

static id model_new(Class self, SEL op, id desc) {
    (void)op;
    if (!fake_is(desc, &c_desc)) {
        fake_note("+[_ANEInMemoryModel inMemoryModelWithDescriptor:]: the argument is not an _ANEInMemoryModelDescriptor");
        return NULL;
    }
    fmodel *m = fake_new(self, sizeof *m);
    if (!m) return NULL;
    fake_retain(desc);
    m->desc = (fdesc *)desc;
    /* SHA-256(MIL) _ SHA-256(options) _ SHA-256(weights), as issue #24 of maderix/ANE reports
     * (the fake hashes the options' keys and the weights' paths and bytes) */
    uint8_t dg[32];
    char hx[3][65];
    size_t n;
    const uint8_t *text = fake_data_bytes(m->desc->mil, &n);
    data_sha256(text, n, dg);
    data_sha256_hex(dg, hx[0]);
    data_sha256_ctx c;
    data_sha256_init(&c);
    for (CFIndex i = 0; i < fake_dict_count(m->desc->options); i++) {
        const char *k = fake_string_text(fake_dict_key(m->desc->options, i));
        if (k) data_sha256_update(&c, k, strlen(k) + 1);
    }
    data_sha256_final(&c, dg);
    data_sha256_hex(dg, hx[1]);
    data_sha256_init(&c);
    for (CFIndex i = 0; i < fake_dict_count(m->desc->weights); i++) {
        const char *k = fake_string_text(fake_dict_key(m->desc->weights, i));
        const uint8_t *b = fake_data_bytes(fake_dict_get(fake_dict_get(m->desc->weights, k), "data"), &n);
        data_sha256_update(&c, k, strlen(k) + 1);
        data_sha256_update(&c, b, n);
    }
    data_sha256_final(&c, dg);
    data_sha256_hex(dg, hx[2]);
    snprintf(m->hex, sizeof m->hex, "%.64s_%.64s_%.64s", hx[0], hx[1], hx[2]);
    return fake_autorelease(m);
}

static id model_hex(id self, SEL op) { (void)op; return fake_autorelease((void *)fake_string(((fmodel *)self)->hex)); }

static BOOL fail(id *err, id e) {
    if (err) *err = e;
    return NO;
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long len = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (len >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len + 1)) && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* The staged files must be there and hold what the descriptor holds. */
static id check_staged(fmodel *m, const char *dir) {
    char path[1400];
    size_t n, want_n;
    const char *main_file = m->desc->netplist ? "net.plist" : "model.mil";
    snprintf(path, sizeof path, "%s/%s", dir, main_file);
    char *text = read_file(path, &n);
    const uint8_t *want = fake_data_bytes(m->desc->mil, &want_n);
    if (!text)
        return fake_error("ANECCompile() FAILED: cannot read %s: write %s (and the weights) into "
                          "NSTemporaryDirectory()/<hexStringIdentifier>/ before compiling", path, main_file);
    bool same = n == want_n && !memcmp(text, want, n);
    free(text);
    if (!same) return fake_error("ANECCompile() FAILED: %s differs from the descriptor's MIL text", path);
    for (CFIndex i = 0; i < fake_dict_count(m->desc->weights); i++) {
        const char *k = fake_string_text(fake_dict_key(m->desc->weights, i));
        const uint8_t *b = fake_data_bytes(fake_dict_get(fake_dict_get(m->desc->weights, k), "data"), &want_n);
        snprintf(path, sizeof path, "%s/%s", dir, m->desc->netplist ? k : k + 12);
        char *disk = read_file(path, &n);
        same = disk && n == want_n && !memcmp(disk, b, n);
        free(disk);
        if (!same) return fake_error("ANECCompile() FAILED: %s is missing or differs from the descriptor's weights[\"%s\"]", path, k);
    }
    return NULL;
}

static BOOL model_compile(id self, SEL op, unsigned qos, id options, id *err) {
    (void)op; (void)qos;
    fmodel *m = (fmodel *)self;
    if (options && fake_dict_count(options) < 0) return fail(err, fake_error("compileWithQoS: options must be a dictionary"));
    long k = atomic_fetch_add(&compiles, 1) + 1;
    if (k > compile_budget())
        return fail(err, fake_error("ANECCompile() FAILED: compile %ld in this process; the daemon allows about %ld per "
                                    "process (restart the process or reuse compiled programs)", k, compile_budget()));
    if (m->state != CREATED) return fail(err, fake_error("compileWithQoS: the model is already compiled"));
    if (!m->desc->weights) {
        fake_note("compileWithQoS: failed silently: the descriptor's weights dictionary was nil (pass an empty dictionary)");
        return fail(err, NULL);
    }
    char dir[1200];
    const char *tmp = fake_string_text(NSTemporaryDirectory());
    snprintf(dir, sizeof dir, "%s%s", tmp, m->hex);
    id e = check_staged(m, dir);
    if (e) return fail(err, e);
    size_t n;
    const char *text = (const char *)fake_data_bytes(m->desc->mil, &n);
    if (m->desc->netplist) {
        size_t w0n = 0, w1n = 0;
        const uint8_t *w0 = fake_data_bytes(fake_dict_get(fake_dict_get(m->desc->weights, "weights.0"), "data"), &w0n);
        const uint8_t *w1 = fake_data_bytes(fake_dict_get(fake_dict_get(m->desc->weights, "weights.1"), "data"), &w1n);
        char why[600] = "";
        if (!fake_netplist_build((const uint8_t *)text, n, w0, w0n, w1, w1n, &m->mod, &m->out_u8, why, sizeof why))
            return fail(err, fake_error("ANECCompile() FAILED: %s", why));
    } else {
        mil_read_opts ro = { .source_name = "model.mil", .model_dir = dir };
        if (mil_parse(text, n, &ro, &m->mod)) return fail(err, fake_error("ANECCompile() FAILED: %s", af_error_message()));
    }
    if (m->mod.nin > MAX_PORTS || m->mod.nout > MAX_PORTS)
        return fail(err, fake_error("ANECCompile() FAILED: more than %d inputs or outputs", MAX_PORTS));
    /* The engine the fake stands for is ane-sim's model of it: the family's compiler walls
     * refuse here as ANECCompile would, and the run has the family's fp16 numerics. */
    af_compile_opts co = { .target = AF_TARGET_ANE_SIM, .sim_engine = sim_engine(), .family = ane_rt_family_of_subtype(current_subtype()),
                           .threads = 1, .via_mil = AF_OFF, .precision_check = AF_OFF }; /* a host heuristic, not the engine's */
    if (!(m->prog = af_compile(m->mod.g, m->mod.nin, m->mod.in, m->mod.nout, m->mod.out, &co)))
        return fail(err, fake_error("ANECCompile() FAILED: %s", af_error_message()));
    m->state = COMPILED;
    return YES;
}

static BOOL model_load(id self, SEL op, unsigned qos, id options, id *err) {
    (void)op; (void)qos; (void)options;
    fmodel *m = (fmodel *)self;
    if (m->state == CREATED) return fail(err, fake_error("loadWithQoS: the model is not compiled (call -compileWithQoS:options:error: first)"));
    if (m->state == LOADED) return YES;
    int busy = atomic_load(&failing_loads);
    if (busy > 0) {
        atomic_store(&failing_loads, busy - 1);
        return fail(err, fake_error("ANEProgramLoad() failed: no free program slot (the daemon reclaims them lazily; retry)"));
    }
    if (atomic_fetch_add(&loaded, 1) >= MAX_LOADED) {
        atomic_fetch_sub(&loaded, 1);
        return fail(err, fake_error("ANEProgramLoad() failed: %d programs are loaded in this process; unload one first", MAX_LOADED));
    }
    m->state = LOADED;
    return YES;
}

static BOOL model_unload(id self, SEL op, unsigned qos, id *err) {
    (void)op; (void)qos;
    fmodel *m = (fmodel *)self;
    if (m->state != LOADED) return fail(err, fake_error("unloadWithQoS: the model is not loaded"));
    atomic_fetch_sub(&loaded, 1);
    m->state = COMPILED;
    return YES;
}

/* The surface bound to port i of the program (inputs or outputs), checked. */
static id bind(fmodel *m, CFTypeRef objs, CFTypeRef idx, int is_in, uint8_t **base) {
    int n = is_in ? m->mod.nin : m->mod.nout;
    const char *what = is_in ? "input" : "output";
    if (fake_array_count(objs) != n)
        return fake_error("evaluate: the request binds %ld %s surfaces; the program has %d", (long)fake_array_count(objs), what, n);
    for (int i = 0; i < n; i++) base[i] = NULL;
    for (int k = 0; k < n; k++) {
        int64_t i;
        fake_number(fake_array_get(idx, k), &i);
        if (i < 0 || i >= n || base[i])
            return fake_error("evaluate: %s index %lld is out of range or bound twice", what, (long long)i);
        af_tensor *t = is_in ? m->mod.in[i] : m->mod.out[i];
        const char *name = is_in ? m->mod.in_names[i] : m->mod.out_names[i];
        size_t need = (size_t)af_shape_count(t->shape) * 2, have;
        int locked;
        fake_surface(((fsurfobj *)fake_array_get(objs, k))->s, &base[i], &have, &locked);
        if (have != need)
            return fake_error("evaluate: %s surface %d (%s) holds %zu bytes; the program declares %zu (fp16 elements of its "
                              "shape): surfaces bound in the wrong order or sized for another tensor", what, k, name, have, need);
        if (locked) return fake_error("evaluate: %s surface %d (%s) is still locked by the CPU", what, k, name);
    }
    return NULL;
}

static BOOL model_evaluate(id self, SEL op, unsigned qos, id options, id request, id *err) {
    (void)op; (void)qos; (void)options;
    fmodel *m = (fmodel *)self;
    if (m->state != LOADED)
        return fail(err, fake_error("evaluate: the program is not loaded (compile, then -loadWithQoS:options:error:)"));
    if (!fake_is(request, &c_request)) return fail(err, fake_error("evaluate: the request is not an _ANERequest"));
    frequest *r = (frequest *)request;
    uint8_t *ib[MAX_PORTS], *ob[MAX_PORTS];
    id e = bind(m, r->ins, r->in_idx, 1, ib);
    if (!e) e = bind(m, r->outs, r->out_idx, 0, ob);
    if (e) return fail(err, e);
    /* inputs are read whole before any output is written: an output may be an input's surface */
    af_buffer in[MAX_PORTS], out[MAX_PORTS];
    uint16_t *copies[MAX_PORTS] = { 0 };
    bool ok = true;
    for (int i = 0; i < m->mod.nin; i++) {
        int64_t n = af_shape_count(m->mod.in[i]->shape);
        ok &= (copies[i] = malloc((size_t)n * 2)) != NULL;
        if (copies[i]) memcpy(copies[i], ib[i], (size_t)n * 2);
        in[i] = (af_buffer){ copies[i], AF_F16, n };
    }
    for (int i = 0; i < m->mod.nout; i++) out[i] = (af_buffer){ ob[i], AF_F16, af_shape_count(m->mod.out[i]->shape) };
    ok = ok && af_run(m->prog, in, out) == AF_OK;
    const char *why = ok ? "" : af_error_message();
    for (int i = 0; i < m->mod.nin; i++) free(copies[i]);
    if (!ok) return fail(err, fake_error("evaluate: the program failed: %s", why));
    if (m->out_u8) { /* the engine writes the UInt8 value into the low byte of each 2-byte cell */
        uint16_t *cell = (uint16_t *)ob[0];
        for (int64_t k = 0; k < out[0].count; k++) {
            float v;
            ir_f16_to_f32_array(&cell[k], &v, 1);
            cell[k] = (uint16_t)(uint8_t)v;
        }
    }
    atomic_fetch_add(&evaluations, 1);
    return YES;
}

static const fake_method model_cm[] = { { "inMemoryModelWithDescriptor:", (void (*)(void))model_new } };
static const fake_method model_im[] = {
    { "hexStringIdentifier", (void (*)(void))model_hex },
    { "compileWithQoS:options:error:", (void (*)(void))model_compile },
    { "loadWithQoS:options:error:", (void (*)(void))model_load },
    { "evaluateWithQoS:options:request:error:", (void (*)(void))model_evaluate },
    { "unloadWithQoS:error:", (void (*)(void))model_unload },
};
static struct objc_class model_meta = { NULL, 0, "_ANEInMemoryModel", NULL, model_cm, 1, 0, NULL, 1 };
static struct objc_class c_model = { &model_meta, 0, "_ANEInMemoryModel", &fake_NSObject, model_im, 5, 0, model_dealloc, 0 };

/* ---------------------------------------------------------------- _ANEDeviceInfo */

static id device_subtype(Class self, SEL op) {
    (void)self; (void)op;
    return fake_autorelease((void *)fake_string(current_subtype()));
}
static const fake_method device_cm[] = { { "aneSubType", (void (*)(void))device_subtype } };
static struct objc_class device_meta = { NULL, 0, "_ANEDeviceInfo", NULL, device_cm, 1, 0, NULL, 1 };
static struct objc_class c_device = { &device_meta, 0, "_ANEDeviceInfo", &fake_NSObject, NULL, 0, 0, NULL, 0 };

/* ---------------------------------------------------------------- a probe for the trampoline */

/* +[FakeTrampolineProbe mix:...]: integer and floating-point arguments interleaved,
 * more than fit in registers, so a test can check that objc_msgSend passes each one
 * exactly. Returns a weighted sum no two arguments can fake. */
static double probe_mix(Class self, SEL op, long a, double b, long c, float d, long e, double f, long g, long h, double i,
                        long j, float k) {
    (void)self; (void)op;
    return (double)a + 2 * b + 3 * (double)c + 4 * (double)d + 5 * (double)e + 6 * f + 7 * (double)g + 8 * (double)h + 9 * i +
           10 * (double)j + 11 * (double)k;
}
static const fake_method probe_cm[] = { { "mix:b:c:d:e:f:g:h:i:j:k:", (void (*)(void))probe_mix } };
static struct objc_class probe_meta = { NULL, 0, "FakeTrampolineProbe", NULL, probe_cm, 1, 0, NULL, 1 };
static struct objc_class c_probe = { &probe_meta, 0, "FakeTrampolineProbe", &fake_NSObject, NULL, 0, 0, NULL, 0 };

static void register_all(void) {
    Class all[] = { &c_desc, &c_model, &c_request, &c_surfobj, &c_device, &c_probe };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fake_register(all[i]);
}

FAKE_HIDDEN void fake_register_all(void);
void fake_register_all(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_all);
}
