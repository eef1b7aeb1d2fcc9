/* The Neural Engine runtime through the private AppleNeuralEngine framework, in plain C
 * (objc_msgSend cast to each selector's exact type, CoreFoundation objects for the
 * toll-free bridged NSData / NSDictionary / NSArray / NSNumber / NSString).
 * The call sequence and its traps (maderix-ane.md section 2, ane-formats.md 4.2, and
 * docs/fake-ane.md for what the real framework does with each argument):
 *   descriptor  +[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]
 *               MIL as NSData (an NSString crashes); weights a dictionary whose every
 *               entry holds ONE key and NSData value: the descriptor hashes each entry's
 *               first value (-bytes, -length) and saves it under the entry's first key,
 *               so a two-key entry's order decides whether a CFNumber gets -bytes. Apple's
 *               own form {"@model_path/weights/weight.bin": {"weights/weight.bin": data}};
 *               @{} when the MIL cites no weights (nil gives a nil descriptor, an empty
 *               entry is refused); options nil. A net.plist program (seed 004) through
 *               +modelWithNetworkDescription:weights:optionsPlist: with the XML as NSData
 *               and weights {"weights.N": {"weights.N": data}}
 *   model       +[_ANEInMemoryModel inMemoryModelWithDescriptor:]; its -localModelPath is
 *               the folder the daemon reads: model.mil and weights/weight.bin (or net.plist,
 *               weights.0, weights.1) are written there before compiling. The framework
 *               adds files of its own (net.plist, the weights under each first key) and
 *               deletes the folder on unload, so it is removed recursively on every
 *               failure and a missing folder after unload is normal
 *   compile     nothing when -compiledModelExists (the daemon kept it: maderix/ANE issue
 *               24), else -compileWithQoS:options:error: or, where this macOS lacks or
 *               breaks it, what that method does inside (published decompiles):
 *               -[[_ANEClient sharedConnection] compileModel:[_ANEModel modelAtURL:folder
 *               key:identifier] options:{kANEFModelTypeKey: MIL or ANECIR,
 *               kANEFInMemoryModelIdentifierKey: identifier} qos:error:]; the first entry
 *               point that compiles is kept for the process
 *   load        -loadWithQoS:options:error: (one retry after 100 ms: the daemon reclaims
 *               slots lazily; a kept program that will not load is compiled after all)
 *   ports       -modelAttributes' NetworkStatusList[0].LiveInputList / LiveOutputList name
 *               each port by Symbol, in an order of the model's (bound in another order,
 *               inputs read as zeros): each port is bound at its list index, found by its
 *               name in the program, and its data is copied with the listed row, plane,
 *               depth and batch strides (rows are padded; flat only where the strides say
 *               so). A model without attributes (older frameworks) is bound in declaration
 *               order, flat (ane_ports.h)
 *   I/O         one IOSurface per port, a byte buffer (width = bytes, height 1), at least
 *               the layout's extent and 2048 bytes, its size rounded up to 128 bytes (a rule
 *               about the size, maderix PR 35 for M5), wrapped by
 *               +[_ANEIOSurfaceObject objectWithIOSurface:]
 *   request     +[_ANERequest requestWithInputs:inputIndices:outputs:outputIndices:
 *               weightsBuffer:perfStats:procedureIndex:], built once per handle, reused;
 *               what -validate refuses at evaluate time (no inputs or outputs, 255 buffers
 *               or more, an index of 255 or more, a procedure above 128) is refused here
 *   evaluate    -evaluateWithQoS:options:request:error:, synchronous; its BOOL checked
 *   state       an output written straight into its input's surface (one surface in both
 *               lists of one request) when aliasing is on and both layouts agree; public
 *               code never does this, so it can be switched off (ane_rt_set_state_alias)
 *               and the output is then copied into the input surface after each evaluation
 *   unload      -unloadWithQoS:error:, release, remove the model's folder if still there
 * Every call's result is checked; failures return an af_status carrying the
 * framework's error: its -description and the NSUnderlyingErrorKey chain below it
 * (compile errors wrap the compiler's). Factory results are autoreleased: everything
 * kept is retained, and every entry point runs inside its own autorelease pool. */
