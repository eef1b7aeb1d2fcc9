/* The Neural Engine runtime through the private AppleNeuralEngine framework, in plain C
 * (objc_msgSend cast to each selector's exact signature, CoreFoundation objects for
 * the toll-free bridged NSData / NSDictionary / NSArray / NSNumber / NSString).
 * The call sequence and its traps (maderix-ane.md section 2, ane-formats.md 4.2):
 *   descriptor  +[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]
 *               MIL as NSData (an NSString crashes), weights {path: {offset: 0, data}}
 *               or an empty dictionary (never nil), options nil
 *   model       +[_ANEInMemoryModel inMemoryModelWithDescriptor:], its
 *               -hexStringIdentifier names the temp directory the daemon reads:
 *               $TMPDIR/<hex>/model.mil and weights/weight.bin, written before compiling
 *   compile     -compileWithQoS:options:error:, then -loadWithQoS:options:error: (one
 *               retry after 100 ms: the daemon reclaims slots lazily)
 *   I/O         one IOSurface per port, a flat byte buffer (width = bytes, height 1),
 *               wrapped by +[_ANEIOSurfaceObject objectWithIOSurface:]
 *   request     +[_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:
 *               weightsBuffer:perfStats:procedureIndex:], built once, reused
 *   evaluate    -evaluateWithQoS:options:request:error:, synchronous
 *   unload      -unloadWithQoS:error:, release, remove the temp directory
 * Every call's result is checked; failures return an af_status with the framework's
 * error description. */
#define _DARWIN_C_SOURCE 1
#define _DEFAULT_SOURCE 1 /* usleep on glibc, for the Linux stub compile */
#include "ane/darwin/ane_runtime.h"
#include "data/sha256.h"
#include "ir/ir.h"

#include <CoreFoundation/CoreFoundation.h>
#include <IOSurface/IOSurface.h>
#include <dlfcn.h>
#include <objc/message.h>
#include <objc/runtime.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The autorelease pool entry points (exported by libobjc, not in its public headers). */
void *objc_autoreleasePoolPush(void);
void objc_autoreleasePoolPop(void *pool);

/* objc_msgSend is declared void(void): each call casts it to the selector's exact type.
 * Going through a returned pointer keeps compilers from second-guessing the cast. */
typedef void (*af_imp)(void);
static af_imp msg_send(void) { return (af_imp)objc_msgSend; }
#define MSG(type) ((type)msg_send())

#define ANE_FRAMEWORK "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework/AppleNeuralEngine"
#define WEIGHT_KEY "@model_path/weights/weight.bin"

