/* The fake's IOSurface: a page-aligned byte buffer described by the creation
 * dictionary. It checks the properties the way IOSurface does (numbers, width * bytes
 * per element within the row, rows within the allocation) and tracks CPU locks, so
 * the engine can refuse a surface the CPU still holds. */
#define _DEFAULT_SOURCE 1 /* strdup, aligned_alloc */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    struct objc_object h;
    uint8_t *base;
    size_t alloc, row; /* bytes, and bytes per row */
    int locks;
    uint32_t seed;
} fsurface;

static void surface_dealloc(void *o) { free(((fsurface *)o)->base); }
struct objc_class fake_IOSurface = { NULL, 0, "IOSurface", &fake_NSObject, NULL, 0, 41, surface_dealloc, 0 };

/* The property keys: immortal CFStrings (never released to zero). */
typedef struct { struct objc_object h; const char *s; } fkey;
#define KEY(var, text)                                                                          \
    static fkey var##_obj = { { &fake_CFString, 1L << 40 }, text };                            \
    const CFStringRef var = (CFStringRef)&var##_obj;
KEY(kIOSurfaceWidth, "IOSurfaceWidth")
KEY(kIOSurfaceHeight, "IOSurfaceHeight")
KEY(kIOSurfaceBytesPerElement, "IOSurfaceBytesPerElement")
KEY(kIOSurfaceBytesPerRow, "IOSurfaceBytesPerRow")
KEY(kIOSurfaceAllocSize, "IOSurfaceAllocSize")
KEY(kIOSurfacePixelFormat, "IOSurfacePixelFormat")

static int prop(CFDictionaryRef props, CFStringRef key, int64_t *v) {
    CFTypeRef n = fake_dict_get(props, fake_string_text(key));
    return n && fake_number(n, v);
}

IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties) {
    int64_t w, h, bpe, bpr, alloc, pf;
    if (fake_dict_count(properties) < 0) {
        fake_note("IOSurfaceCreate: the properties are not a dictionary");
        return NULL;
    }
    if (!prop(properties, kIOSurfaceWidth, &w) || !prop(properties, kIOSurfaceHeight, &h) ||
        !prop(properties, kIOSurfaceBytesPerElement, &bpe)) {
        fake_note("IOSurfaceCreate: width, height and bytes per element must be numbers");
        return NULL;
    }
    if (!prop(properties, kIOSurfaceBytesPerRow, &bpr)) bpr = w * bpe;
    if (!prop(properties, kIOSurfaceAllocSize, &alloc)) alloc = bpr * h;
    if (!prop(properties, kIOSurfacePixelFormat, &pf)) pf = 0;
    if (w < 1 || h < 1 || bpe < 1 || bpr < w * bpe || alloc < bpr * h || alloc > ((int64_t)1 << 31)) {
        fake_note("IOSurfaceCreate: inconsistent properties (width %lld x %lld bytes per element, %lld bytes per row, "
                  "%lld rows, %lld bytes)", (long long)w, (long long)bpe, (long long)bpr, (long long)h, (long long)alloc);
        return NULL;
    }
    fsurface *s = fake_new(&fake_IOSurface, sizeof *s);
    if (!s) return NULL;
    s->alloc = (size_t)alloc;
    s->row = (size_t)bpr;
    size_t rounded = (s->alloc + 16383) & ~(size_t)16383; /* whole pages, as IOSurface allocates */
    if (!(s->base = aligned_alloc(16384, rounded))) {
        fake_release(s);
        return NULL;
    }
    memset(s->base, 0, rounded);
    return (IOSurfaceRef)s;
}

static fsurface *as_surface(IOSurfaceRef s) { return fake_is(s, &fake_IOSurface) ? (fsurface *)s : NULL; }

kern_return_t IOSurfaceLock(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t *seed) {
    fsurface *s = as_surface(buffer);
    if (!s) return 1;
    s->locks++;
    if (!(options & kIOSurfaceLockReadOnly)) s->seed++;
    if (seed) *seed = s->seed;
    return 0;
}

kern_return_t IOSurfaceUnlock(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t *seed) {
    (void)options;
    fsurface *s = as_surface(buffer);
    if (!s || s->locks < 1) {
        fake_note("IOSurfaceUnlock: the surface is not locked");
        return 1;
    }
    s->locks--;
    if (seed) *seed = s->seed;
    return 0;
}

void *IOSurfaceGetBaseAddress(IOSurfaceRef buffer) {
    fsurface *s = as_surface(buffer);
    return s ? s->base : NULL;
}

size_t IOSurfaceGetAllocSize(IOSurfaceRef buffer) {
    fsurface *s = as_surface(buffer);
    return s ? s->alloc : 0;
}

size_t fake_surface_row_bytes(CFTypeRef obj) {
    fsurface *s = fake_is(obj, &fake_IOSurface) ? (fsurface *)obj : NULL;
    return s ? s->row : 0;
}

int fake_surface(CFTypeRef obj, uint8_t **base, size_t *bytes, int *locked) {
    fsurface *s = fake_is(obj, &fake_IOSurface) ? (fsurface *)obj : NULL;
    if (!s) return 0;
    *base = s->base;
    *bytes = s->alloc;
    *locked = s->locks;
    return 1;
}