#define _DEFAULT_SOURCE 1 /* usleep on glibc */
#define _DARWIN_C_SOURCE 1
#include "ane/darwin/ane_runtime.h"
#include "ane/darwin/ane_ports.h"
#include "ane/darwin/apple_api.h"
#include "data/sha256.h"
#include "engine/family.h"
#include "ir/ir.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
    char dir[1024]; /* -localModelPath: the staged files, "" until staged */
} ane_rt_model;

/* A caller's handle: its own surfaces and request on a shared model. */
struct ane_rt_program {
    ane_rt_model *m;
    ane_rt_ports ports;
    id request;
    id in_obj[ANE_RT_MAX_PORTS], out_obj[ANE_RT_MAX_PORTS];
    IOSurfaceRef in_surf[ANE_RT_MAX_PORTS], out_surf[ANE_RT_MAX_PORTS];
    ane_rt_layout in_lay[ANE_RT_MAX_PORTS], out_lay[ANE_RT_MAX_PORTS];
    int state[ANE_RT_MAX_PORTS]; /* per output: the input it feeds as resident state, or -1 */
    bool aliased[ANE_RT_MAX_PORTS]; /* per output: written straight into that input's surface */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* loader and cache */
static char loaded_path[1024];
static Class c_desc, c_model, c_request, c_surface;
static ane_rt_model *cache;
static atomic_llong compiles;
static atomic_llong budget = ANE_RT_COMPILE_BUDGET;
static atomic_int state_alias = 1;

/* The compile entry points, preferred first. Which exist and work differs between macOS
 * releases (compileModelAtURL is reported broken on macOS 26: ane-chips.md), so each is
 * looked for at load, tried in order until one compiles, and the one that did is kept
 * for the rest of the process (a later failure of a proven entry point is the program's,
 * not the entry point's). */
enum { EP_INMEM, EP_CLIENT, EP_COUNT };
static const char *const ep_names[EP_COUNT] = { "-[_ANEInMemoryModel compileWithQoS:options:error:]",
                                                "-[_ANEClient compileModel:options:qos:error:]" };
static bool ep_have[EP_COUNT], have_exists;
static int ep_chosen = -1; /* under the lock: the entry point that compiled, -1 until one has */
static Class c_client, c_anemodel, c_url;
/* -[_ANEClient compileModel:...]'s option keys and values, exported by the framework */
static CFStringRef k_type, k_mil, k_anecir, k_ident, k_cached;
static atomic_llong reloads;
static atomic_int budget_logged;

int64_t ane_rt_compile_count(void) { return (int64_t)atomic_load(&compiles); }
int64_t ane_rt_compile_budget(void) { return (int64_t)atomic_load(&budget); }
void ane_rt_set_compile_budget(int64_t n) {
    atomic_store(&budget, n < 0 ? 0 : n);
}
void ane_rt_set_state_alias(int on) { atomic_store(&state_alias, on != 0); }
int ane_rt_state_alias(void) { return atomic_load(&state_alias); }

const char *ane_rt_framework(void) { return loaded_path[0] ? loaded_path : NULL; }

const char *ane_rt_compile_entry(void) {
    if (pthread_mutex_lock(&lock)) return NULL;
    int e = ep_chosen;
    if (e < 0 && loaded_path[0]) e = ep_have[EP_INMEM] ? EP_INMEM : ep_have[EP_CLIENT] ? EP_CLIENT : -1;
    pthread_mutex_unlock(&lock);
    return e < 0 ? NULL : ep_names[e];
}

int64_t ane_rt_reload_count(void) { return (int64_t)atomic_load(&reloads); }

static SEL sel(const char *name);

/* Whether instances of c answer selector (+[NSObject instancesRespondToSelector:]). */
static bool responds(Class c, const char *selector) {
    return c && ANE_MSG(BOOL (*)(Class, SEL, SEL))(c, sel("instancesRespondToSelector:"), sel(selector));
}

/* An NSString constant the framework exports, or NULL. */
static CFStringRef framework_string(const char *symbol) {
    const CFStringRef *p = ane_apple.framework ? (const CFStringRef *)dlsym(ane_apple.framework, symbol) : NULL;
    return p ? *p : NULL;
}

/* Which compile entry points this framework has (under the lock, after the classes). */
static af_status find_entry_points(const char *path) {
    ep_chosen = -1;
    ep_have[EP_INMEM] = responds(c_model, "compileWithQoS:options:error:");
    have_exists = responds(c_model, "compiledModelExists");
    c_client = A.objc_getClass("_ANEClient");
    c_anemodel = A.objc_getClass("_ANEModel");
    c_url = A.objc_getClass("NSURL");
    k_type = framework_string("kANEFModelTypeKey");
    k_mil = framework_string("kANEFModelMILValue");
    k_anecir = framework_string("kANEFModelANECIRValue");
    k_ident = framework_string("kANEFInMemoryModelIdentifierKey");
    k_cached = framework_string("kANEFInMemoryModelIsCachedKey");
    ep_have[EP_CLIENT] = c_client && c_anemodel && c_url && k_type && k_mil && k_anecir && k_ident &&
                         responds(c_client, "compileModel:options:qos:error:");
    if (!ep_have[EP_INMEM] && !ep_have[EP_CLIENT])
        return ir_fail(AF_ERR_UNSUPPORTED, "ane: %s has neither compile entry point (%s, nor %s with the kANEF* option keys): "
                       "this macOS changed the private API; please file an issue with the output of `aneforge doctor`",
                       path, ep_names[EP_INMEM], ep_names[EP_CLIENT]);
    if (!ep_have[EP_INMEM])
        ir_log(AF_LOG_INFO, "ane: this framework has no %s; compiling through %s", ep_names[EP_INMEM], ep_names[EP_CLIENT]);
    return AF_OK;
}

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
        if (!st) st = find_entry_points(path);
        if (!st) snprintf(loaded_path, sizeof loaded_path, "%s", path);
        else ane_apple_unload(); /* a later call may name the right framework */
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---------------------------------------------------------------- the device */

/* +[_ANEDeviceInfo aneSubType] ("h13", "h16"), or "" without a loaded framework. */
static void subtype(char *buf, size_t n) {
    buf[0] = 0;
    if (!ane_rt_framework()) return;
    Class info = ane_apple.objc_getClass("_ANEDeviceInfo");
    if (!info) return;
    void *pool = ane_apple.objc_autoreleasePoolPush();
    CFTypeRef s = (CFTypeRef)ANE_MSG(id (*)(Class, SEL))(info, ane_apple.sel_registerName("aneSubType"));
    if (!s || ane_apple.CFGetTypeID(s) != ane_apple.CFStringGetTypeID() ||
        !ane_apple.CFStringGetCString((CFStringRef)s, buf, (CFIndex)n, kCFStringEncodingUTF8))
        buf[0] = 0;
    ane_apple.objc_autoreleasePoolPop(pool);
}

af_status ane_rt_device_info(ane_rt_device *out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "ane: ane_rt_device_info needs somewhere to write");
    memset(out, 0, sizeof *out);
    ane_device_sysctl(out);
    subtype(out->subtype, sizeof out->subtype);
    out->family = ane_rt_family_of_subtype(out->subtype);
    if (out->family == AF_FAMILY_DEFAULT) out->family = ane_family_detect(); /* the chip's name, on Apple */
    return AF_OK;
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

static id send(id o, const char *selector) { return o ? ANE_MSG(id (*)(id, SEL))(o, sel(selector)) : NULL; }

/* A CFString's UTF-8 text into buf; false when it is not a string or does not fit. */
static bool cstring(CFTypeRef s, char *buf, size_t n) {
    return s && A.CFGetTypeID(s) == A.CFStringGetTypeID() && A.CFStringGetCString((CFStringRef)s, buf, (CFIndex)n, kCFStringEncodingUTF8);
}

/* An NSError as text: its -description, then each NSUnderlyingErrorKey below it
 * ("NSUnderlyingError"), where compile errors keep the compiler's own message. */
static const char *describe(id err, char *buf, size_t n) {
    if (!err) {
        snprintf(buf, n, "the framework returned no error object");
        return buf;
    }
    CFStringRef key = str("NSUnderlyingError");
    size_t used = 0;
    buf[0] = 0;
    for (int depth = 0; err && depth < 4 && used + 16 < n; depth++) {
        if (depth) used += (size_t)snprintf(buf + used, n - used, "; caused by: ");
        if (!cstring((CFTypeRef)send(err, "description"), buf + used, n - used) &&
            !cstring((CFTypeRef)send(err, "localizedDescription"), buf + used, n - used))
            snprintf(buf + used, n - used, "(an error without a readable description)");
        used = strlen(buf);
        CFTypeRef info = (CFTypeRef)send(err, "userInfo");
        err = key && info && A.CFGetTypeID(info) == A.CFDictionaryGetTypeID()
                  ? (id)A.CFDictionaryGetValue((CFDictionaryRef)info, key) : NULL;
    }
    release(key);
    return buf;
}

/* ---------------------------------------------------------------- the model's folder */

static af_status write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return ir_fail(AF_ERR_IO, "ane: cannot create %s: %s", path, strerror(errno));
    bool ok = fwrite(data, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? AF_OK : ir_fail(AF_ERR_IO, "ane: cannot write %s", path);
}

/* mkdir -p: the folder and any missing parent, private to the user. */
static bool make_dirs(char *path) {
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            bool ok = !mkdir(path, 0700) || errno == EEXIST;
            *p = '/';
            if (!ok) return false;
        }
    return !mkdir(path, 0700) || errno == EEXIST;
}