struct af_ane_program {
    struct af_ane_program *next; /* the cache list */
    uint8_t key[32];
    int refs;
    id model, request;
    id in_obj[AF_ANE_MAX_PORTS], out_obj[AF_ANE_MAX_PORTS];
    IOSurfaceRef in_surf[AF_ANE_MAX_PORTS], out_surf[AF_ANE_MAX_PORTS];
    int alias[AF_ANE_MAX_PORTS];  /* per output: the input surface it writes into, or -1 */
    af_ane_ports ports;
    char dir[1024];
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *framework;
static Class c_desc, c_model, c_request, c_surface;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static af_ane_program *cache;
static atomic_llong compiles;

static void load_framework(void) {
    framework = dlopen(ANE_FRAMEWORK, RTLD_NOW);
    if (!framework) return;
    c_desc = (Class)objc_getClass("_ANEInMemoryModelDescriptor");
    c_model = (Class)objc_getClass("_ANEInMemoryModel");
    c_request = (Class)objc_getClass("_ANERequest");
    c_surface = (Class)objc_getClass("_ANEIOSurfaceObject");
}

int64_t af_ane_compile_count(void) { return (int64_t)atomic_load(&compiles); }

/* ---------------------------------------------------------------- CoreFoundation helpers */

static CFStringRef str(const char *s) { return CFStringCreateWithCString(kCFAllocatorDefault, s, kCFStringEncodingUTF8); }

static CFNumberRef num(int64_t v) { return CFNumberCreate(kCFAllocatorDefault, kCFNumberSInt64Type, &v); }

static CFDictionaryRef dict(CFIndex n, const void **keys, const void **vals) {
    return CFDictionaryCreate(kCFAllocatorDefault, keys, vals, n, &kCFTypeDictionaryKeyCallBacks, &kCFTypeDictionaryValueCallBacks);
}

static CFArrayRef array(CFIndex n, const void **vals) { return CFArrayCreate(kCFAllocatorDefault, vals, n, &kCFTypeArrayCallBacks); }

static void release(const void *cf) {
    if (cf) CFRelease(cf);
}

static SEL sel(const char *name) { return sel_registerName(name); }

static void objc_release(id o) {
    if (o) MSG(void (*)(id, SEL))(o, sel("release"));
}

static id objc_retain_(id o) { return o ? MSG(id (*)(id, SEL))(o, sel("retain")) : o; }

/* An NSError's description, as text, into buf. */
static const char *describe(id err, char *buf, size_t n) {
    snprintf(buf, n, "no error object");
    if (!err) return buf;
    id d = MSG(id (*)(id, SEL))(err, sel("description"));
    if (!d || !CFStringGetCString((CFStringRef)d, buf, (CFIndex)n, kCFStringEncodingUTF8)) snprintf(buf, n, "(undescribable error)");
    return buf;
}

/* ---------------------------------------------------------------- files the daemon reads */

static af_status write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return af_fail(AF_ERR_IO, "ane: cannot create %s", path);
    bool ok = fwrite(data, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? AF_OK : af_fail(AF_ERR_IO, "ane: cannot write %s", path);
}

static af_status stage(af_ane_program *p, id model, const char *mil, size_t mil_len, const uint8_t *w, size_t wn) {
    id hex = MSG(id (*)(id, SEL))(model, sel("hexStringIdentifier"));
    char h[256];
    if (!hex || !CFStringGetCString((CFStringRef)hex, h, sizeof h, kCFStringEncodingUTF8))
        return af_fail(AF_ERR_UNSUPPORTED, "ane: the model has no hexStringIdentifier");
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp/";
    char path[1200];
    int k = snprintf(p->dir, sizeof p->dir, "%s%s%s", tmp, tmp[strlen(tmp) - 1] == '/' ? "" : "/", h);
    if (k < 0 || (size_t)k >= sizeof p->dir) return af_fail(AF_ERR_IO, "ane: temp path too long");
    snprintf(path, sizeof path, "%s/weights", p->dir);
    if ((mkdir(p->dir, 0700) && access(p->dir, W_OK)) || (mkdir(path, 0700) && access(path, W_OK)))
        return af_fail(AF_ERR_IO, "ane: cannot create %s", path);
    snprintf(path, sizeof path, "%s/model.mil", p->dir);
    af_status st = write_file(path, mil, mil_len);
    if (!st && w) {
        snprintf(path, sizeof path, "%s/weights/weight.bin", p->dir);
        st = write_file(path, w, wn);
    }
    return st;
}

static void unstage(af_ane_program *p) {
    if (!p->dir[0]) return;
    char path[1200];
    snprintf(path, sizeof path, "%s/weights/weight.bin", p->dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/weights", p->dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/model.mil", p->dir);
    unlink(path);
    rmdir(p->dir); /* fails harmlessly when the daemon left its own files */
}

/* ---------------------------------------------------------------- surfaces and request */

static IOSurfaceRef surface(size_t bytes) {
    CFNumberRef b = num((int64_t)bytes), one = num(1), zero = num(0);
    const void *keys[] = { kIOSurfaceWidth, kIOSurfaceHeight, kIOSurfaceBytesPerElement, kIOSurfaceBytesPerRow,
                           kIOSurfaceAllocSize, kIOSurfacePixelFormat };
    const void *vals[] = { b, one, one, b, b, zero };
    CFDictionaryRef props = dict(6, keys, vals);
    IOSurfaceRef s = props ? IOSurfaceCreate(props) : NULL;
    release(props);
    release(b);
    release(one);
    release(zero);
    return s;
}

static af_status build_request(af_ane_program *p) {
    const void *ins[AF_ANE_MAX_PORTS], *outs[AF_ANE_MAX_PORTS], *ii[AF_ANE_MAX_PORTS], *oi[AF_ANE_MAX_PORTS];
    CFNumberRef idx[AF_ANE_MAX_PORTS];
    int n = p->ports.nin > p->ports.nout ? p->ports.nin : p->ports.nout;
    for (int i = 0; i < n; i++) idx[i] = num(i);
    for (int i = 0; i < p->ports.nin; i++) { ins[i] = p->in_obj[i]; ii[i] = idx[i]; }
    for (int i = 0; i < p->ports.nout; i++) {
        outs[i] = p->alias[i] >= 0 ? p->in_obj[p->alias[i]] : p->out_obj[i];
        oi[i] = idx[i];
    }
    CFArrayRef a_in = array(p->ports.nin, ins), a_ii = array(p->ports.nin, ii);
    CFArrayRef a_out = array(p->ports.nout, outs), a_oi = array(p->ports.nout, oi);
    CFNumberRef zero = num(0);
    id req = NULL;
    if (a_in && a_ii && a_out && a_oi && zero)
        req = MSG(id (*)(Class, SEL, id, id, id, id, id, id, id))(
            c_request, sel("requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:perfStats:procedureIndex:"),
            (id)a_in, (id)a_ii, (id)a_out, (id)a_oi, NULL, NULL, (id)zero);
    release(a_in);
    release(a_ii);
    release(a_out);
    release(a_oi);
    release(zero);
    for (int i = 0; i < n; i++) release(idx[i]);
    if (!req) return af_fail(AF_ERR_UNSUPPORTED, "ane: _ANERequest could not be created");
    objc_release(p->request);
    p->request = objc_retain_(req);
    return AF_OK;
}

static af_status make_ports(af_ane_program *p) {
    for (int k = 0; k < p->ports.nin + p->ports.nout; k++) {
        bool in = k < p->ports.nin;
        int i = in ? k : k - p->ports.nin;
        int64_t c = in ? p->ports.in_ch[i] : p->ports.out_ch[i], s = in ? p->ports.in_sp[i] : p->ports.out_sp[i];
        if (c < 1 || s < 1 || c * s > ((int64_t)1 << 28)) return af_fail(AF_ERR_INVALID, "ane: port %d has shape [1, %lld, 1, %lld]", k, (long long)c, (long long)s);
        IOSurfaceRef sf = surface((size_t)(c * s * 2));
        if (!sf) return af_fail(AF_ERR_NOMEM, "ane: IOSurfaceCreate failed for %lld bytes", (long long)(c * s * 2));
        id obj = MSG(id (*)(Class, SEL, IOSurfaceRef))(c_surface, sel("objectWithIOSurface:"), sf);
        if (in) { p->in_surf[i] = sf; p->in_obj[i] = objc_retain_(obj); }
        else { p->out_surf[i] = sf; p->out_obj[i] = objc_retain_(obj); p->alias[i] = -1; }
        if (!obj) return af_fail(AF_ERR_UNSUPPORTED, "ane: _ANEIOSurfaceObject could not wrap a surface");
    }
    return build_request(p);
}

/* ---------------------------------------------------------------- lifecycle */

static void destroy(af_ane_program *p) {
    if (!p) return;
    if (p->model) {
        id err = NULL;
        MSG(BOOL (*)(id, SEL, unsigned, id *))(p->model, sel("unloadWithQoS:error:"), AF_ANE_QOS, &err);
    }
    objc_release(p->request);
    for (int i = 0; i < AF_ANE_MAX_PORTS; i++) {
        objc_release(p->in_obj[i]);
        objc_release(p->out_obj[i]);
        release(p->in_surf[i]);
        release(p->out_surf[i]);
    }
    objc_release(p->model);
    unstage(p);
    free(p);
}

static af_status compile_new(const char *mil, size_t mil_len, const uint8_t *w, size_t wn, af_ane_program *p) {
    char why[512];
    if (atomic_load(&compiles) >= AF_ANE_MAX_COMPILES)
        return af_fail(AF_ERR_UNSUPPORTED, "ane: this process has compiled %d programs, the daemon's budget; reuse programs or restart the process",
                       AF_ANE_MAX_COMPILES);
    CFDataRef text = CFDataCreate(kCFAllocatorDefault, (const UInt8 *)mil, (CFIndex)mil_len);
    CFDataRef blob = w ? CFDataCreate(kCFAllocatorDefault, w, (CFIndex)wn) : NULL;
    CFNumberRef zero = num(0);
    CFStringRef k_off = str("offset"), k_data = str("data"), k_path = str(WEIGHT_KEY);
    const void *ek[2] = { k_off, k_data }, *ev[2] = { zero, blob };
    CFDictionaryRef entry = blob ? dict(2, ek, ev) : NULL;
    const void *wk[1] = { k_path }, *wv[1] = { entry };
    CFDictionaryRef weights = dict(entry ? 1 : 0, wk, wv); /* @{} when there are none, never nil */
    CFDictionaryRef empty = dict(0, NULL, NULL);
    af_status st = AF_OK;
    if (!text || !zero || !k_off || !k_data || !k_path || (w && !entry) || !weights || !empty)
        st = af_fail(AF_ERR_NOMEM, "ane: out of memory");
    id desc = NULL, model = NULL;
    if (!st) {
        desc = MSG(id (*)(Class, SEL, id, id, id))(c_desc, sel("modelWithMILText:weights:optionsPlist:"), (id)text,
                                                              (id)weights, NULL);
        if (!desc) st = af_fail(AF_ERR_UNSUPPORTED, "ane: _ANEInMemoryModelDescriptor rejected the program");
    }
    if (!st) {
        model = MSG(id (*)(Class, SEL, id))(c_model, sel("inMemoryModelWithDescriptor:"), desc);
        if (!model) st = af_fail(AF_ERR_UNSUPPORTED, "ane: _ANEInMemoryModel could not be created");
    }
    if (!st) st = stage(p, model, mil, mil_len, w, wn);
    if (!st) {
        id err = NULL;
        BOOL ok = MSG(BOOL (*)(id, SEL, unsigned, id, id *))(model, sel("compileWithQoS:options:error:"), AF_ANE_QOS,
                                                                       (id)empty, &err);
        atomic_fetch_add(&compiles, 1);
        if (!ok) st = af_fail(AF_ERR_UNSUPPORTED, "ane: compile failed: %s", describe(err, why, sizeof why));
    }
    if (!st) {
        id err = NULL;
        BOOL ok = MSG(BOOL (*)(id, SEL, unsigned, id, id *))(model, sel("loadWithQoS:options:error:"), AF_ANE_QOS, (id)empty, &err);
        if (!ok) {
            usleep(100000);
            err = NULL;
            ok = MSG(BOOL (*)(id, SEL, unsigned, id, id *))(model, sel("loadWithQoS:options:error:"), AF_ANE_QOS, (id)empty, &err);
        }
        if (!ok) st = af_fail(AF_ERR_UNSUPPORTED, "ane: load failed: %s", describe(err, why, sizeof why));
        else p->model = objc_retain_(model);
    }
    release(text);
    release(blob);
    release(zero);
    release(k_off);
    release(k_data);
    release(k_path);
    release(entry);
    release(weights);
    release(empty);
    return st;
}

af_status af_ane_compile(const char *mil, size_t mil_len, const uint8_t *weights, size_t weights_len,
                         const af_ane_ports *ports, af_ane_program **out) {
    if (!out) return af_fail(AF_ERR_INVALID, "ane: out is NULL");
    *out = NULL;
    if (!mil || !ports || ports->nin < 0 || ports->nout < 1 || ports->nin > AF_ANE_MAX_PORTS || ports->nout > AF_ANE_MAX_PORTS)
        return af_fail(AF_ERR_INVALID, "ane: needs MIL text and 0..%d inputs, 1..%d outputs", AF_ANE_MAX_PORTS, AF_ANE_MAX_PORTS);
    if (pthread_once(&once, load_framework) != 0 || !framework || !c_desc || !c_model || !c_request || !c_surface)
        return af_fail(AF_ERR_UNSUPPORTED, "ane: the AppleNeuralEngine framework or its classes are not available on this system");
    uint8_t key[32];
    af_sha256_ctx h;
    af_sha256_init(&h);
    af_sha256_update(&h, mil, mil_len);
    af_sha256_update(&h, "\0weights\0", 9);
    if (weights) af_sha256_update(&h, weights, weights_len);
    af_sha256_update(&h, ports, sizeof *ports);
    af_sha256_final(&h, key);
    if (pthread_mutex_lock(&cache_lock) != 0) return af_fail(AF_ERR_INVALID, "ane: cache lock failed");
    for (af_ane_program *p = cache; p; p = p->next)
        if (!memcmp(p->key, key, 32)) {
            p->refs++;
            pthread_mutex_unlock(&cache_lock);
            *out = p;
            return AF_OK;
        }
    pthread_mutex_unlock(&cache_lock);

    void *pool = objc_autoreleasePoolPush();
    af_ane_program *p = calloc(1, sizeof *p);
    af_status st = p ? AF_OK : af_fail(AF_ERR_NOMEM, "ane: out of memory");
    if (!st) {
        memcpy(p->key, key, 32);
        p->refs = 1;
        p->ports = *ports;
        st = compile_new(mil, mil_len, weights, weights_len, p);
    }
    if (!st) st = make_ports(p);
    objc_autoreleasePoolPop(pool);
    if (st) { destroy(p); return st; }
    if (pthread_mutex_lock(&cache_lock) != 0) { destroy(p); return af_fail(AF_ERR_INVALID, "ane: cache lock failed"); }
    p->next = cache;
    cache = p;
    pthread_mutex_unlock(&cache_lock);
    *out = p;
    return AF_OK;
}

af_status af_ane_alias(af_ane_program *p, int o, int i) {
    if (!p || o < 0 || o >= p->ports.nout || i < 0 || i >= p->ports.nin) return af_fail(AF_ERR_INVALID, "ane: alias %d -> %d is out of range", o, i);
    if (p->ports.out_ch[o] * p->ports.out_sp[o] != p->ports.in_ch[i] * p->ports.in_sp[i])
        return af_fail(AF_ERR_SHAPE, "ane: output %d and input %d differ in size; only equal surfaces alias", o, i);
    void *pool = objc_autoreleasePoolPush();
    p->alias[o] = i;
    af_status st = build_request(p);
    if (st) p->alias[o] = -1;
    objc_autoreleasePoolPop(pool);
    return st;
}

static af_status copy_surface(IOSurfaceRef s, void *host, size_t bytes, bool to_surface) {
    uint32_t seed = 0;
    if (IOSurfaceLock(s, to_surface ? 0 : kIOSurfaceLockReadOnly, &seed) != 0) return af_fail(AF_ERR_IO, "ane: IOSurfaceLock failed");
    void *base = IOSurfaceGetBaseAddress(s);
    if (base) {
        if (to_surface) memcpy(base, host, bytes);
        else memcpy(host, base, bytes);
    }
    IOSurfaceUnlock(s, to_surface ? 0 : kIOSurfaceLockReadOnly, &seed);
    return base ? AF_OK : af_fail(AF_ERR_IO, "ane: a surface has no base address");
}

af_status af_ane_eval(af_ane_program *p, const uint16_t *const *in, uint16_t *const *out) {
    if (!p || (p->ports.nin && !in) || !out) return af_fail(AF_ERR_INVALID, "ane: eval needs a program and buffers");
    char why[512];
    for (int i = 0; i < p->ports.nin; i++) {
        if (!in[i]) continue; /* resident state already in the surface */
        af_status st = copy_surface(p->in_surf[i], (void *)in[i], (size_t)(p->ports.in_ch[i] * p->ports.in_sp[i] * 2), true);
        if (st) return st;
    }
    void *pool = objc_autoreleasePoolPush();
    CFDictionaryRef empty = dict(0, NULL, NULL);
    id err = NULL;
    BOOL ok = empty && MSG(BOOL (*)(id, SEL, unsigned, id, id, id *))(p->model, sel("evaluateWithQoS:options:request:error:"),
                                                                               AF_ANE_QOS, (id)empty, p->request, &err);
    af_status st = ok ? AF_OK : af_fail(AF_ERR_UNSUPPORTED, "ane: evaluate failed: %s", describe(err, why, sizeof why));
    release(empty);
    objc_autoreleasePoolPop(pool);
    for (int i = 0; !st && i < p->ports.nout; i++)
        if (out[i] && p->alias[i] < 0)
            st = copy_surface(p->out_surf[i], out[i], (size_t)(p->ports.out_ch[i] * p->ports.out_sp[i] * 2), false);
    return st;
}

void af_ane_release(af_ane_program *p) {
    if (!p || pthread_mutex_lock(&cache_lock) != 0) return;
    bool last = --p->refs == 0;
    if (last)
        for (af_ane_program **q = &cache; *q; q = &(*q)->next)
            if (*q == p) { *q = p->next; break; }
    pthread_mutex_unlock(&cache_lock);
    if (last) {
        void *pool = objc_autoreleasePoolPush();
        destroy(p);
        objc_autoreleasePoolPop(pool);
    }
}
