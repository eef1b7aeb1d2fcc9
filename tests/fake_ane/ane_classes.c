/* The fake _ANE classes: _ANEInMemoryModelDescriptor, _ANEInMemoryModel, _ANERequest,
 * _ANEIOSurfaceObject, _ANEDeviceInfo, _ANEClient, _ANEModel (and NSURL), with the
 * methods the runtime calls. The
 * program runs through aneforge's own MIL reader and CPU executor in fp16, reading
 * model.mil and weights/weight.bin from the model's -localModelPath as the daemon
 * does. It behaves as docs/fake-ane.md says the real framework does, each behaviour
 * switchable with fake_ane_set() to model other OS versions (defaults: the strict one):
 *   MIL given as NSString      descriptor is nil (the real framework crashes)
 *   weights_strict             nil weights: nil descriptor; an empty entry is refused; an
 *                              entry's first value must be NSData (the real one sends it
 *                              -bytes: a CFNumber there raises); the identifier hashes
 *                              the first values. 0: the old reports ({offset, data}
 *                              entries accepted, nil weights fail the compile silently)
 *   dict_order                 which key of an entry the descriptor meets first (1: hash
 *                              order, as an NSDictionary; 2: the other way; 0: as given)
 *   framework_files            compile saves net.plist and each entry's first value
 *                              under its first key into the model's folder; unload
 *                              deletes the folder
 *   model_root                 -localModelPath is <model_root>/<hexStringIdentifier>
 *                              (default NSTemporaryDirectory())
 *   files not staged           the compile fails naming the file it read
 *   attributes                 -modelAttributes publishes LiveInputList/LiveOutputList
 *   padded_rows                ... with RowStride rounded up to 64 bytes (and planes)
 *   shuffled_ports             ... listing the ports in reverse declaration order: the
 *                              request's indices are list positions
 *   validate                   evaluate refuses a request without inputs or outputs,
 *                              with 255 buffers or more, an index >= 255, procedure > 128
 *   alias_surfaces             one surface may be an input and an output of a request
 *   underlying_errors          compile errors wrap the compiler's under NSUnderlyingError
 *   diagnostics                the compiler says why it refused (0: "Validation
 *                              diagnostics: none", as macOS 26 reports)
 *   macos                      FAKE_ANE_MACOS: 14 has no -compileWithQoS:options:error:,
 *                              15 (default) both compile entry points, 26 an in-memory
 *                              compile that fails (the client's works)
 *   client_compile             -[_ANEClient compileModel:options:qos:error:] (0: fails)
 *   the daemon's cache         what compiled is kept by identifier: -compiledModelExists,
 *                              and -loadWithQoS loads it without compiling
 *   FAKE_ANE_FAMILY            a family file: the chip whose walls, budget and IOSurface row
 *                              alignment (surface_align: evaluate refuses other rows) it has
 *   compile budget             after FAKE_ANE_COMPILE_BUDGET (119) compiles per process
 *   load                       fake_ane_fail_loads(n) makes loads fail like a busy daemon
 *   unloaded model             evaluate fails
 *   surfaces                   count, index, size (at least the layout's extent) and CPU
 *                              locks are checked against the program
 * A net.plist program (+modelWithNetworkDescription:weights:optionsPlist:, weights keyed
 * weights.0 / weights.1, staged as net.plist and weights.N) is read with aneforge's
 * plist reader and rebuilt unit by unit from the project's ops (netplist_prog.c).
 * Each failure is also kept for fake_ane_last_error(). */
#define _DEFAULT_SOURCE 1 /* strdup, aligned_alloc */
#include "fake.h"
#include "fake_netplist.h"

#include "ane/darwin/ane_runtime.h"
#include "engine/family.h"
#include "mil/mil.h"
#include "ir/fp16.h"
#include "data/sha256.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PORTS 256
#define MAX_LOADED 128 /* programs loaded at once per process (ane-formats.md 4.4) */

static atomic_long compiles, evaluations, budget = -1, loaded;
/* The switches (fake_ane_set), strict by default. */
static struct { const char *name; atomic_long on; } switches[] = {
    { "weights_strict", 1 }, { "framework_files", 1 }, { "attributes", 1 },     { "padded_rows", 1 },
    { "shuffled_ports", 1 }, { "validate", 1 },        { "alias_surfaces", 1 }, { "underlying_errors", 1 },
    { "dict_order", 1 }, { "diagnostics", 1 },
    { "macos", 15 },         /* the OS profile (FAKE_ANE_MACOS): which compile entry point works */
    { "client_compile", 1 }, /* 0: -[_ANEClient compileModel:options:qos:error:] fails too */
};
static char model_root[1024];

int fake_ane_set(const char *name, long value);

/* $FAKE_ANE_SET ("name=0,name=1"): the switches for a whole process, read once. */
static void switches_from_env(void) {
    const char *os = getenv("FAKE_ANE_MACOS");
    if (os && *os) fake_ane_set("macos", atol(os));
    const char *env = getenv("FAKE_ANE_SET");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env ? env : "");
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq) {
            *eq = 0;
            fake_ane_set(item, atol(eq + 1));
        }
    }
}

static long sw(const char *name) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, switches_from_env);
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++)
        if (!strcmp(switches[i].name, name)) return atomic_load(&switches[i].on);
    return 0;
}