/* rm -r of what the runtime and the framework put in the model's folder (a few levels,
 * never following links). A folder already gone is fine: unload deletes it. */
static void remove_tree(const char *path, int depth) {
    struct stat st;
    if (lstat(path, &st)) return;
    if (S_ISDIR(st.st_mode) && depth < 4) {
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[1400];
            if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) < (int)sizeof child) remove_tree(child, depth + 1);
        }
        if (d) closedir(d);
        rmdir(path);
    } else unlink(path);
}

/* The files the daemon reads from -localModelPath: model.mil and weights/weight.bin, or
 * net.plist, weights.0 and weights.1. */
static const char *const mil_files[2] = {"model.mil", "weights/weight.bin"};
static const char *const net_files[3] = {"net.plist", "weights.0", "weights.1"};

static af_status stage(ane_rt_model *m, id model, const rt_source *src) {
    char dir[1024], path[1200];
    if (!cstring((CFTypeRef)send(model, "localModelPath"), dir, sizeof dir) || dir[0] != '/' || !dir[1] || strstr(dir, "/../"))
        return ir_fail(AF_ERR_UNSUPPORTED, "ane: the model gave no usable -localModelPath (an absolute folder)");
    size_t k = strlen(dir);
    while (k > 1 && dir[k - 1] == '/') dir[--k] = 0;
    snprintf(m->dir, sizeof m->dir, "%s", dir); /* from here on, failures remove it */
    snprintf(path, sizeof path, "%s/weights", dir);
    if (!make_dirs(dir) || (!src->netplist && !make_dirs(path)))
        return ir_fail(AF_ERR_IO, "ane: cannot create %s: %s (the model's folder must be writable)", path, strerror(errno));
    snprintf(path, sizeof path, "%s/%s", dir, src->netplist ? net_files[0] : mil_files[0]);
    af_status st = write_file(path, src->text, src->len);
    for (int i = 0; i < 2 && !st; i++) {
        if (!src->w[i] && !src->netplist) continue;
        snprintf(path, sizeof path, "%s/%s", dir, src->netplist ? net_files[1 + i] : mil_files[1]);
        st = write_file(path, src->w[i] ? (const void *)src->w[i] : "", src->w[i] ? src->wn[i] : 0);
    }
    return st;
}

