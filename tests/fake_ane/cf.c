/* The fake's CoreFoundation: CFString, CFData, CFNumber, CFDictionary, CFArray and
 * NSError, each an object of the fake's Objective-C runtime (toll-free bridged, as on
 * macOS), with the CF functions the runtime calls. The allocator argument must be
 * NULL or the default allocator; collections retain their elements only with the
 * kCFType callbacks, as CF does. */
#define _DEFAULT_SOURCE 1 /* strdup, aligned_alloc */
#include "fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TYPE_STRING = 7, TYPE_DATA = 20, TYPE_NUMBER = 22, TYPE_DICT = 18, TYPE_ARRAY = 19, TYPE_ERROR = 35 };

typedef struct { struct objc_object h; char *s; } fstring;
typedef struct { struct objc_object h; uint8_t *bytes; size_t n; } fdata;
typedef struct { struct objc_object h; int64_t v; } fnumber;
typedef struct { struct objc_object h; CFIndex n; int retains; CFTypeRef *keys, *vals; } fdict;
typedef struct { struct objc_object h; CFIndex n; int retains; CFTypeRef *vals; } farray;
typedef struct { struct objc_object h; CFStringRef text; CFDictionaryRef info; } fnserror;

const CFAllocatorRef kCFAllocatorDefault = NULL;
const CFDictionaryKeyCallBacks kCFTypeDictionaryKeyCallBacks = { 0 };
const CFDictionaryValueCallBacks kCFTypeDictionaryValueCallBacks = { 0 };
const CFArrayCallBacks kCFTypeArrayCallBacks = { 0 };

static char last_error[1024];
const char *fake_ane_last_error(void) { return last_error; }

void fake_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- classes */

static void string_dealloc(void *o) { free(((fstring *)o)->s); }
static void data_dealloc(void *o) { free(((fdata *)o)->bytes); }
static void dict_dealloc(void *o) {
    fdict *d = o;
    for (CFIndex i = 0; d->retains && i < d->n; i++) {
        fake_release((void *)d->keys[i]);
        fake_release((void *)d->vals[i]);
    }
    free(d->keys);
    free(d->vals);
}
static void array_dealloc(void *o) {
    farray *a = o;
    for (CFIndex i = 0; a->retains && i < a->n; i++) fake_release((void *)a->vals[i]);
    free(a->vals);
}
static void error_dealloc(void *o) {
    fake_release((void *)((fnserror *)o)->text);
    fake_release((void *)((fnserror *)o)->info);
}

static id error_text(id self, SEL op) { (void)op; return (id)((fnserror *)self)->text; }
static id error_info(id self, SEL op) { (void)op; return (id)((fnserror *)self)->info; }
static const fake_method error_methods[] = {
    { "localizedDescription", (void (*)(void))error_text },
    { "description", (void (*)(void))error_text },
    { "userInfo", (void (*)(void))error_info },
};

struct objc_class fake_CFString = { NULL, 0, "__NSCFString", &fake_NSObject, NULL, 0, TYPE_STRING, string_dealloc, 0 };
struct objc_class fake_CFData = { NULL, 0, "__NSCFData", &fake_NSObject, NULL, 0, TYPE_DATA, data_dealloc, 0 };
struct objc_class fake_CFNumber = { NULL, 0, "__NSCFNumber", &fake_NSObject, NULL, 0, TYPE_NUMBER, NULL, 0 };
struct objc_class fake_CFDictionary = { NULL, 0, "__NSCFDictionary", &fake_NSObject, NULL, 0, TYPE_DICT, dict_dealloc, 0 };
struct objc_class fake_CFArray = { NULL, 0, "__NSCFArray", &fake_NSObject, NULL, 0, TYPE_ARRAY, array_dealloc, 0 };
struct objc_class fake_NSError = { NULL, 0, "NSError", &fake_NSObject, error_methods, 3, TYPE_ERROR, error_dealloc, 0 };

static void check_allocator(CFAllocatorRef a, const char *fn) {
    if (a != NULL) fake_note("%s: the fake knows only the default allocator (pass NULL or kCFAllocatorDefault)", fn);
}

/* ---------------------------------------------------------------- CF functions */

CFTypeRef CFRetain(CFTypeRef cf) {
    if (!cf) {
        fprintf(stderr, "fake AppleNeuralEngine: CFRetain(NULL): CoreFoundation would crash here\n");
        abort();
    }
    fake_retain((void *)cf);
    return cf;
}