int fake_ane_set(const char *name, long value) {
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++)
        if (!strcmp(switches[i].name, name)) {
            atomic_store(&switches[i].on, value);
            return 1;
        }
    return 0;
}
static atomic_int failing_loads;
static char subtype[32] = "";
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void fake_ane_set_compile_budget(long n) { atomic_store(&budget, n); }
long fake_ane_compiles(void) { return atomic_load(&compiles); }
long fake_ane_evaluations(void) { return atomic_load(&evaluations); }
void fake_ane_fail_loads(int n) { atomic_store(&failing_loads, n); }
void fake_ane_set_model_root(const char *dir) {
    pthread_mutex_lock(&lock);
    snprintf(model_root, sizeof model_root, "%s", dir ? dir : "");
    pthread_mutex_unlock(&lock);
}

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

/* The family the fake's compiler enforces: $FAKE_ANE_FAMILY (a family file: the chip
 * the fake stands for, limits and all), else the one the subtype names. */
static af_family_id fake_family(void) {
    static af_family_id fam = AF_FAMILY_DEFAULT;
    static int read;
    af_family_id f;
    pthread_mutex_lock(&lock);
    if (!read) {
        const char *env = getenv("FAKE_ANE_FAMILY");
        read = 1;
        if (env && *env && ane_family_load(env, &fam)) {
            fake_note("FAKE_ANE_FAMILY: %s", af_error_message());
            fam = AF_FAMILY_DEFAULT;
        }
    }
    f = fam;
    pthread_mutex_unlock(&lock);
    return f != AF_FAMILY_DEFAULT ? f : ane_rt_family_of_subtype(current_subtype());
}

static long compile_budget(void) {
    long b = atomic_load(&budget);
    if (b < 0) {
        const char *env = getenv("FAKE_ANE_COMPILE_BUDGET"), *fam = getenv("FAKE_ANE_FAMILY");
        const ane_family_info *fi = fam && *fam ? ane_family_info_of(fake_family()) : NULL;
        b = env && *env ? atol(env) : fi ? (long)fi->compile_budget : 119;
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

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    return h;
}

/* An entry's first value: what the real descriptor sends -bytes and -length (and saves
 * under the entry's first key). An NSDictionary enumerates in an order of its hash
 * table, not the order its entries were given in: dict_order 1 takes the key with the
 * smallest FNV-1a hash first, 2 the largest, 0 the first given. */
static CFTypeRef first_value(CFTypeRef e, const char **key) {
    long order = sw("dict_order");
    *key = NULL;
    for (CFIndex i = 0; i < fake_dict_count(e); i++) {
        const char *k = fake_string_text(fake_dict_key(e, i));
        if (!k) continue;
        if (!*key || (order == 1 && fnv1a(k) < fnv1a(*key)) || (order == 2 && fnv1a(k) > fnv1a(*key))) *key = k;
    }
    return *key ? fake_dict_get(e, *key) : NULL;
}

/* The bytes a weights entry contributes: its first value (strict) or its "data". */
static const uint8_t *entry_bytes(CFTypeRef e, size_t *n) {
    const char *k;
    *n = 0;
    return sw("weights_strict") ? fake_data_bytes(first_value(e, &k), n) : fake_data_bytes(fake_dict_get(e, "data"), n);
}

/* weights: a dictionary of entries keyed "@model_path/..." (MIL) or "weights.0" /
 * "weights.1" (net.plist). Strict: nil is refused, and each entry is a non-empty
 * dictionary whose first value is NSData. Old: nil passes here (the compile fails
 * later) and each entry is {"offset": NSNumber, "data": NSData}. */
static int weights_ok(CFTypeRef w, int netplist) {
    int strict = (int)sw("weights_strict");
    if (!w) {
        if (strict) fake_note("+[_ANEInMemoryModelDescriptor ...:weights:optionsPlist:]: nil weights give a nil descriptor "
                              "(pass an empty dictionary when there are none)");
        return !strict;
    }
    if (fake_dict_count(w) < 0) {
        fake_note("+[_ANEInMemoryModelDescriptor modelWithMILText:weights:optionsPlist:]: weights is not a dictionary");
        return 0;
    }
    for (CFIndex i = 0; i < fake_dict_count(w); i++) {
        const char *k = fake_string_text(fake_dict_key(w, i)), *first;
        CFTypeRef e = k ? fake_dict_get(w, k) : NULL;
        int64_t off;
        size_t n;
        bool key_ok = k && (netplist ? !strcmp(k, "weights.0") || !strcmp(k, "weights.1") : !strncmp(k, "@model_path/", 12));
        if (!key_ok) {
            fake_note("+[_ANEInMemoryModelDescriptor ...:weights:optionsPlist:]: weights key %ld must be %s", (long)i,
                      netplist ? "\"weights.0\" or \"weights.1\"" : "an \"@model_path/...\" string");
            return 0;
        }
        if (strict && fake_dict_count(e) < 1) {
            fake_note("+[_ANEInMemoryModelDescriptor ...:weights:optionsPlist:]: weights[\"%s\"] is an empty entry (refused)", k);
            return 0;
        }
        if (strict && !fake_data_bytes(first_value(e, &first), &n)) {
            fake_note("+[_ANEInMemoryModelDescriptor ...:weights:optionsPlist:]: weights[\"%s\"]'s first value (under \"%s\") "
                      "is not NSData: the real descriptor sends it -bytes and raises (unrecognized selector)", k,
                      first ? first : "?");
            return 0;
        }
        if (!strict && (!fake_number(fake_dict_get(e, "offset"), &off) || !fake_data_bytes(fake_dict_get(e, "data"), &n))) {
            fake_note("+[_ANEInMemoryModelDescriptor ...:weights:optionsPlist:]: weights entry %ld must map %s to "
                      "{offset: NSNumber, data: NSData}", (long)i, k);
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

/* A port's layout on its surface: dims batch, channel, depth, height, width (the shape
 * right-aligned, leading dims folded into the batch) and byte strides batch, plane,
 * depth, row. */
typedef struct { int64_t dim[5], stride[4]; size_t extent; } flayout;

static flayout layout_of(const af_tensor *t, int padded) {
    flayout l = { { 1, 1, 1, 1, 1 }, { 0 }, 0 };
    int r = t->shape.rank;
    for (int k = 0; k < r; k++) {
        int slot = 5 - r + k;
        if (slot < 0) l.dim[0] *= t->shape.dim[k];
        else l.dim[slot] *= t->shape.dim[k];
    }
#define ALIGN64(x) (padded ? ((x) + 63) / 64 * 64 : (x))
    l.stride[3] = ALIGN64(l.dim[4] * 2);
    l.stride[2] = ALIGN64(l.stride[3] * l.dim[3]);
#undef ALIGN64
    l.stride[1] = l.stride[2] * l.dim[2];
    l.stride[0] = l.stride[1] * l.dim[1];
    l.extent = (size_t)(l.stride[0] * l.dim[0]);
    return l;
}

/* Between a surface in layout l and packed fp16 values. */
static void layout_copy(const flayout *l, uint8_t *surface, uint16_t *packed, int to_surface) {
    size_t row = (size_t)l->dim[4] * 2;
    for (int64_t b = 0; b < l->dim[0]; b++)
        for (int64_t c = 0; c < l->dim[1]; c++)
            for (int64_t d = 0; d < l->dim[2]; d++)
                for (int64_t y = 0; y < l->dim[3]; y++, packed += l->dim[4]) {
                    uint8_t *at = surface + b * l->stride[0] + c * l->stride[1] + d * l->stride[2] + y * l->stride[3];
                    if (to_surface) memcpy(at, packed, row);
                    else memcpy(packed, at, row);
                }
}

/* rm -r (the framework deletes a model's folder on unload). */
static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st)) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[1600];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        if (d) closedir(d);
        rmdir(path);
    } else unlink(path);
}