/* ---------------------------------------------------------------- compiling a model */

static void model_destroy(ane_rt_model *m) {
    if (!m) return;
    if (m->model) {
        id err = NULL;
        ANE_MSG(BOOL (*)(id, SEL, unsigned, id *))(m->model, sel("unloadWithQoS:error:"), ANE_RT_QOS, &err);
        obj_release(m->model); /* an unload failure leaves nothing to do but let go */
    }
    if (m->dir[0]) remove_tree(m->dir, 0);
    free(m);
}

static BOOL send_qos(id model, const char *selector, CFDictionaryRef options, id *err) {
    *err = NULL;
    return ANE_MSG(BOOL (*)(id, SEL, unsigned, id, id *))(model, sel(selector), ANE_RT_QOS, (id)options, err);
}

/* The weights dictionary, one single-key entry per file: {"@model_path/weights/weight.bin":
 * {"weights/weight.bin": data}} for MIL, {"weights.N": {"weights.N": data}} for a
 * net.plist; @{} when the MIL cites no weights (nil makes the descriptor nil). */
static CFDictionaryRef weights_dict(const rt_source *src) {
    const char *outer[2] = {src->netplist ? net_files[1] : WEIGHT_KEY, net_files[2]};
    const char *inner[2] = {src->netplist ? net_files[1] : mil_files[1], net_files[2]};
    const void *keys[2] = {NULL, NULL}, *vals[2] = {NULL, NULL};
    CFIndex n = 0;
    bool ok = true;
    for (int i = 0; i < (src->netplist ? 2 : 1) && ok; i++) {
        if (!src->w[i] && !src->netplist) continue;
        CFDataRef blob = A.CFDataCreate(NULL, src->w[i] ? src->w[i] : (const UInt8 *)"", src->w[i] ? (CFIndex)src->wn[i] : 0);
        CFStringRef ik = str(inner[i]);
        const void *ek[1] = {ik}, *ev[1] = {blob};
        CFDictionaryRef entry = blob && ik ? dict(1, ek, ev) : NULL;
        release(blob);
        release(ik);
        keys[n] = str(outer[i]);
        vals[n] = entry;
        ok = keys[n] && entry;
        n++;
    }
    CFDictionaryRef w = ok ? dict(n, keys, vals) : NULL;
    for (CFIndex i = 0; i < n; i++) {
        release(keys[i]);
        release(vals[i]);
    }
    return w;
}