void CFRelease(CFTypeRef cf) {
    if (!cf) {
        fprintf(stderr, "fake AppleNeuralEngine: CFRelease(NULL): CoreFoundation would crash here\n");
        abort();
    }
    fake_release((void *)cf);
}

CFTypeID CFGetTypeID(CFTypeRef cf) { return cf ? ((const struct objc_object *)cf)->isa->type_id : 0; }
CFTypeID CFStringGetTypeID(void) { return TYPE_STRING; }

CFStringRef fake_string(const char *s) {
    fstring *o = fake_new(&fake_CFString, sizeof *o);
    if (o && !(o->s = strdup(s))) {
        fake_release(o);
        o = NULL;
    }
    return (CFStringRef)o;
}

CFStringRef CFStringCreateWithCString(CFAllocatorRef alloc, const char *cStr, CFStringEncoding encoding) {
    check_allocator(alloc, "CFStringCreateWithCString");
    if (!cStr || encoding != kCFStringEncodingUTF8) return NULL;
    return fake_string(cStr);
}

Boolean CFStringGetCString(CFStringRef s, char *buffer, CFIndex size, CFStringEncoding encoding) {
    const char *t = fake_string_text(s);
    if (!t || !buffer || size <= 0 || encoding != kCFStringEncodingUTF8 || (CFIndex)strlen(t) >= size) return 0;
    memcpy(buffer, t, strlen(t) + 1);
    return 1;
}

CFNumberRef CFNumberCreate(CFAllocatorRef alloc, CFNumberType type, const void *valuePtr) {
    check_allocator(alloc, "CFNumberCreate");
    if (!valuePtr || type != kCFNumberSInt64Type) return NULL; /* the one type the runtime uses */
    fnumber *o = fake_new(&fake_CFNumber, sizeof *o);
    if (o) memcpy(&o->v, valuePtr, sizeof o->v);
    return (CFNumberRef)o;
}

CFDataRef CFDataCreate(CFAllocatorRef alloc, const UInt8 *bytes, CFIndex length) {
    check_allocator(alloc, "CFDataCreate");
    if (length < 0 || (length && !bytes)) return NULL;
    fdata *o = fake_new(&fake_CFData, sizeof *o);
    if (!o) return NULL;
    o->n = (size_t)length;
    if (!(o->bytes = malloc(o->n + 1))) {
        fake_release(o);
        return NULL;
    }
    if (length) memcpy(o->bytes, bytes, o->n);
    return (CFDataRef)o;
}

static CFTypeRef *copy_refs(const void **src, CFIndex n, int retain) {
    CFTypeRef *dst = calloc((size_t)n + 1, sizeof *dst);
    for (CFIndex i = 0; dst && i < n; i++) {
        dst[i] = src[i];
        if (retain) fake_retain((void *)src[i]);
    }
    return dst;
}

CFDictionaryRef CFDictionaryCreate(CFAllocatorRef alloc, const void **keys, const void **values, CFIndex numValues,
                                   const CFDictionaryKeyCallBacks *keyCallBacks, const CFDictionaryValueCallBacks *valueCallBacks) {
    check_allocator(alloc, "CFDictionaryCreate");
    if (numValues < 0 || (numValues && (!keys || !values))) return NULL;
    for (CFIndex i = 0; i < numValues; i++)
        if (!keys[i] || !values[i]) {
            fake_note("CFDictionaryCreate: entry %ld has a NULL key or value (an NSDictionary cannot hold nil)", (long)i);
            return NULL;
        }
    fdict *o = fake_new(&fake_CFDictionary, sizeof *o);
    if (!o) return NULL;
    o->retains = keyCallBacks == &kCFTypeDictionaryKeyCallBacks && valueCallBacks == &kCFTypeDictionaryValueCallBacks;
    o->keys = copy_refs(keys, numValues, o->retains);
    o->vals = copy_refs(values, numValues, o->retains);
    o->n = numValues;
    if (!o->keys || !o->vals) {
        o->n = o->keys && o->vals ? o->n : 0;
        fake_release(o);
        return NULL;
    }
    return (CFDictionaryRef)o;
}

CFArrayRef CFArrayCreate(CFAllocatorRef alloc, const void **values, CFIndex numValues, const CFArrayCallBacks *callBacks) {
    check_allocator(alloc, "CFArrayCreate");
    if (numValues < 0 || (numValues && !values)) return NULL;
    for (CFIndex i = 0; i < numValues; i++)
        if (!values[i]) {
            fake_note("CFArrayCreate: element %ld is NULL (an NSArray cannot hold nil)", (long)i);
            return NULL;
        }
    farray *o = fake_new(&fake_CFArray, sizeof *o);
    if (!o) return NULL;
    o->retains = callBacks == &kCFTypeArrayCallBacks;
    if (!(o->vals = copy_refs(values, numValues, o->retains))) {
        fake_release(o);
        return NULL;
    }
    o->n = numValues;
    return (CFArrayRef)o;
}