typedef struct {
    struct objc_object h;
    fdesc *desc;
    int state;
    char hex[200];
    char dir[1300];  /* -localModelPath */
    mil_module mod;
    af_model *prog;
    int out_u8;      /* a net.plist whose output is UInt8: 2-byte cells, the low byte the value */
    /* what -modelAttributes publishes, fixed at load: per list position, the program port
     * and its layout */
    int in_port[MAX_PORTS], out_port[MAX_PORTS];
    flayout in_lay[MAX_PORTS], out_lay[MAX_PORTS];
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
     * (the fake hashes the options' keys and each weights entry's first value, whose
     * -bytes and -length the real descriptor reads) */
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
        const uint8_t *b = entry_bytes(fake_dict_get(m->desc->weights, k), &n);
        data_sha256_update(&c, b, n);
    }
    data_sha256_final(&c, dg);
    data_sha256_hex(dg, hx[2]);
    snprintf(m->hex, sizeof m->hex, "%.64s_%.64s_%.64s", hx[0], hx[1], hx[2]);
    pthread_mutex_lock(&lock);
    if (model_root[0]) snprintf(m->dir, sizeof m->dir, "%s/%s", model_root, m->hex);
    pthread_mutex_unlock(&lock);
    if (!m->dir[0]) snprintf(m->dir, sizeof m->dir, "%s%s", fake_string_text(NSTemporaryDirectory()), m->hex);
    return fake_autorelease(m);
}

static id model_path(id self, SEL op) { (void)op; return fake_autorelease((void *)fake_string(((fmodel *)self)->dir)); }

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
        return fake_error("ANECCompile() FAILED: cannot read %s: write %s (and the weights) into the model's "
                          "-localModelPath before compiling", path, main_file);
    bool same = n == want_n && !memcmp(text, want, n);
    free(text);
    if (!same) return fake_error("ANECCompile() FAILED: %s differs from the descriptor's MIL text", path);
    for (CFIndex i = 0; i < fake_dict_count(m->desc->weights); i++) {
        const char *k = fake_string_text(fake_dict_key(m->desc->weights, i));
        const uint8_t *b = entry_bytes(fake_dict_get(m->desc->weights, k), &want_n);
        snprintf(path, sizeof path, "%s/%s", dir, m->desc->netplist ? k : k + 12);
        char *disk = read_file(path, &n);
        same = disk && n == want_n && !memcmp(disk, b, n);
        free(disk);
        if (!same) return fake_error("ANECCompile() FAILED: %s is missing or differs from the descriptor's weights[\"%s\"]", path, k);
    }
    return NULL;
}

/* A compiler failure: as the framework reports it, an error of its own with the
 * compiler's under NSUnderlyingError (underlying_errors), or the compiler's text alone. */
static id compile_error(const char *detail) {
    if (!sw("diagnostics")) detail = "Validation diagnostics: none"; /* as macOS 26 reports (Espresso issue 18) */
    if (!sw("underlying_errors")) return fake_error("ANECCompile() FAILED: %s", detail);
    char copy[900];
    snprintf(copy, sizeof copy, "%s", detail); /* detail may be the last error fake_error overwrites */
    id under = fake_error("ANECCompile() FAILED: %s", copy);
    return fake_error_wrap(under, "Error Domain=com.apple.appleneuralengine Code=3 \"compilation failure\"");
}

static void write_whole(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        if (n) fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* What the framework saves itself on compile: the descriptor's text as net.plist (MIL
 * too), and each weights entry's first value under the entry's first key. */