/* The family file's compile budget, as a sentence for messages. */
static void budget_words(char *out, size_t n) {
    ane_rt_device dev;
    const ane_family_info *fi = !ane_rt_device_info(&dev) ? ane_family_info_of(dev.family) : NULL;
    if (fi)
        snprintf(out, n, "the %s family file's compile_budget is %lld compiles per process, past which the ANE daemon refuses "
                 "every compile until the process restarts", fi->name, (long long)fi->compile_budget);
    else
        snprintf(out, n, "the ANE daemon refuses every compile after about 119 in one process, until it restarts");
}

/* -[_ANEClient compileModel:options:qos:error:] on the staged folder, as the in-memory
 * model's own compile does it (its -saveModelFiles folder, +[_ANEModel modelAtURL:key:],
 * the model type and the in-memory identifier under which its -loadWithQoS finds the
 * compiled program). */
static BOOL client_compile(ane_rt_model *m, id model, bool netplist, id *err) {
    *err = NULL;
    CFStringRef path = str(m->dir);
    id hex = send(model, "hexStringIdentifier");
    id url = path ? ANE_MSG(id (*)(Class, SEL, id, BOOL))(c_url, sel("fileURLWithPath:isDirectory:"), (id)path, (BOOL)1) : NULL;
    id am = url && hex ? ANE_MSG(id (*)(Class, SEL, id, id))(c_anemodel, sel("modelAtURL:key:"), url, hex) : NULL;
    CFNumberRef no = num(0);
    const void *keys[3] = { k_type, k_ident, k_cached }, *vals[3] = { netplist ? k_anecir : k_mil, hex, no };
    CFDictionaryRef opts = am && no ? dict(k_cached ? 3 : 2, keys, vals) : NULL;
    id client = opts ? ANE_MSG(id (*)(Class, SEL))(c_client, sel("sharedConnection")) : NULL;
    BOOL ok = client && ANE_MSG(BOOL (*)(id, SEL, id, id, unsigned, id *))(client, sel("compileModel:options:qos:error:"), am,
                                                                          (id)opts, ANE_RT_QOS, err);
    release(opts);
    release(no);
    release(path);
    return ok;
}

static BOOL compile_with(int ep, ane_rt_model *m, id model, const rt_source *src, CFDictionaryRef empty, id *err) {
    atomic_fetch_add(&compiles, 1); /* a failed compile still spends the daemon's budget */
    return ep == EP_INMEM ? send_qos(model, "compileWithQoS:options:error:", empty, err) : client_compile(m, model, src->netplist, err);
}

/* Compiles the staged program (under the lock): nothing when the daemon still has it
 * compiled (-compiledModelExists: compiled earlier, in this process or another, and
 * loaded by -loadWithQoS without compiling, so it costs no budget), else through the
 * entry point that works here, within the budget. */
