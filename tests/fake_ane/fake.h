/* The fake AppleNeuralEngine framework's internals: a tiny Objective-C object model
 * (classes with method tables, reference counts, autorelease pools) shared by its
 * CoreFoundation, IOSurface and _ANE classes. The functions it exports carry the
 * signatures of Apple's SDK, as declared in tests/darwin_stubs. */
#ifndef FAKE_ANE_FAKE_H
#define FAKE_ANE_FAKE_H
#include <CoreFoundation/CoreFoundation.h>
#include <IOSurface/IOSurface.h>
#include <objc/runtime.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_HIDDEN __attribute__((visibility("hidden")))

typedef struct {
    const char *sel; /* selector name */
    void (*imp)(void); /* the method, cast to its own type by objc_msgSend's caller */
} fake_method;

/* Every object and class starts with the class it belongs to (isa): the trampoline
 * reads it. A class object's isa is its metaclass, which holds the class methods. */
struct objc_class {
    struct objc_class *isa;
    long refs;                 /* unused for classes */
    const char *name;
    struct objc_class *super;  /* NULL at the root */
    const fake_method *methods;
    int nmethods;
    CFTypeID type_id;          /* CoreFoundation type of its instances, 0 for plain objects */
    void (*dealloc)(void *obj); /* frees what the object owns (not the object) */
    int is_meta;               /* 1 for a metaclass: its instances are class objects */
};

struct objc_object {
    Class isa;
    long refs;
};

/* A new object of cls with one reference (size includes this header). */
FAKE_HIDDEN void *fake_new(Class cls, size_t size);
FAKE_HIDDEN void fake_retain(void *obj);
FAKE_HIDDEN void fake_release(void *obj);
/* Adds obj to the innermost autorelease pool and returns it. */
FAKE_HIDDEN void *fake_autorelease(void *obj);
/* True when obj is an instance of cls (or of a subclass). */
FAKE_HIDDEN int fake_is(const void *obj, Class cls);
/* Registers a class (and its metaclass) for objc_getClass. */
FAKE_HIDDEN void fake_register(Class cls);
/* True when the fake's macOS profile (ane_classes.c) removes selector name from cls: a
 * message with it raises, and respondsToSelector: answers NO. */
FAKE_HIDDEN int fake_selector_hidden(Class cls, const char *name);
/* The IMP objc_msgSend jumps to (called from the assembly trampoline). */
FAKE_HIDDEN void (*fake_lookup(id self, SEL op))(void);

/* The root class: retain, release, autorelease, description, isKindOfClass:. */
FAKE_HIDDEN extern struct objc_class fake_NSObject;
/* CoreFoundation classes (cf.c). */
FAKE_HIDDEN extern struct objc_class fake_CFString, fake_CFData, fake_CFNumber, fake_CFDictionary, fake_CFArray,
    fake_NSError, fake_IOSurface;
FAKE_HIDDEN CFStringRef fake_string(const char *s);          /* +1 */
FAKE_HIDDEN const char *fake_string_text(CFTypeRef s);        /* NULL unless a CFString */
FAKE_HIDDEN const uint8_t *fake_data_bytes(CFTypeRef d, size_t *n); /* NULL unless a CFData */
FAKE_HIDDEN int fake_number(CFTypeRef n, int64_t *v);         /* 0 unless a CFNumber */
FAKE_HIDDEN CFIndex fake_dict_count(CFTypeRef d);             /* -1 unless a CFDictionary */
FAKE_HIDDEN CFTypeRef fake_dict_key(CFTypeRef d, CFIndex i);
FAKE_HIDDEN CFTypeRef fake_dict_get(CFTypeRef d, const char *key);
FAKE_HIDDEN CFIndex fake_array_count(CFTypeRef a);            /* -1 unless a CFArray */
FAKE_HIDDEN CFTypeRef fake_array_get(CFTypeRef a, CFIndex i);
/* An autoreleased NSError whose localizedDescription is the formatted text; also
 * recorded as the fake's last error. */
FAKE_HIDDEN id fake_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with userInfo {NSUnderlyingError: under}: how the framework wraps the compiler's error. */
FAKE_HIDDEN id fake_error_wrap(id under, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
FAKE_HIDDEN void fake_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* IOSurface internals (iosurface.c). */
FAKE_HIDDEN int fake_surface(CFTypeRef s, uint8_t **base, size_t *bytes, int *locked);
/* Its bytes per row (the whole surface for the 1-D surfaces everyone makes). */
FAKE_HIDDEN size_t fake_surface_row_bytes(CFTypeRef s);

/* Control functions the fake exports for tests (declared in fake_ane_control.h). */
#include "fake_ane_control.h"
#endif