static void save_model_files(fmodel *m) {
    char path[1600];
    size_t n;
    mkdir(m->dir, 0700);
    const uint8_t *text = fake_data_bytes(m->desc->mil, &n);
    snprintf(path, sizeof path, "%s/net.plist", m->dir);
    write_whole(path, text, n);
    for (CFIndex i = 0; i < fake_dict_count(m->desc->weights); i++) {
        const char *k;
        const uint8_t *b = fake_data_bytes(first_value(fake_dict_get(m->desc->weights, fake_string_text(fake_dict_key(m->desc->weights, i))), &k), &n);
        if (!b || strstr(k, "..") || k[0] == '/') continue;
        snprintf(path, sizeof path, "%s/%s", m->dir, k);
        char *slash = strrchr(path, '/');
        if (slash && slash > path + strlen(m->dir)) { /* weights/weight.bin: its folder first */
            *slash = 0;
            mkdir(path, 0700);
            *slash = '/';
        }
        write_whole(path, b, n);
    }
}

/* The program parsed and compiled as the engine the fake stands for: ane-sim's model of
 * it, whose family walls refuse here as ANECCompile would and whose run has the family's
 * fp16 numerics. From the source bytes (a MIL file's weights given in memory). */
static id build_program(fmodel *m, int netplist, const uint8_t *text, size_t n, const uint8_t *w0, size_t w0n,
                        const uint8_t *w1, size_t w1n) {
    if (netplist) {
        char why[600] = "";
        if (!fake_netplist_build(text, n, w0, w0n, w1, w1n, &m->mod, &m->out_u8, why, sizeof why)) return compile_error(why);
    } else {
        mil_blobsrc blob = { AF_MIL_WEIGHT_PATH, w0, w0n };
        mil_read_opts ro = { .source_name = "model.mil", .model_dir = m->dir, .nblobs = w0 ? 1 : 0, .blobs = &blob };
        if (mil_parse((const char *)text, n, &ro, &m->mod)) return compile_error(af_error_message());
    }
    if (m->mod.nin > MAX_PORTS || m->mod.nout > MAX_PORTS)
        return fake_error("ANECCompile() FAILED: more than %d inputs or outputs", MAX_PORTS);
    af_compile_opts co = { .target = AF_TARGET_ANE_SIM, .sim_engine = sim_engine(), .family = fake_family(),
                           .threads = 1, .via_mil = AF_OFF, .precision_check = AF_OFF }; /* a host heuristic, not the engine's */
    if (!(m->prog = af_compile(m->mod.g, m->mod.nin, m->mod.in, m->mod.nout, m->mod.out, &co)))
        return compile_error(af_error_message());
    return NULL;
}

static void program_drop(fmodel *m) {
    af_model_free(m->prog);
    af_graph_free(m->mod.g);
    m->prog = NULL;
    memset(&m->mod, 0, sizeof m->mod);
}

/* ---------------------------------------------------------------- the daemon's compiled programs */

/* What aned keeps of each compiled program, by the in-memory model's identifier
 * (maderix/ANE issue 24: -compiledModelExists answers YES for it and -loadWithQoS loads
 * it without compiling; kANEFInMemoryModelIdentifierKey names it to -[_ANEClient
 * compileModel:...]). Here: the program's source, rebuilt at load; the newest 512. */
typedef struct fcompiled {
    struct fcompiled *next;
    char hex[200];
    int netplist;
    uint8_t *b[3]; /* text, weights (MIL: weight.bin; net.plist: weights.0, weights.1) */
    size_t n[3];
} fcompiled;
static fcompiled *daemon_cache;
static pthread_mutex_t daemon_lock = PTHREAD_MUTEX_INITIALIZER;

static void compiled_free(fcompiled *c) {
    for (int i = 0; c && i < 3; i++) free(c->b[i]);
    free(c);
}

static void daemon_keep(const char *hex, int netplist, const uint8_t *const b[3], const size_t n[3]) {
    fcompiled *c = calloc(1, sizeof *c);
    if (!c) return;
    snprintf(c->hex, sizeof c->hex, "%s", hex);
    c->netplist = netplist;
    for (int i = 0; i < 3; i++)
        if (b[i] && (c->b[i] = malloc(n[i] + 1))) {
            memcpy(c->b[i], b[i], n[i]);
            c->n[i] = n[i];
        }
    pthread_mutex_lock(&daemon_lock);
    int k = 0;
    for (fcompiled **q = &daemon_cache; *q;) {
        if (!strcmp((*q)->hex, hex) || ++k >= 512) {
            fcompiled *old = *q;
            *q = old->next;
            compiled_free(old);
        } else q = &(*q)->next;
    }
    c->next = daemon_cache;
    daemon_cache = c;
    pthread_mutex_unlock(&daemon_lock);
}

/* Rebuilds the program aned keeps for m's identifier into m; 0 when it keeps none. */
static int daemon_load(fmodel *m, id *e) {
    pthread_mutex_lock(&daemon_lock);
    fcompiled *c = daemon_cache;
    while (c && strcmp(c->hex, m->hex)) c = c->next;
    if (c) {
        *e = build_program(m, c->netplist, c->b[0], c->n[0], c->b[1], c->n[1], c->b[2], c->n[2]);
    }
    pthread_mutex_unlock(&daemon_lock);
    return c != NULL;
}

static BOOL model_compiled_exists(id self, SEL op) {
    (void)op;
    pthread_mutex_lock(&daemon_lock);
    fcompiled *c = daemon_cache;
    while (c && strcmp(c->hex, ((fmodel *)self)->hex)) c = c->next;
    pthread_mutex_unlock(&daemon_lock);
    return c != NULL;
}