static af_status compile_staged(ane_rt_model *m, id model, const rt_source *src, CFDictionaryRef empty, bool *reload) {
    char words[300];
    if (*reload && have_exists && ANE_MSG(BOOL (*)(id, SEL))(model, sel("compiledModelExists"))) {
        atomic_fetch_add(&reloads, 1);
        return AF_OK;
    }
    *reload = false;
    if (atomic_load(&compiles) >= atomic_load(&budget)) {
        budget_words(words, sizeof words);
        if (!atomic_exchange(&budget_logged, 1))
            ir_log(AF_LOG_WARN, "ane: compile budget spent (%lld compiles; %s): programs compiled before reload without "
                   "compiling; new ones are refused", (long long)atomic_load(&compiles), words);
        return ir_fail(AF_ERR_UNSUPPORTED,
                       "ane: this process has compiled %lld programs, its budget (%lld; %s). Programs compiled before "
                       "still reload without compiling; for new ones reuse compiled programs (feed weights as inputs) or save "
                       "a checkpoint and restart the process to resume. To measure this chip's budget: aneforge doctor --probe",
                       (long long)atomic_load(&compiles), (long long)atomic_load(&budget), words);
    }
    int order[EP_COUNT], n = 0;
    if (ep_chosen >= 0) order[n++] = ep_chosen; /* proven here: its failures are the program's */
    else
        for (int e = 0; e < EP_COUNT; e++)
            if (ep_have[e]) order[n++] = e;
    char first[1024] = "";
    id err = NULL;
    for (int k = 0; k < n; k++) {
        if (compile_with(order[k], m, model, src, empty, &err)) {
            if (ep_chosen < 0 && k > 0)
                ir_log(AF_LOG_WARN, "ane: %s failed (%s); compiled through %s instead, which this process keeps using",
                       ep_names[order[0]], first, ep_names[order[k]]);
            ep_chosen = order[k];
            return AF_OK;
        }
        if (!k) describe(err, first, sizeof first);
    }
    char hint[900] = "";
    ane_rt_device dev;
    const ane_family_info *fi = !ane_rt_device_info(&dev) ? ane_family_info_of(dev.family) : NULL;
    int64_t done = atomic_load(&compiles);
    if (fi && (done >= fi->compile_budget * 3 / 4 || done >= atomic_load(&budget) * 3 / 4)) {
        budget_words(words, sizeof words);
        snprintf(hint, sizeof hint, ". Likely cause: the compile budget: this was compile %lld in this process and %s. Try: "
                 "reuse compiled programs, or restart the process. To measure this chip's budget: aneforge doctor --probe",
                 (long long)done, words);
    } else if (!src->netplist && fi) {
        ane_rt_diagnose(src->text, src->len, dev.family, hint, sizeof hint);
    }
    if (n > 1) { /* both refused: most likely the program; the error keeps room for the hint */
        char second[1024];
        describe(err, second, sizeof second);
        return ir_fail(AF_ERR_UNSUPPORTED, "ane: compile failed: %.300s (and through %s: %.150s)%s", first, ep_names[order[1]],
                       second, hint);
    }
    return ir_fail(AF_ERR_UNSUPPORTED, "ane: compile failed: %s%s", first, hint);
}

