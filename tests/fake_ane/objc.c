/* The fake's Objective-C runtime: class registry, interned selectors, method lookup
 * for the objc_msgSend trampoline (msgsend.S), reference counting and autorelease
 * pools. Misuse the real runtime punishes with a crash (an unrecognized selector, a
 * release too many) aborts with a message naming it: a test must not pass over it. */
#define _DEFAULT_SOURCE 1 /* strdup, aligned_alloc */
#include "fake.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Class classes[32];
static int nclasses;
static char *selectors[256];
static int nselectors;
static atomic_long live;

long fake_ane_live_objects(void) { return atomic_load(&live); }

static void die(const char *what, const char *cls, const char *sel) {
    fprintf(stderr, "fake AppleNeuralEngine: %s %s %s: the real Objective-C runtime would crash here\n", what, cls, sel);
    abort();
}

void fake_register(Class cls) {
    pthread_mutex_lock(&lock);
    bool known = false;
    for (int i = 0; i < nclasses; i++) known |= classes[i] == cls;
    if (!known && nclasses < (int)(sizeof classes / sizeof classes[0])) classes[nclasses++] = cls;
    pthread_mutex_unlock(&lock);
}

Class objc_getClass(const char *name) {
    extern void fake_register_all(void);
    fake_register_all();
    Class found = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; name && i < nclasses && !found; i++)
        if (!strcmp(classes[i]->name, name)) found = classes[i];
    pthread_mutex_unlock(&lock);
    return found;
}

SEL sel_registerName(const char *name) {
    if (!name) return NULL;
    pthread_mutex_lock(&lock);
    char *s = NULL;
    for (int i = 0; i < nselectors && !s; i++)
        if (!strcmp(selectors[i], name)) s = selectors[i];
    if (!s && nselectors < (int)(sizeof selectors / sizeof selectors[0]) && (s = strdup(name))) selectors[nselectors++] = s;
    pthread_mutex_unlock(&lock);
    if (!s) die("cannot register selector", "", name);
    return (SEL)s;
}

/* ---------------------------------------------------------------- objects */

void *fake_new(Class cls, size_t size) {
    struct objc_object *o = calloc(1, size);
    if (!o) return NULL;
    o->isa = cls;
    o->refs = 1;
    atomic_fetch_add(&live, 1);
    return o;
}

void fake_retain(void *obj) {
    struct objc_object *o = obj;
    if (o && !o->isa->is_meta) o->refs++; /* class objects are not counted */
}

void fake_release(void *obj) {
    struct objc_object *o = obj;
    if (!o || o->isa->is_meta) return;
    if (o->refs <= 0) die("release of a deallocated", o->isa->name, "object");
    if (--o->refs) return;
    for (Class c = o->isa; c; c = c->super)
        if (c->dealloc) { c->dealloc(o); break; }
    o->isa = NULL;
    free(o);
    atomic_fetch_sub(&live, 1);
}

int fake_is(const void *obj, Class cls) {
    if (!obj) return 0;
    for (Class c = ((const struct objc_object *)obj)->isa; c; c = c->super)
        if (c == cls) return 1;
    return 0;
}

/* ---------------------------------------------------------------- autorelease pools */

typedef struct {
    void **objs;
    size_t n, cap;
    size_t marks[64]; /* where each pushed pool starts */
    int depth;
} pool_stack;

static _Thread_local pool_stack pools;

void *objc_autoreleasePoolPush(void) {
    if (pools.depth >= 64) die("autorelease pools nested more than", "64", "deep");
    pools.marks[pools.depth++] = pools.n;
    return (void *)(uintptr_t)pools.depth; /* a token: the depth this push made */
}

void objc_autoreleasePoolPop(void *token) {
    int depth = (int)(uintptr_t)token;
    if (depth < 1 || depth > pools.depth) die("pop of an autorelease pool that is not", "on this thread's", "stack");
    size_t from = pools.marks[depth - 1];
    pools.depth = depth - 1;
    while (pools.n > from) fake_release(pools.objs[--pools.n]); /* newest first */
    if (!pools.depth) {
        free(pools.objs);
        pools.objs = NULL;
        pools.cap = 0;
    }
}

void *fake_autorelease(void *obj) {
    if (!obj) return obj;
    if (!pools.depth) {
        fprintf(stderr, "fake AppleNeuralEngine: %s autoreleased with no pool in place: it leaks (push a pool around the call)\n",
                ((struct objc_object *)obj)->isa->name);
        return obj;
    }
    if (pools.n == pools.cap) {
        size_t cap = pools.cap ? pools.cap * 2 : 64;
        void **p = realloc(pools.objs, cap * sizeof *p);
        if (!p) die("out of memory in", "an autorelease", "pool");
        pools.objs = p;
        pools.cap = cap;
    }
    pools.objs[pools.n++] = obj;
    return obj;
}

/* ---------------------------------------------------------------- message lookup */

static id nsobject_retain(id self, SEL op) {
    (void)op;
    fake_retain(self);
    return self;
}
static void nsobject_release(id self, SEL op) { (void)op; fake_release(self); }
static id nsobject_autorelease(id self, SEL op) { (void)op; return fake_autorelease(self); }
static id nsobject_description(id self, SEL op) {
    (void)op;
    return fake_autorelease((void *)fake_string(self->isa->is_meta ? ((Class)self)->name : self->isa->name));
}

/* The method for name in cls's chain; NULL when there is none, or when the fake's macOS
 * profile took it away (fake_selector_hidden). Class objects answer NSObject's instance
 * methods too, as in Objective-C. */
static void (*find_method(Class cls, const char *name))(void);

static BOOL nsobject_responds(id self, SEL op, SEL which) {
    (void)op;
    return find_method(self->isa, (const char *)which) != NULL;
}
static BOOL nsobject_instances_respond(id self, SEL op, SEL which) { /* self is a class */
    (void)op;
    return find_method((Class)self, (const char *)which) != NULL;
}

static const fake_method nsobject_methods[] = {
    { "retain", (void (*)(void))nsobject_retain },
    { "release", (void (*)(void))nsobject_release },
    { "autorelease", (void (*)(void))nsobject_autorelease },
    { "description", (void (*)(void))nsobject_description },
    { "respondsToSelector:", (void (*)(void))nsobject_responds },
    { "instancesRespondToSelector:", (void (*)(void))nsobject_instances_respond },
};
struct objc_class fake_NSObject = { NULL, 0, "NSObject", NULL, nsobject_methods, 6, 0, NULL, 0 };

/* The IMP for a message to nil: returns 0 in every return register. */
extern void fake_objc_nil_imp(void) FAKE_HIDDEN;

static void (*find_method(Class cls, const char *name))(void) {
    for (Class c = cls; c; c = c->super)
        for (int i = 0; i < c->nmethods; i++)
            if (!strcmp(c->methods[i].sel, name)) return fake_selector_hidden(c, name) ? NULL : c->methods[i].imp;
    if (cls->is_meta)
        for (int i = 0; i < fake_NSObject.nmethods; i++)
            if (!strcmp(nsobject_methods[i].sel, name)) return nsobject_methods[i].imp;
    return NULL;
}

void (*fake_lookup(id self, SEL op))(void) {
    if (!self) return fake_objc_nil_imp;
    const char *name = (const char *)op;
    Class cls = self->isa;
    if (!cls) die("message to a deallocated object:", "?", name);
    void (*imp)(void) = find_method(cls, name);
    if (imp) return imp;
    die("unrecognized selector sent to", cls->is_meta ? ((Class)self)->name : cls->name, name);
    return NULL;
}