/* Counts a compile against the daemon's per-process budget; the error past it. */
static id spend_compile(void) {
    long k = atomic_fetch_add(&compiles, 1) + 1;
    if (k > compile_budget())
        return fake_error("ANECCompile() FAILED: compile %ld in this process; the daemon allows about %ld per "
                          "process (restart the process or reuse compiled programs)", k, compile_budget());
    return NULL;
}

static BOOL model_compile(id self, SEL op, unsigned qos, id options, id *err) {
    (void)op; (void)qos;
    fmodel *m = (fmodel *)self;
    if (options && fake_dict_count(options) < 0) return fail(err, fake_error("compileWithQoS: options must be a dictionary"));
    id e = spend_compile();
    if (e) return fail(err, e);
    if (m->state != CREATED) return fail(err, fake_error("compileWithQoS: the model is already compiled"));
    if (sw("macos") >= 26) /* the profile whose in-memory compile entry point is broken */
        return fail(err, fake_error_wrap(fake_error("compileModelAtURL: failed (FAKE_ANE_MACOS=%ld: this entry point is "
                                                    "broken here; -[_ANEClient compileModel:options:qos:error:] works)",
                                                    sw("macos")),
                                         "-[_ANEInMemoryModel compileWithQoS:options:error:]: compile entry point failed"));
    if (!m->desc->weights) {
        fake_note("compileWithQoS: failed silently: the descriptor's weights dictionary was nil (pass an empty dictionary)");
        return fail(err, NULL);
    }
    e = check_staged(m, m->dir);
    if (e) return fail(err, e);
    if (sw("framework_files")) save_model_files(m);
    const uint8_t *b[3] = { NULL, NULL, NULL };
    size_t n[3] = { 0, 0, 0 };
    b[0] = fake_data_bytes(m->desc->mil, &n[0]);
    if (m->desc->netplist) {
        b[1] = entry_bytes(fake_dict_get(m->desc->weights, "weights.0"), &n[1]);
        b[2] = entry_bytes(fake_dict_get(m->desc->weights, "weights.1"), &n[2]);
        e = build_program(m, 1, b[0], n[0], b[1], n[1], b[2], n[2]);
    } else {
        e = build_program(m, 0, b[0], n[0], NULL, 0, NULL, 0); /* weights from the staged folder */
    }
    if (e) {
        program_drop(m);
        return fail(err, e);
    }
    if (!m->desc->netplist) { /* aned keeps the compiled program, weights and all */
        char path[1400];
        snprintf(path, sizeof path, "%s/weights/weight.bin", m->dir);
        uint8_t *w = (uint8_t *)read_file(path, &n[1]);
        b[1] = w;
        if (!w) n[1] = 0;
        daemon_keep(m->hex, 0, b, n);
        free(w);
    } else {
        daemon_keep(m->hex, 1, b, n);
    }
    m->state = COMPILED;
    return YES;
}

/* The live port lists, fixed at load: list position j holds port j, or port n-1-j
 * (shuffled_ports), in the padded or packed layout. */
static void plan_ports(fmodel *m) {
    int shuffled = (int)sw("shuffled_ports"), padded = (int)sw("padded_rows");
    for (int j = 0; j < m->mod.nin; j++) {
        m->in_port[j] = shuffled ? m->mod.nin - 1 - j : j;
        m->in_lay[j] = layout_of(m->mod.in[m->in_port[j]], padded);
    }
    for (int j = 0; j < m->mod.nout; j++) {
        m->out_port[j] = shuffled ? m->mod.nout - 1 - j : j;
        m->out_lay[j] = layout_of(m->mod.out[m->out_port[j]], padded);
    }
}

static BOOL model_load(id self, SEL op, unsigned qos, id options, id *err) {
    (void)op; (void)qos; (void)options;
    fmodel *m = (fmodel *)self;
    if (m->state == LOADED) return YES;
    int busy = atomic_load(&failing_loads);
    if (busy > 0) {
        atomic_store(&failing_loads, busy - 1);
        return fail(err, fake_error("ANEProgramLoad() failed: no free program slot (the daemon reclaims them lazily; retry)"));
    }
    if (m->state == CREATED) { /* compiled before (or through _ANEClient): aned loads what it kept */
        id e = NULL;
        if (!daemon_load(m, &e))
            return fail(err, fake_error("loadWithQoS: the model is not compiled (call -compileWithQoS:options:error: first, or "
                                        "-[_ANEClient compileModel:options:qos:error:] with its identifier)"));
        if (e) {
            program_drop(m);
            return fail(err, e);
        }
        m->state = COMPILED;
    }
    if (atomic_fetch_add(&loaded, 1) >= MAX_LOADED) {
        atomic_fetch_sub(&loaded, 1);
        return fail(err, fake_error("ANEProgramLoad() failed: %d programs are loaded in this process; unload one first", MAX_LOADED));
    }
    plan_ports(m);
    m->state = LOADED;
    return YES;
}

static BOOL model_unload(id self, SEL op, unsigned qos, id *err) {
    (void)op; (void)qos;
    fmodel *m = (fmodel *)self;
    if (m->state != LOADED) return fail(err, fake_error("unloadWithQoS: the model is not loaded"));
    atomic_fetch_sub(&loaded, 1);
    m->state = COMPILED;
    if (sw("framework_files")) remove_tree(m->dir);
    return YES;
}

/* ---------------------------------------------------------------- -modelAttributes */

static void set_num(CFTypeRef *keys, CFTypeRef *vals, int *n, const char *k, int64_t v) {
    keys[*n] = fake_string(k);
    vals[*n] = CFNumberCreate(NULL, kCFNumberSInt64Type, &v);
    (*n)++;
}