/* Descriptor, model, staged files, compile, load. m->model is set only when loaded. */
static af_status model_compile(ane_rt_model *m, const rt_source *src) {
    char why[1024];
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
    if (!st) st = stage(m, model, src);
    bool reload = true; /* first try what the daemon may still have compiled */
    if (!st) st = compile_staged(m, model, src, empty, &reload);
    for (int pass = 0; !st && pass < 2; pass++) {
        BOOL ok = send_qos(model, "loadWithQoS:options:error:", empty, &err);
        if (!ok) { /* the daemon frees program slots lazily: give it a moment, once */
            usleep(100000);
            ok = send_qos(model, "loadWithQoS:options:error:", empty, &err);
        }
        if (ok) {
            m->model = obj_retain(model);
            break;
        }
        if (reload) { /* what the daemon kept would not load: compile it after all */
            reload = false;
            st = compile_staged(m, model, src, empty, &reload);
            continue;
        }
        st = ir_fail(AF_ERR_UNSUPPORTED, "ane: load failed (after one retry): %s", describe(err, why, sizeof why));
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
    if (!(m = calloc(1, sizeof *m)))
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

/* What -[_ANERequest validate] refuses when the model evaluates, refused before. */
static af_status request_ok(const ane_rt_program *p) {
    if (p->ports.nin < 1 || p->ports.nout < 1)
        return ir_fail(AF_ERR_INVALID, "ane: a request needs at least one input and one output surface (it has %d and %d)",
                       p->ports.nin, p->ports.nout);
    if (p->ports.nin + p->ports.nout >= ANE_RT_MAX_BUFFERS)
        return ir_fail(AF_ERR_INVALID, "ane: a request carries fewer than %d surfaces; this one has %d", ANE_RT_MAX_BUFFERS,
                       p->ports.nin + p->ports.nout);
    for (int k = 0; k < p->ports.nin + p->ports.nout; k++) {
        int idx = k < p->ports.nin ? p->in_lay[k].index : p->out_lay[k - p->ports.nin].index;
        if (idx < 0 || idx >= ANE_RT_MAX_BUFFERS)
            return ir_fail(AF_ERR_INVALID, "ane: surface index %d is outside 0..%d", idx, ANE_RT_MAX_BUFFERS - 1);
    }
    return AF_OK; /* the procedure index is always 0 (one procedure; the limit is 128) */
}

static af_status build_request(ane_rt_program *p) {
    af_status st = request_ok(p);
    if (st) return st;
    const void *ins[ANE_RT_MAX_PORTS], *outs[ANE_RT_MAX_PORTS], *ii[ANE_RT_MAX_PORTS], *oi[ANE_RT_MAX_PORTS];
    bool ok = true;
    for (int i = 0; i < p->ports.nin; i++) {
        ins[i] = p->in_obj[i];
        ok &= (ii[i] = num(p->in_lay[i].index)) != NULL;
    }
    for (int i = 0; i < p->ports.nout; i++) {
        outs[i] = p->aliased[i] ? p->in_obj[p->state[i]] : p->out_obj[i];
        ok &= (oi[i] = num(p->out_lay[i].index)) != NULL;
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
    for (int i = 0; i < p->ports.nin; i++) release(ii[i]);
    for (int i = 0; i < p->ports.nout; i++) release(oi[i]);
    return req ? AF_OK : ir_fail(AF_ERR_UNSUPPORTED, "ane: _ANERequest refused the %d input and %d output surfaces",
                                 p->ports.nin, p->ports.nout);
}

/* Layouts from the loaded model's attributes (declaration order, flat, without them),
 * then one surface per port and the request. */
static af_status make_ports(ane_rt_program *p, const ane_rt_symbols *sym) {
    CFTypeRef attrs = (CFTypeRef)send(p->m->model, "modelAttributes");
    bool found_in = false, found_out = false;
    af_status st = ane_rt_layouts(attrs, true, p->ports.nin, sym->in, p->ports.in_count, p->in_lay, &found_in);
    if (!st) st = ane_rt_layouts(attrs, false, p->ports.nout, sym->out, p->ports.out_count, p->out_lay, &found_out);
    if (st) return st;
    for (int k = 0; !found_in && k < p->ports.nin; k++) ane_rt_layout_flat(&p->in_lay[k], k, p->ports.in_count[k]);
    for (int k = 0; !found_out && k < p->ports.nout; k++) ane_rt_layout_flat(&p->out_lay[k], k, p->ports.out_count[k]);
    for (int k = 0; k < p->ports.nin + p->ports.nout; k++) {
        bool in = k < p->ports.nin;
        int i = in ? k : k - p->ports.nin;
        size_t bytes = in ? p->in_lay[i].bytes : p->out_lay[i].bytes;
        IOSurfaceRef sf = surface(bytes);
        if (!sf) return ir_fail(AF_ERR_NOMEM, "ane: IOSurfaceCreate failed for %zu bytes", bytes);
        id obj = ANE_MSG(id (*)(Class, SEL, IOSurfaceRef))(c_surface, sel("objectWithIOSurface:"), sf);
        if (in) { p->in_surf[i] = sf; p->in_obj[i] = obj_retain(obj); }
        else { p->out_surf[i] = sf; p->out_obj[i] = obj_retain(obj); p->state[i] = -1; }
        if (!obj) return ir_fail(AF_ERR_UNSUPPORTED, "ane: _ANEIOSurfaceObject could not wrap a %zu-byte surface", bytes);
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
    if (!ports || ports->nin < 1 || ports->nout < 1 || ports->nin > ANE_RT_MAX_PORTS || ports->nout > ANE_RT_MAX_PORTS)
        return ir_fail(AF_ERR_INVALID, "ane: a program needs 1..%d inputs and 1..%d outputs (the framework refuses a request "
                       "without an input or an output surface): feed at least one input", ANE_RT_MAX_PORTS, ANE_RT_MAX_PORTS);
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
    ane_rt_symbols *sym = malloc(sizeof *sym);
    if (!sym) return ir_fail(AF_ERR_NOMEM, "ane: out of memory");
    st = src->netplist ? ane_rt_netplist_symbols(src->text, src->len, ports->nin, ports->nout, sym)
                       : ane_rt_mil_symbols(src->text, src->len, ports->nin, ports->nout, sym);
    if (st) {
        free(sym);
        return st;
    }
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
    if (!st) st = make_ports(p, sym);
    if (st) program_free(p);
    else *out = p;
    A.objc_autoreleasePoolPop(pool);
    free(sym);
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
    int was = p->state[o];
    bool was_aliased = p->aliased[o];
    p->state[o] = i;
    p->aliased[o] = ane_rt_state_alias() && ane_rt_layout_same(&p->out_lay[o], &p->in_lay[i]);
    af_status st = p->aliased[o] || was_aliased ? build_request(p) : AF_OK;
    if (st) {
        p->state[o] = was;
        p->aliased[o] = was_aliased;
    }
    A.objc_autoreleasePoolPop(pool);
    return st;
}

int ane_rt_output_aliased(const ane_rt_program *p, int o) { return p && o >= 0 && o < p->ports.nout && p->aliased[o]; }

static af_status copy_surface(IOSurfaceRef s, const ane_rt_layout *l, uint16_t *host, bool to_surface) {
    uint32_t seed = 0;
    IOSurfaceLockOptions mode = to_surface ? 0 : kIOSurfaceLockReadOnly;
    if (A.IOSurfaceLock(s, mode, &seed) != 0) return ir_fail(AF_ERR_IO, "ane: IOSurfaceLock failed");
    void *base = A.IOSurfaceGetBaseAddress(s);
    if (base) ane_rt_layout_copy(l, base, host, to_surface);
    bool unlocked = A.IOSurfaceUnlock(s, mode, &seed) == 0;
    if (!base) return ir_fail(AF_ERR_IO, "ane: a surface has no base address");
    return unlocked ? AF_OK : ir_fail(AF_ERR_IO, "ane: IOSurfaceUnlock failed");
}

af_status ane_rt_input_io(ane_rt_program *p, int i, uint16_t *host, int to_host) {
    if (!p || !host || i < 0 || i >= p->ports.nin) return ir_fail(AF_ERR_INVALID, "ane: input %d is out of range or the buffer is NULL", i);
    return copy_surface(p->in_surf[i], &p->in_lay[i], host, !to_host);
}

/* Resident state without aliasing: the output's values into its input's surface. */
static af_status copy_state(ane_rt_program *p, int o) {
    int i = p->state[o];
    uint16_t *tmp = malloc((size_t)p->ports.out_count[o] * 2);
    if (!tmp) return ir_fail(AF_ERR_NOMEM, "ane: out of memory");
    af_status st = copy_surface(p->out_surf[o], &p->out_lay[o], tmp, false);
    if (!st) st = copy_surface(p->in_surf[i], &p->in_lay[i], tmp, true);
    free(tmp);
    return st;
}

af_status ane_rt_eval(ane_rt_program *p, const uint16_t *const *in, uint16_t *const *out) {
    if (!p || (p->ports.nin && !in)) return ir_fail(AF_ERR_INVALID, "ane: eval needs a program and its input array");
    char why[1024];
    for (int i = 0; i < p->ports.nin; i++) {
        if (!in[i]) continue; /* resident state already in the surface */
        af_status st = copy_surface(p->in_surf[i], &p->in_lay[i], (uint16_t *)in[i], true);
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
    for (int i = 0; !st && i < p->ports.nout; i++) {
        if (p->state[i] >= 0) { /* state outputs stay on the device side */
            if (!p->aliased[i]) st = copy_state(p, i);
        } else if (out && out[i]) st = copy_surface(p->out_surf[i], &p->out_lay[i], out[i], false);
    }
    return st;
}

void ane_rt_release(ane_rt_program *p) {
    if (!p) return;
    void *pool = A.objc_autoreleasePoolPush();
    program_free(p);
    A.objc_autoreleasePoolPop(pool);
}
