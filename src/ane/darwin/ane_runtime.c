/* The Neural Engine runtime through the private AppleNeuralEngine framework, in plain C
 * (objc_msgSend cast to each selector's exact type, CoreFoundation objects for the
 * toll-free bridged NSData / NSDictionary / NSArray / NSNumber / NSString).
 * The call sequence and its traps (maderix-ane.md section 2, ane-formats.md 4.2):
 *   descriptor  +[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]
 *               MIL as NSData (an NSString crashes), weights {path: {offset: 0, data}}
 *               or an empty dictionary (nil makes the compile fail silently), options nil;
 *               a net.plist program (seed 004) through
 *               +modelWithNetworkDescription:weights:optionsPlist: with the XML as NSData
 *               and weights keyed by file name (weights.0, weights.1), staged as
 *               net.plist, weights.0 and weights.1
 *   model       +[_ANEInMemoryModel inMemoryModelWithDescriptor:], its
 *               -hexStringIdentifier names the temporary directory the daemon reads:
 *               <NSTemporaryDirectory>/<hex>/model.mil and weights/weight.bin, written
 *               before compiling
 *   compile     -compileWithQoS:options:error:, then -loadWithQoS:options:error: (one
 *               retry after 100 ms: the daemon reclaims slots lazily)
 *   I/O         one IOSurface per port, a flat byte buffer (width = bytes, height 1,
 *               the form every known user creates), wrapped by
 *               +[_ANEIOSurfaceObject objectWithIOSurface:]; surfaces bound in MIL
 *               argument order (index i = argument i), each exactly its tensor's size
 *               (Orion's order-by-MIL-name rule; maderix issue #47's "ascending sizes"
 *               report conflicts with it and is not applied). IOSurface allocates
 *               whole pages, so the 128-byte base alignment PR #35 asks of M5 holds;
 *               the ~48 KiB minimum Orion reports is the program's shape to choose
 *   request     +[_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:
 *               weightsBuffer:perfStats:procedureIndex:], built once per handle, reused
 *   evaluate    -evaluateWithQoS:options:request:error:, synchronous; its BOOL checked
 *   unload      -unloadWithQoS:error:, release, remove the temporary directory
 * Every call's result is checked; failures return an af_status carrying the
 * framework's -localizedDescription. Factory results are autoreleased: everything kept
 * is retained, and every entry point runs inside its own autorelease pool. */
#define _DEFAULT_SOURCE 1 /* usleep, confstr on glibc */
#define _DARWIN_C_SOURCE 1
#include "ane/darwin/ane_runtime.h"
#include "ane/darwin/apple_api.h"
#include "data/sha256.h"
#include "ir/ir.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEIGHT_KEY "@model_path/weights/weight.bin"
#define A ane_apple

/* What a program is compiled from: MIL text and its weight file, or a net.plist program
 * (native layers, seed 004) and its weights.0 / weights.1 files. */
typedef struct {
    bool netplist;
    const char *text;   /* MIL text, or the net.plist XML */
    size_t len;
    const uint8_t *w[2];/* MIL: w[0] the MILBlob file; net.plist: weights.0, weights.1 (NULL: none) */
    size_t wn[2];
} rt_source;

/* A compiled and loaded program, shared by every handle on the same content. */
typedef struct ane_rt_model {
    struct ane_rt_model *next; /* the cache list */
    uint8_t key[32];
    int refs;
    id model;
    char dir[1024]; /* the staged files */
} ane_rt_model;