static CFTypeRef port_entry(const char *symbol, const flayout *l) {
    CFTypeRef keys[12], vals[12];
    int n = 0;
    keys[n] = fake_string("Symbol");
    vals[n++] = fake_string(symbol);
    static const char *const dims[5] = { "Batches", "Channels", "Depth", "Height", "Width" };
    static const char *const strides[4] = { "BatchStride", "PlaneStride", "DepthStride", "RowStride" };
    for (int k = 0; k < 5; k++) set_num(keys, vals, &n, dims[k], l->dim[k]);
    for (int k = 0; k < 4; k++) set_num(keys, vals, &n, strides[k], l->stride[k]);
    CFTypeRef d = CFDictionaryCreate(NULL, (const void **)keys, (const void **)vals, n, &kCFTypeDictionaryKeyCallBacks,
                                     &kCFTypeDictionaryValueCallBacks);
    for (int i = 0; i < n; i++) {
        fake_release((void *)keys[i]);
        fake_release((void *)vals[i]);
    }
    return d;
}

static CFTypeRef port_list(fmodel *m, int inputs) {
    int n = inputs ? m->mod.nin : m->mod.nout;
    CFTypeRef *items = calloc((size_t)n + 1, sizeof *items);
    for (int j = 0; items && j < n; j++) {
        int port = inputs ? m->in_port[j] : m->out_port[j];
        items[j] = port_entry(inputs ? m->mod.in_names[port] : m->mod.out_names[port], inputs ? &m->in_lay[j] : &m->out_lay[j]);
    }
    CFTypeRef a = items ? CFArrayCreate(NULL, (const void **)items, n, &kCFTypeArrayCallBacks) : NULL;
    for (int j = 0; items && j < n; j++) fake_release((void *)items[j]);
    free(items);
    return a;
}

/* {NetworkStatusList: [{LiveInputList: [...], LiveOutputList: [...]}]} once loaded. */
static id model_attributes(id self, SEL op) {
    (void)op;
    fmodel *m = (fmodel *)self;
    if (m->state != LOADED || !sw("attributes")) return NULL;
    CFTypeRef keys[2] = { fake_string("LiveInputList"), fake_string("LiveOutputList") };
    CFTypeRef vals[2] = { port_list(m, 1), port_list(m, 0) };
    CFTypeRef net = CFDictionaryCreate(NULL, (const void **)keys, (const void **)vals, 2, &kCFTypeDictionaryKeyCallBacks,
                                       &kCFTypeDictionaryValueCallBacks);
    CFTypeRef list = CFArrayCreate(NULL, (const void **)&net, 1, &kCFTypeArrayCallBacks);
    CFTypeRef top_key = fake_string("NetworkStatusList");
    CFTypeRef top = CFDictionaryCreate(NULL, (const void **)&top_key, (const void **)&list, 1, &kCFTypeDictionaryKeyCallBacks,
                                       &kCFTypeDictionaryValueCallBacks);
    CFTypeRef all[6] = { keys[0], keys[1], vals[0], vals[1], net, list };
    for (int i = 0; i < 6; i++) fake_release((void *)all[i]);
    fake_release((void *)top_key);
    return fake_autorelease((void *)top);
}

/* ---------------------------------------------------------------- evaluate */

/* -[_ANERequest validate], as the real evaluate runs it. */
static id validate(frequest *r) {
    CFIndex ni = fake_array_count(r->ins), no = fake_array_count(r->outs);
    int64_t proc = 0;
    fake_number(r->proc, &proc);
    if (ni < 1 || no < 1) return fake_error("evaluate: -[_ANERequest validate]: a request needs inputs and outputs (%ld, %ld)", (long)ni, (long)no);
    if (ni + no >= 255) return fake_error("evaluate: -[_ANERequest validate]: %ld buffers; fewer than 255 allowed", (long)(ni + no));
    for (int o = 0; o < 2; o++)
        for (CFIndex k = 0; k < (o ? no : ni); k++) {
            int64_t i = 0;
            fake_number(fake_array_get(o ? r->out_idx : r->in_idx, k), &i);
            if (i < 0 || i >= 255) return fake_error("evaluate: -[_ANERequest validate]: index %lld is not below 255", (long long)i);
        }
    if (proc < 0 || proc > 128) return fake_error("evaluate: -[_ANERequest validate]: procedure index %lld above 128", (long long)proc);
    return NULL;
}

/* The surfaces of a request's inputs or outputs, by the program's port: list position
 * i (the request's index) is port in_port[i]. */