CFTypeID CFDictionaryGetTypeID(void) { return TYPE_DICT; }
CFTypeID CFArrayGetTypeID(void) { return TYPE_ARRAY; }
CFTypeID CFNumberGetTypeID(void) { return TYPE_NUMBER; }

/* CF crashes on a wrong type; the fake says so and aborts, so a test cannot pass over it. */
static void need(int ok, const char *fn) {
    if (ok) return;
    fprintf(stderr, "fake AppleNeuralEngine: %s on an object of another type: CoreFoundation would crash here\n", fn);
    abort();
}

const void *CFDictionaryGetValue(CFDictionaryRef d, const void *key) {
    need(fake_dict_count(d) >= 0, "CFDictionaryGetValue");
    const char *k = fake_string_text(key);
    for (CFIndex i = 0; i < ((const fdict *)d)->n; i++) {
        CFTypeRef ki = ((const fdict *)d)->keys[i];
        if (ki == key || (k && fake_string_text(ki) && !strcmp(k, fake_string_text(ki)))) return ((const fdict *)d)->vals[i];
    }
    return NULL;
}

CFIndex CFArrayGetCount(CFArrayRef a) {
    need(fake_array_count(a) >= 0, "CFArrayGetCount");
    return fake_array_count(a);
}

const void *CFArrayGetValueAtIndex(CFArrayRef a, CFIndex i) {
    need(fake_array_count(a) >= 0 && i >= 0 && i < fake_array_count(a), "CFArrayGetValueAtIndex (or an index out of range)");
    return fake_array_get(a, i);
}

Boolean CFNumberGetValue(CFNumberRef n, CFNumberType type, void *v) {
    int64_t x;
    need(fake_number(n, &x), "CFNumberGetValue");
    if (type != kCFNumberSInt64Type || !v) return 0;
    memcpy(v, &x, sizeof x);
    return 1;
}

/* ---------------------------------------------------------------- accessors for the fake */

const char *fake_string_text(CFTypeRef s) { return fake_is(s, &fake_CFString) ? ((const fstring *)s)->s : NULL; }

const uint8_t *fake_data_bytes(CFTypeRef d, size_t *n) {
    if (!fake_is(d, &fake_CFData)) return NULL;
    *n = ((const fdata *)d)->n;
    return ((const fdata *)d)->bytes;
}

int fake_number(CFTypeRef n, int64_t *v) {
    if (!fake_is(n, &fake_CFNumber)) return 0;
    *v = ((const fnumber *)n)->v;
    return 1;
}

CFIndex fake_dict_count(CFTypeRef d) { return fake_is(d, &fake_CFDictionary) ? ((const fdict *)d)->n : -1; }
CFTypeRef fake_dict_key(CFTypeRef d, CFIndex i) { return ((const fdict *)d)->keys[i]; }

CFTypeRef fake_dict_get(CFTypeRef d, const char *key) {
    for (CFIndex i = 0; i < fake_dict_count(d); i++) {
        const char *k = fake_string_text(((const fdict *)d)->keys[i]);
        if (k && !strcmp(k, key)) return ((const fdict *)d)->vals[i];
    }
    return NULL;
}

CFIndex fake_array_count(CFTypeRef a) { return fake_is(a, &fake_CFArray) ? ((const farray *)a)->n : -1; }
CFTypeRef fake_array_get(CFTypeRef a, CFIndex i) { return ((const farray *)a)->vals[i]; }

static id make_error(id under) {
    fnserror *e = fake_new(&fake_NSError, sizeof *e);
    if (e && !(e->text = fake_string(last_error))) {
        fake_release(e);
        return NULL;
    }
    if (e) { /* userInfo: {NSUnderlyingError: under} or empty, as NSError's */
        CFStringRef k = fake_string("NSUnderlyingError");
        const void *keys[1] = { k }, *vals[1] = { under };
        e->info = CFDictionaryCreate(NULL, keys, vals, under ? 1 : 0, &kCFTypeDictionaryKeyCallBacks, &kCFTypeDictionaryValueCallBacks);
        fake_release((void *)k);
    }
    return fake_autorelease(e);
}

id fake_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return make_error(NULL);
}

id fake_error_wrap(id under, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return make_error(under);
}