/* A caller's handle: its own surfaces and request on a shared model. */
struct ane_rt_program {
    ane_rt_model *m;
    ane_rt_ports ports;
    id request;
    id in_obj[ANE_RT_MAX_PORTS], out_obj[ANE_RT_MAX_PORTS];
    IOSurfaceRef in_surf[ANE_RT_MAX_PORTS], out_surf[ANE_RT_MAX_PORTS];
    int alias[ANE_RT_MAX_PORTS]; /* per output: the input surface it writes into, or -1 */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* loader and cache */
static char loaded_path[1024];
static Class c_desc, c_model, c_request, c_surface;
static ane_rt_model *cache;
static atomic_llong compiles;
static atomic_llong budget = ANE_RT_COMPILE_BUDGET;

int64_t ane_rt_compile_count(void) { return (int64_t)atomic_load(&compiles); }
int64_t ane_rt_compile_budget(void) { return (int64_t)atomic_load(&budget); }
void ane_rt_set_compile_budget(int64_t n) {
    atomic_store(&budget, n < 0 ? 0 : n);
}

const char *ane_rt_framework(void) { return loaded_path[0] ? loaded_path : NULL; }

/* ---------------------------------------------------------------- loading */

af_status ane_rt_open(const char *framework_path) {
    const char *path = framework_path ? framework_path : ANE_RT_SYSTEM_FRAMEWORK;
    if (strlen(path) >= sizeof loaded_path) return ir_fail(AF_ERR_INVALID, "ane: framework path too long: %s", path);
    if (pthread_mutex_lock(&lock)) return ir_fail(AF_ERR_INVALID, "ane: loader lock failed");
    af_status st = AF_OK;
    if (loaded_path[0]) {
        if (framework_path && strcmp(path, loaded_path))
            st = ir_fail(AF_ERR_INVALID, "ane: %s is already loaded in this process; cannot also load %s", loaded_path, path);
        pthread_mutex_unlock(&lock);
        return st;
    }
    st = ane_apple_load(path);
    if (!st) {
        static const char *const names[4] = { "_ANEInMemoryModelDescriptor", "_ANEInMemoryModel", "_ANERequest",
                                              "_ANEIOSurfaceObject" };
        Class *slots[4] = { &c_desc, &c_model, &c_request, &c_surface };
        for (int i = 0; i < 4 && !st; i++)
            if (!(*slots[i] = A.objc_getClass(names[i])))
                st = ir_fail(AF_ERR_UNSUPPORTED, "ane: %s loaded but has no class %s: this macOS changed the private API",
                             path, names[i]);
        if (!st) snprintf(loaded_path, sizeof loaded_path, "%s", path);
        else ane_apple_unload(); /* a later call may name the right framework */
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---------------------------------------------------------------- CoreFoundation helpers */

static CFStringRef str(const char *s) { return A.CFStringCreateWithCString(NULL, s, kCFStringEncodingUTF8); }

static CFNumberRef num(int64_t v) { return A.CFNumberCreate(NULL, kCFNumberSInt64Type, &v); }

static CFDictionaryRef dict(CFIndex n, const void **keys, const void **vals) {
    return A.CFDictionaryCreate(NULL, keys, vals, n, A.kCFTypeDictionaryKeyCallBacks, A.kCFTypeDictionaryValueCallBacks);
}

static CFArrayRef array(CFIndex n, const void **vals) { return A.CFArrayCreate(NULL, vals, n, A.kCFTypeArrayCallBacks); }

static void release(const void *cf) {
    if (cf) A.CFRelease(cf);
}

static SEL sel(const char *name) { return A.sel_registerName(name); }

static void obj_release(id o) {
    if (o) ANE_MSG(void (*)(id, SEL))(o, sel("release"));
}

static id obj_retain(id o) { return o ? ANE_MSG(id (*)(id, SEL))(o, sel("retain")) : o; }

/* A CFString's UTF-8 text into buf; false when it is not a string or does not fit. */
static bool cstring(CFTypeRef s, char *buf, size_t n) {
    return s && A.CFGetTypeID(s) == A.CFStringGetTypeID() && A.CFStringGetCString((CFStringRef)s, buf, (CFIndex)n, kCFStringEncodingUTF8);
}

/* An NSError's localizedDescription, as text, into buf. */
static const char *describe(id err, char *buf, size_t n) {
    if (!err) snprintf(buf, n, "the framework returned no error object");
    else if (!cstring((CFTypeRef)ANE_MSG(id (*)(id, SEL))(err, sel("localizedDescription")), buf, n))
        snprintf(buf, n, "(an error without a readable description)");
    return buf;
}

/* ---------------------------------------------------------------- files the daemon reads */

/* The per-user temporary directory, as NSTemporaryDirectory() gives it, with a slash. */
static af_status temp_dir(char *buf, size_t n) {
    buf[0] = 0;
    if (A.NSTemporaryDirectory && !cstring(A.NSTemporaryDirectory(), buf, n))
        return ir_fail(AF_ERR_IO, "ane: NSTemporaryDirectory() gave no usable path");
#if defined(__APPLE__)
    if (!buf[0] && confstr(_CS_DARWIN_USER_TEMP_DIR, buf, n) == 0) buf[0] = 0;
#endif
    if (!buf[0]) snprintf(buf, n, "/tmp/");
    size_t k = strlen(buf);
    if (buf[k - 1] != '/' && k + 1 < n) memcpy(buf + k, "/", 2);
    return AF_OK;
}

static af_status write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return ir_fail(AF_ERR_IO, "ane: cannot create %s", path);
    bool ok = fwrite(data, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? AF_OK : ir_fail(AF_ERR_IO, "ane: cannot write %s", path);
}

/* The files the daemon reads from <tmp>/<hexStringIdentifier>/: model.mil and
 * weights/weight.bin, or net.plist, weights.0 and weights.1. */
static const char *const mil_files[2] = {"model.mil", "weights/weight.bin"};
static const char *const net_files[3] = {"net.plist", "weights.0", "weights.1"};

static af_status stage(ane_rt_model *m, const rt_source *src) {
    char h[256], tmp[900], path[1200];
    if (!cstring((CFTypeRef)ANE_MSG(id (*)(id, SEL))(m->model, sel("hexStringIdentifier")), h, sizeof h) || !h[0] ||
        strchr(h, '/'))
        return ir_fail(AF_ERR_UNSUPPORTED, "ane: the model gave no usable -hexStringIdentifier");
    af_status st = temp_dir(tmp, sizeof tmp);
    if (st) return st;
    int k = snprintf(m->dir, sizeof m->dir, "%s%s", tmp, h);
    if (k < 0 || (size_t)k >= sizeof m->dir) return ir_fail(AF_ERR_IO, "ane: temporary path too long");
    snprintf(path, sizeof path, "%s/weights", m->dir);
    if ((mkdir(m->dir, 0700) && access(m->dir, W_OK)) || (!src->netplist && mkdir(path, 0700) && access(path, W_OK)))
        return ir_fail(AF_ERR_IO, "ane: cannot create %s: %s (the temporary directory must exist and be writable)", path, strerror(errno));
    snprintf(path, sizeof path, "%s/%s", m->dir, src->netplist ? net_files[0] : mil_files[0]);
    st = write_file(path, src->text, src->len);
    for (int i = 0; i < 2 && !st; i++) {
        if (!src->w[i] && !src->netplist) continue;
        snprintf(path, sizeof path, "%s/%s", m->dir, src->netplist ? net_files[1 + i] : mil_files[1]);
        st = write_file(path, src->w[i] ? (const void *)src->w[i] : "", src->w[i] ? src->wn[i] : 0);
    }
    return st;
}

static void unstage(ane_rt_model *m) {
    if (!m->dir[0]) return;
    char path[1200];
    const char *files[5] = {mil_files[1], mil_files[0], net_files[0], net_files[1], net_files[2]};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", m->dir, files[i]);
        unlink(path);
        if (i == 0) {
            snprintf(path, sizeof path, "%s/weights", m->dir);
            rmdir(path);
        }
    }
    rmdir(m->dir); /* fails harmlessly when the daemon left its own files */
}

/* ---------------------------------------------------------------- compiling a model */

static void model_destroy(ane_rt_model *m) {
    if (!m) return;
    if (m->model) {
        id err = NULL;
        ANE_MSG(BOOL (*)(id, SEL, unsigned, id *))(m->model, sel("unloadWithQoS:error:"), ANE_RT_QOS, &err);
        obj_release(m->model); /* an unload failure leaves nothing to do but let go */
    }
    unstage(m);
    free(m);
}

static BOOL send_qos(id model, const char *selector, CFDictionaryRef options, id *err) {
    *err = NULL;
    return ANE_MSG(BOOL (*)(id, SEL, unsigned, id, id *))(model, sel(selector), ANE_RT_QOS, (id)options, err);
}

/* The weights dictionary: {name: {offset: 0, data: NSData}} per file (the MIL path's
 * one weight.bin under WEIGHT_KEY; a net.plist's weights.0 and weights.1 keyed by file
 * name, as ANEForge keys them), @{} when there are none (nil fails the compile). */
static CFDictionaryRef weights_dict(const rt_source *src) {
    const char *names[2] = {src->netplist ? net_files[1] : WEIGHT_KEY, net_files[2]};
    const void *keys[2] = {NULL, NULL}, *vals[2] = {NULL, NULL};
    CFNumberRef zero = num(0);
    CFStringRef k_off = str("offset"), k_data = str("data");
    CFIndex n = 0;
    bool ok = zero && k_off && k_data;
    for (int i = 0; i < (src->netplist ? 2 : 1) && ok; i++) {
        if (!src->w[i] && !src->netplist) continue;
        CFDataRef blob = A.CFDataCreate(NULL, src->w[i] ? src->w[i] : (const UInt8 *)"", src->w[i] ? (CFIndex)src->wn[i] : 0);
        const void *ek[2] = {k_off, k_data}, *ev[2] = {zero, blob};
        CFDictionaryRef entry = blob ? dict(2, ek, ev) : NULL;
        release(blob);
        keys[n] = str(names[i]);
        vals[n] = entry;
        ok = keys[n] && entry;
        n++;
    }
    CFDictionaryRef w = ok ? dict(n, keys, vals) : NULL;
    for (CFIndex i = 0; i < n; i++) {
        release(keys[i]);
        release(vals[i]);
    }
    release(zero);
    release(k_off);
    release(k_data);
    return w;
}

/* Descriptor, model, staged files, compile, load. m->model is set only when loaded. */
static af_status model_compile(ane_rt_model *m, const rt_source *src) {
    char why[512];
    CFDataRef text = A.CFDataCreate(NULL, (const UInt8 *)src->text, (CFIndex)src->len);
    CFDictionaryRef weights = weights_dict(src);
    CFDictionaryRef empty = dict(0, NULL, NULL);
    af_status st = AF_OK;
    if (!text || !weights || !empty)
        st = ir_fail(AF_ERR_NOMEM, "ane: CoreFoundation could not create the compile arguments (out of memory)");
    id desc = NULL, model = NULL, err = NULL;
    if (!st) {
        const char *selector = src->netplist ? "modelWithNetworkDescription:weights:optionsPlist:"
                                             : "modelWithMILText:weights:optionsPlist:";
        desc = ANE_MSG(id (*)(Class, SEL, id, id, id))(c_desc, sel(selector), (id)text, (id)weights, NULL);
        if (!desc)
            st = ir_fail(AF_ERR_UNSUPPORTED, "ane: _ANEInMemoryModelDescriptor rejected the %s and weights",
                         src->netplist ? "net.plist" : "MIL text");
    }
    if (!st) {
        model = ANE_MSG(id (*)(Class, SEL, id))(c_model, sel("inMemoryModelWithDescriptor:"), desc);
        if (!model) st = ir_fail(AF_ERR_UNSUPPORTED, "ane: _ANEInMemoryModel could not be created from the descriptor");
    }
    if (!st) {
        m->model = model; /* borrowed until loaded; stage reads its identifier */
        st = stage(m, src);
        m->model = NULL;
    }
    if (!st) {
        BOOL ok = send_qos(model, "compileWithQoS:options:error:", empty, &err);
        atomic_fetch_add(&compiles, 1); /* a failed compile still spends the daemon's budget */
        if (!ok) st = ir_fail(AF_ERR_UNSUPPORTED, "ane: compile failed: %s", describe(err, why, sizeof why));
    }
    if (!st) {
        BOOL ok = send_qos(model, "loadWithQoS:options:error:", empty, &err);
        if (!ok) { /* the daemon frees program slots lazily: give it a moment, once */
            usleep(100000);
            ok = send_qos(model, "loadWithQoS:options:error:", empty, &err);
        }
        if (!ok) st = ir_fail(AF_ERR_UNSUPPORTED, "ane: load failed (after one retry): %s", describe(err, why, sizeof why));
        else m->model = obj_retain(model);
    }
    release(text);
    release(weights);
    release(empty);
    return st;
}

/* Takes the cached model for key, or compiles a new one and caches it. */
static af_status model_get(const uint8_t key[32], const rt_source *src, ane_rt_model **out) {
    if (pthread_mutex_lock(&lock)) return ir_fail(AF_ERR_INVALID, "ane: cache lock failed");
    for (ane_rt_model *m = cache; m; m = m->next)
        if (!memcmp(m->key, key, 32)) {
            m->refs++;
            *out = m;
            pthread_mutex_unlock(&lock);
            return AF_OK;
        }
    af_status st = AF_OK;
    ane_rt_model *m = NULL;
    if (atomic_load(&compiles) >= atomic_load(&budget))
        st = ir_fail(AF_ERR_UNSUPPORTED,
                     "ane: this process has compiled %lld programs, its budget (the ANE daemon fails after about 119 "
                     "compiles per process); reuse compiled programs (feed weights as inputs) or restart the process",
                     (long long)atomic_load(&compiles));
    else if (!(m = calloc(1, sizeof *m)))
        st = ir_fail(AF_ERR_NOMEM, "ane: out of memory");
    if (!st) {
        memcpy(m->key, key, 32);
        m->refs = 1;
        st = model_compile(m, src);
    }
    if (st) model_destroy(m);
    else {
        m->next = cache;
        cache = m;
        *out = m;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

static void model_put(ane_rt_model *m) {
    if (!m || pthread_mutex_lock(&lock)) return;
    bool last = --m->refs == 0;
    if (last)
        for (ane_rt_model **q = &cache; *q; q = &(*q)->next)
            if (*q == m) { *q = m->next; break; }
    pthread_mutex_unlock(&lock);
    if (last) model_destroy(m);
}

/* ---------------------------------------------------------------- surfaces and request */

static IOSurfaceRef surface(size_t bytes) {
    CFNumberRef b = num((int64_t)bytes), one = num(1), zero = num(0);
    const void *keys[] = { *A.kIOSurfaceWidth, *A.kIOSurfaceHeight, *A.kIOSurfaceBytesPerElement, *A.kIOSurfaceBytesPerRow,
                           *A.kIOSurfaceAllocSize, *A.kIOSurfacePixelFormat };
    const void *vals[] = { b, one, one, b, b, zero };
    CFDictionaryRef props = b && one && zero ? dict(6, keys, vals) : NULL;
    IOSurfaceRef s = props ? A.IOSurfaceCreate(props) : NULL;
    release(props);
    release(b);
    release(one);
    release(zero);
    if (s && A.IOSurfaceGetAllocSize(s) < bytes) { /* never trust a short buffer with a memcpy */
        release(s);
        s = NULL;
    }
    return s;
}

static af_status build_request(ane_rt_program *p) {
    const void *ins[ANE_RT_MAX_PORTS], *outs[ANE_RT_MAX_PORTS], *ii[ANE_RT_MAX_PORTS], *oi[ANE_RT_MAX_PORTS];
    CFNumberRef idx[ANE_RT_MAX_PORTS];
    int n = p->ports.nin > p->ports.nout ? p->ports.nin : p->ports.nout;
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= (idx[i] = num(i)) != NULL;
    for (int i = 0; i < p->ports.nin; i++) { ins[i] = p->in_obj[i]; ii[i] = idx[i]; }
    for (int i = 0; i < p->ports.nout; i++) {
        outs[i] = p->alias[i] >= 0 ? p->in_obj[p->alias[i]] : p->out_obj[i];
        oi[i] = idx[i];
    }
    CFArrayRef a_in = ok ? array(p->ports.nin, ins) : NULL, a_ii = ok ? array(p->ports.nin, ii) : NULL;
    CFArrayRef a_out = ok ? array(p->ports.nout, outs) : NULL, a_oi = ok ? array(p->ports.nout, oi) : NULL;
    CFNumberRef zero = num(0);
    id req = NULL;
    if (a_in && a_ii && a_out && a_oi && zero)
        req = ANE_MSG(id (*)(Class, SEL, id, id, id, id, id, id, id))(
            c_request, sel("requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:perfStats:procedureIndex:"),
            (id)a_in, (id)a_ii, (id)a_out, (id)a_oi, NULL, NULL, (id)zero);
    if (req) {
        obj_release(p->request);
        p->request = obj_retain(req);
    }
    release(a_in);
    release(a_ii);
    release(a_out);
    release(a_oi);
    release(zero);
    for (int i = 0; i < n; i++) release(idx[i]);
    return req ? AF_OK : ir_fail(AF_ERR_UNSUPPORTED, "ane: _ANERequest refused the %d input and %d output surfaces",
                                 p->ports.nin, p->ports.nout);
}

static af_status make_ports(ane_rt_program *p) {
    for (int k = 0; k < p->ports.nin + p->ports.nout; k++) {
        bool in = k < p->ports.nin;
        int i = in ? k : k - p->ports.nin;
        int64_t n = in ? p->ports.in_count[i] : p->ports.out_count[i];
        IOSurfaceRef sf = surface((size_t)n * 2);
        if (!sf) return ir_fail(AF_ERR_NOMEM, "ane: IOSurfaceCreate failed for %lld bytes", (long long)n * 2);
        id obj = ANE_MSG(id (*)(Class, SEL, IOSurfaceRef))(c_surface, sel("objectWithIOSurface:"), sf);
        if (in) { p->in_surf[i] = sf; p->in_obj[i] = obj_retain(obj); }
        else { p->out_surf[i] = sf; p->out_obj[i] = obj_retain(obj); p->alias[i] = -1; }
        if (!obj) return ir_fail(AF_ERR_UNSUPPORTED, "ane: _ANEIOSurfaceObject could not wrap a %lld-byte surface", (long long)n * 2);
    }
    return build_request(p);
}

static void program_free(ane_rt_program *p) {
    if (!p) return;
    obj_release(p->request);
    for (int i = 0; i < ANE_RT_MAX_PORTS; i++) {
        obj_release(p->in_obj[i]);
        obj_release(p->out_obj[i]);
        release(p->in_surf[i]);
        release(p->out_surf[i]);
    }
    model_put(p->m);
    free(p);
}

/* ---------------------------------------------------------------- the API */

static af_status check_ports(const ane_rt_ports *ports) {
    if (!ports || ports->nin < 0 || ports->nout < 1 || ports->nin > ANE_RT_MAX_PORTS || ports->nout > ANE_RT_MAX_PORTS)
        return ir_fail(AF_ERR_INVALID, "ane: a program needs 0..%d inputs and 1..%d outputs", ANE_RT_MAX_PORTS, ANE_RT_MAX_PORTS);
    for (int k = 0; k < ports->nin + ports->nout; k++) {
        int64_t n = k < ports->nin ? ports->in_count[k] : ports->out_count[k - ports->nin];
        if (n < 1 || n > ((int64_t)1 << 28))
            return ir_fail(AF_ERR_INVALID, "ane: %s %d has %lld elements; each port holds 1 .. 2^28 fp16 values",
                           k < ports->nin ? "input" : "output", k < ports->nin ? k : k - ports->nin, (long long)n);
    }
    return AF_OK;
}

static af_status compile_source(const rt_source *src, const ane_rt_ports *ports, ane_rt_program **out) {
    af_status st = check_ports(ports);
    if (st) return st;
    if (!ane_rt_framework())
        return ir_fail(AF_ERR_UNSUPPORTED, "ane: no AppleNeuralEngine framework loaded; call ane_rt_open first");
    uint8_t key[32];
    data_sha256_ctx h;
    data_sha256_init(&h);
    data_sha256_update(&h, src->netplist ? "net.plist\0" : "mil\0", src->netplist ? 10 : 4);
    data_sha256_update(&h, src->text, src->len);
    for (int i = 0; i < 2; i++) {
        data_sha256_update(&h, "\0weights\0", 9);
        if (src->w[i]) data_sha256_update(&h, src->w[i], src->wn[i]);
    }
    data_sha256_final(&h, key);

    void *pool = A.objc_autoreleasePoolPush();
    ane_rt_program *p = calloc(1, sizeof *p);
    st = p ? AF_OK : ir_fail(AF_ERR_NOMEM, "ane: out of memory");
    if (!st) {
        p->ports = *ports;
        st = model_get(key, src, &p->m);
    }
    if (!st) st = make_ports(p);
    if (st) program_free(p);
    else *out = p;
    A.objc_autoreleasePoolPop(pool);
    return st;
}

af_status ane_rt_compile(const char *mil, size_t mil_len, const uint8_t *weights, size_t weights_len,
                         const ane_rt_ports *ports, ane_rt_program **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "ane: out is NULL");
    *out = NULL;
    if (!mil || !mil_len) return ir_fail(AF_ERR_INVALID, "ane: no MIL text");
    if (weights && !weights_len) weights = NULL;
    rt_source src = {.text = mil, .len = mil_len, .w = {weights, NULL}, .wn = {weights_len, 0}};
    return compile_source(&src, ports, out);
}

af_status ane_rt_compile_netplist(const char *plist, size_t plist_len, const uint8_t *w0, size_t w0_len,
                                  const uint8_t *w1, size_t w1_len, const ane_rt_ports *ports, ane_rt_program **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "ane: out is NULL");
    *out = NULL;
    if (!plist || !plist_len) return ir_fail(AF_ERR_INVALID, "ane: no net.plist text");
    rt_source src = {.netplist = true, .text = plist, .len = plist_len, .w = {w0, w1}, .wn = {w0 ? w0_len : 0, w1 ? w1_len : 0}};
    return compile_source(&src, ports, out);
}

af_status ane_rt_alias(ane_rt_program *p, int o, int i) {
    if (!p || o < 0 || o >= p->ports.nout || i < 0 || i >= p->ports.nin)
        return ir_fail(AF_ERR_INVALID, "ane: alias of output %d onto input %d is out of range", o, i);
    if (p->ports.out_count[o] != p->ports.in_count[i])
        return ir_fail(AF_ERR_SHAPE, "ane: output %d (%lld values) and input %d (%lld values) differ in size; only equal surfaces alias",
                       o, (long long)p->ports.out_count[o], i, (long long)p->ports.in_count[i]);
    void *pool = A.objc_autoreleasePoolPush();
    int was = p->alias[o];
    p->alias[o] = i;
    af_status st = build_request(p);
    if (st) p->alias[o] = was;
    A.objc_autoreleasePoolPop(pool);
    return st;
}

static af_status copy_surface(IOSurfaceRef s, void *host, size_t bytes, bool to_surface) {
    uint32_t seed = 0;
    IOSurfaceLockOptions mode = to_surface ? 0 : kIOSurfaceLockReadOnly;
    if (A.IOSurfaceLock(s, mode, &seed) != 0) return ir_fail(AF_ERR_IO, "ane: IOSurfaceLock failed");
    void *base = A.IOSurfaceGetBaseAddress(s);
    if (base) {
        if (to_surface) memcpy(base, host, bytes);
        else memcpy(host, base, bytes);
    }
    bool unlocked = A.IOSurfaceUnlock(s, mode, &seed) == 0;
    if (!base) return ir_fail(AF_ERR_IO, "ane: a surface has no base address");
    return unlocked ? AF_OK : ir_fail(AF_ERR_IO, "ane: IOSurfaceUnlock failed");
}

af_status ane_rt_input_io(ane_rt_program *p, int i, uint16_t *host, int to_host) {
    if (!p || !host || i < 0 || i >= p->ports.nin) return ir_fail(AF_ERR_INVALID, "ane: input %d is out of range or the buffer is NULL", i);
    return copy_surface(p->in_surf[i], host, (size_t)p->ports.in_count[i] * 2, !to_host);
}

af_status ane_rt_eval(ane_rt_program *p, const uint16_t *const *in, uint16_t *const *out) {
    if (!p || (p->ports.nin && !in)) return ir_fail(AF_ERR_INVALID, "ane: eval needs a program and its input array");
    char why[512];
    for (int i = 0; i < p->ports.nin; i++) {
        if (!in[i]) continue; /* resident state already in the surface */
        af_status st = copy_surface(p->in_surf[i], (void *)in[i], (size_t)p->ports.in_count[i] * 2, true);
        if (st) return st;
    }
    void *pool = A.objc_autoreleasePoolPush();
    CFDictionaryRef empty = dict(0, NULL, NULL);
    id err = NULL;
    BOOL ok = empty && ANE_MSG(BOOL (*)(id, SEL, unsigned, id, id, id *))(
                           p->m->model, sel("evaluateWithQoS:options:request:error:"), ANE_RT_QOS, (id)empty, p->request, &err);
    af_status st = ok ? AF_OK : ir_fail(AF_ERR_UNSUPPORTED, "ane: evaluate failed: %s", describe(err, why, sizeof why));
    release(empty);
    A.objc_autoreleasePoolPop(pool);
    for (int i = 0; !st && out && i < p->ports.nout; i++)
        if (out[i] && p->alias[i] < 0) st = copy_surface(p->out_surf[i], out[i], (size_t)p->ports.out_count[i] * 2, false);
    return st;
}

void ane_rt_release(ane_rt_program *p) {
    if (!p) return;
    void *pool = A.objc_autoreleasePoolPush();
    program_free(p);
    A.objc_autoreleasePoolPop(pool);
}