static id bind(fmodel *m, CFTypeRef objs, CFTypeRef idx, int is_in, uint8_t **base, const flayout **lay) {
    int n = is_in ? m->mod.nin : m->mod.nout;
    const char *what = is_in ? "input" : "output";
    if (fake_array_count(objs) != n)
        return fake_error("evaluate: the request binds %ld %s surfaces; the program has %d", (long)fake_array_count(objs), what, n);
    const ane_family_info *fi = ane_family_info_of(fake_family());
    int64_t align = fi ? fi->surface_align : 0; /* the family's rule, when its file gives one */
    for (int i = 0; i < n; i++) base[i] = NULL;
    for (int k = 0; k < n; k++) {
        int64_t i;
        fake_number(fake_array_get(idx, k), &i);
        if (i < 0 || i >= n || base[is_in ? m->in_port[i] : m->out_port[i]])
            return fake_error("evaluate: %s index %lld is out of range or bound twice", what, (long long)i);
        int port = is_in ? m->in_port[i] : m->out_port[i];
        const flayout *l = is_in ? &m->in_lay[i] : &m->out_lay[i];
        const char *name = is_in ? m->mod.in_names[port] : m->mod.out_names[port];
        size_t have;
        int locked;
        fake_surface(((fsurfobj *)fake_array_get(objs, k))->s, &base[port], &have, &locked);
        lay[port] = l;
        if (have < l->extent)
            return fake_error("evaluate: %s surface %d (%s) holds %zu bytes; its layout needs at least %zu: surfaces bound "
                              "in the wrong order or sized for another tensor", what, k, name, have, l->extent);
        if (locked) return fake_error("evaluate: %s surface %d (%s) is still locked by the CPU", what, k, name);
        size_t row = fake_surface_row_bytes(((fsurfobj *)fake_array_get(objs, k))->s);
        if (align > 0 && row % (size_t)align)
            return fake_error("evaluate: %s surface %d (%s) has %zu-byte rows, not a multiple of %lld: this engine needs "
                              "IOSurface rows aligned to %lld bytes", what, k, name, row, (long long)align, (long long)align);
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
    const flayout *il[MAX_PORTS], *ol[MAX_PORTS];
    id e = sw("validate") ? validate(r) : NULL;
    if (!e) e = bind(m, r->ins, r->in_idx, 1, ib, il);
    if (!e) e = bind(m, r->outs, r->out_idx, 0, ob, ol);
    for (int o = 0; !e && !sw("alias_surfaces") && o < m->mod.nout; o++)
        for (int i = 0; i < m->mod.nin; i++)
            if (ob[o] == ib[i]) {
                e = fake_error("evaluate: output %d's surface is also input %d's: this framework refuses one surface in both lists", o, i);
                break;
            }
    if (e) return fail(err, e);
    /* inputs are read whole before any output is written: an output may be an input's surface */
    af_buffer in[MAX_PORTS], out[MAX_PORTS];
    uint16_t *copies[MAX_PORTS] = { 0 }, *results[MAX_PORTS] = { 0 };
    bool ok = true;
    for (int i = 0; i < m->mod.nin; i++) {
        int64_t n = af_shape_count(m->mod.in[i]->shape);
        ok &= (copies[i] = malloc((size_t)n * 2)) != NULL;
        if (copies[i]) layout_copy(il[i], ib[i], copies[i], 0);
        in[i] = (af_buffer){ copies[i], AF_F16, n };
    }
    for (int i = 0; i < m->mod.nout; i++) {
        int64_t n = af_shape_count(m->mod.out[i]->shape);
        ok &= (results[i] = malloc((size_t)n * 2)) != NULL;
        out[i] = (af_buffer){ results[i], AF_F16, n };
    }
    ok = ok && af_run(m->prog, in, out) == AF_OK;
    const char *why = ok ? "" : af_error_message();
    for (int i = 0; ok && i < m->mod.nout; i++) {
        if (m->out_u8) /* the engine writes the UInt8 value into the low byte of each 2-byte cell */
            for (int64_t k = 0; k < out[i].count; k++) {
                float v;
                ir_f16_to_f32_array(&results[i][k], &v, 1);
                results[i][k] = (uint16_t)(uint8_t)v;
            }
        layout_copy(ol[i], ob[i], results[i], 1);
    }
    for (int i = 0; i < m->mod.nin; i++) free(copies[i]);
    for (int i = 0; i < m->mod.nout; i++) free(results[i]);
    if (!ok) return fail(err, fake_error("evaluate: the program failed: %s", why));
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
    { "localModelPath", (void (*)(void))model_path },
    { "modelAttributes", (void (*)(void))model_attributes },
    { "compiledModelExists", (void (*)(void))model_compiled_exists },
};
static struct objc_class model_meta = { NULL, 0, "_ANEInMemoryModel", NULL, model_cm, 1, 0, NULL, 1 };
static struct objc_class c_model = { &model_meta, 0, "_ANEInMemoryModel", &fake_NSObject, model_im, 8, 0, model_dealloc, 0 };

/* The OS profiles (FAKE_ANE_MACOS; which macOS does what is not known, these are the
 * shapes of failure users report): 14, no -compileWithQoS:options:error: on
 * _ANEInMemoryModel; 15 (the default), every entry point works; 26, the in-memory
 * compile fails (model_compile). */
int fake_selector_hidden(Class cls, const char *name) {
    return cls == &c_model && sw("macos") <= 14 && !strcmp(name, "compileWithQoS:options:error:");
}

/* ---------------------------------------------------------------- NSURL, _ANEModel, _ANEClient */

/* +[NSURL fileURLWithPath:isDirectory:] and -path: all the runtime needs of a URL. */
typedef struct { struct objc_object h; CFStringRef path; } furl;
static void url_dealloc(void *o) { fake_release((void *)((furl *)o)->path); }
static id url_new(Class self, SEL op, id path, BOOL dir) {
    (void)op; (void)dir;
    if (!fake_string_text(path)) {
        fake_note("+[NSURL fileURLWithPath:isDirectory:]: the path is not an NSString");
        return NULL;
    }
    furl *u = fake_new(self, sizeof *u);
    if (!u) return NULL;
    fake_retain(path);
    u->path = (CFStringRef)path;
    return fake_autorelease(u);
}
static id url_path(id self, SEL op) { (void)op; return (id)((furl *)self)->path; }
static const fake_method url_cm[] = { { "fileURLWithPath:isDirectory:", (void (*)(void))url_new } };
static const fake_method url_im[] = { { "path", (void (*)(void))url_path } };
static struct objc_class url_meta = { NULL, 0, "NSURL", NULL, url_cm, 1, 0, NULL, 1 };
static struct objc_class c_url = { &url_meta, 0, "NSURL", &fake_NSObject, url_im, 1, 0, url_dealloc, 0 };

/* +[_ANEModel modelAtURL:key:]: a compiled-or-to-compile model on disk (the folder). */
typedef struct { struct objc_object h; furl *url; CFStringRef key; } fanemodel;
static void anemodel_dealloc(void *o) {
    fake_release(((fanemodel *)o)->url);
    fake_release((void *)((fanemodel *)o)->key);
}
static id anemodel_new(Class self, SEL op, id url, id key) {
    (void)op;
    if (!fake_is(url, &c_url) || !fake_string_text(key)) {
        fake_note("+[_ANEModel modelAtURL:key:]: the URL must be an NSURL and the key an NSString");
        return NULL;
    }
    fanemodel *a = fake_new(self, sizeof *a);
    if (!a) return NULL;
    fake_retain(url);
    fake_retain(key);
    a->url = (furl *)url;
    a->key = (CFStringRef)key;
    return fake_autorelease(a);
}
static const fake_method anemodel_cm[] = { { "modelAtURL:key:", (void (*)(void))anemodel_new } };
static struct objc_class anemodel_meta = { NULL, 0, "_ANEModel", NULL, anemodel_cm, 1, 0, NULL, 1 };
static struct objc_class c_anemodel = { &anemodel_meta, 0, "_ANEModel", &fake_NSObject, NULL, 0, 0, anemodel_dealloc, 0 };

/* The option keys and values the framework exports (immortal CFStrings; the real
 * constants' text is not known, so the runtime looks the symbols up). */
typedef struct { struct objc_object h; const char *s; } fkey;
#define KEY(var)                                                          \
    static fkey var##_obj = { { &fake_CFString, 1L << 40 }, #var };       \
    const CFStringRef var = (CFStringRef)&var##_obj;
KEY(kANEFModelTypeKey)
KEY(kANEFModelMILValue)
KEY(kANEFModelANECIRValue)
KEY(kANEFInMemoryModelIdentifierKey)
KEY(kANEFInMemoryModelIsCachedKey)
#undef KEY

/* The daemon connection: one per process, never freed. */
static struct objc_class client_meta, c_client;
static struct objc_object shared_client = { &c_client, 1L << 40 };
static id client_shared(Class self, SEL op) { (void)self; (void)op; return &shared_client; }

/* -[_ANEClient compileModel:options:qos:error:]: compiles the files in the model's
 * folder (model.mil and weights/weight.bin, or net.plist and weights.N) and keeps the
 * result under options[kANEFInMemoryModelIdentifierKey], where the in-memory model of
 * that identifier loads it. The same per-process budget as -compileWithQoS. */
static BOOL client_compile(id self, SEL op, id model, id options, unsigned qos, id *err) {
    (void)self; (void)op; (void)qos;
    if (!fake_is(model, &c_anemodel)) return fail(err, fake_error("compileModel: the model is not an _ANEModel"));
    const char *type = fake_string_text(fake_dict_get(options, "kANEFModelTypeKey"));
    const char *hex = fake_string_text(fake_dict_get(options, "kANEFInMemoryModelIdentifierKey"));
    if (!type || (strcmp(type, "kANEFModelMILValue") && strcmp(type, "kANEFModelANECIRValue")))
        return fail(err, fake_error("compileModel: options[kANEFModelTypeKey] must be kANEFModelMILValue or kANEFModelANECIRValue"));
    if (!hex)
        return fail(err, fake_error("compileModel: no options[kANEFInMemoryModelIdentifierKey]: the compiled program could not "
                                    "be found by an in-memory model"));
    id e = spend_compile();
    if (e) return fail(err, e);
    if (!sw("client_compile"))
        return fail(err, fake_error("-[_ANEClient compileModel:options:qos:error:]: ANECCompile() FAILED (the fake's "
                                    "client_compile=0)"));
    int netplist = !strcmp(type, "kANEFModelANECIRValue");
    const char *dir = fake_string_text(((fanemodel *)model)->url->path);
    static const char *const files[2][3] = { { "model.mil", "weights/weight.bin", NULL }, { "net.plist", "weights.0", "weights.1" } };
    uint8_t *b[3] = { NULL, NULL, NULL };
    size_t n[3] = { 0, 0, 0 };
    char path[1400];
    for (int i = 0; i < 3 && files[netplist][i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[netplist][i]);
        b[i] = (uint8_t *)read_file(path, &n[i]);
        if (!b[i]) n[i] = 0;
    }
    fmodel scratch;
    memset(&scratch, 0, sizeof scratch);
    snprintf(scratch.dir, sizeof scratch.dir, "%s", dir);
    e = !b[0] ? fake_error("ANECCompile() FAILED: cannot read %s/%s", dir, files[netplist][0])
              : build_program(&scratch, netplist, b[0], n[0], b[1], n[1], b[2], n[2]);
    program_drop(&scratch);
    if (!e) daemon_keep(hex, netplist, (const uint8_t *const *)b, n);
    for (int i = 0; i < 3; i++) free(b[i]);
    return e ? fail(err, e) : YES;
}
static const fake_method client_cm[] = { { "sharedConnection", (void (*)(void))client_shared } };
static const fake_method client_im[] = { { "compileModel:options:qos:error:", (void (*)(void))client_compile } };
static struct objc_class client_meta = { NULL, 0, "_ANEClient", NULL, client_cm, 1, 0, NULL, 1 };
static struct objc_class c_client = { &client_meta, 0, "_ANEClient", &fake_NSObject, client_im, 1, 0, NULL, 0 };

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
    Class all[] = { &c_desc, &c_model, &c_request, &c_surfobj, &c_device, &c_probe, &c_url, &c_anemodel, &c_client };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fake_register(all[i]);
}

FAKE_HIDDEN void fake_register_all(void);
void fake_register_all(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_all);
}
