/* The Apple functions the Neural Engine runtime calls (Objective-C runtime,
 * CoreFoundation, IOSurface), reached through one
 * table so that ane_runtime.c is the same code everywhere:
 *   - on Apple (or with ANE_RT_LINKED defined, as the Linux compile check of the Apple
 *     branch does) the SDK headers declare them and the table holds their linked
 *     addresses; the private AppleNeuralEngine framework is still dlopen()ed, as it
 *     has no headers or stub library to link against;
 *   - elsewhere the framework library named by the caller is dlopen()ed and every
 *     symbol is dlsym()ed from it: that is how the runtime runs on Linux against the
 *     fake framework in tests/fake_ane.
 * Nothing here reads the environment: the caller names the framework. */
#ifndef ANE_DARWIN_APPLE_API_H
#define ANE_DARWIN_APPLE_API_H

#include "aneforge.h"
#include <stddef.h>
#include <stdint.h>

#if defined(__APPLE__) && !defined(ANE_RT_LINKED)
#define ANE_RT_LINKED 1
#endif

#ifdef ANE_RT_LINKED
#include <CoreFoundation/CoreFoundation.h>
#include <IOSurface/IOSurface.h>
#include <objc/message.h>
#include <objc/runtime.h>
#else
/* The same types with the ABI of Apple's SDK (64-bit), declared here because no SDK
 * headers exist on this system. Objects are opaque pointers throughout. */
#include <stdbool.h>
typedef struct objc_class *Class;
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
#if defined(__aarch64__)
typedef bool BOOL;        /* arm64: a C bool */
#else
typedef signed char BOOL; /* x86-64: a signed char */
#endif
typedef long CFIndex;
typedef unsigned long CFTypeID;
typedef unsigned char UInt8;
typedef unsigned char Boolean;
typedef uint32_t CFStringEncoding;
typedef CFIndex CFNumberType;
typedef const void *CFTypeRef;
typedef const struct __CFAllocator *CFAllocatorRef;
typedef const struct __CFString *CFStringRef;
typedef const struct __CFNumber *CFNumberRef;
typedef const struct __CFData *CFDataRef;
typedef const struct __CFDictionary *CFDictionaryRef;
typedef const struct __CFArray *CFArrayRef;
typedef struct CFDictionaryKeyCallBacks CFDictionaryKeyCallBacks;     /* only their addresses are used */
typedef struct CFDictionaryValueCallBacks CFDictionaryValueCallBacks;
typedef struct CFArrayCallBacks CFArrayCallBacks;
typedef struct __IOSurface *IOSurfaceRef;
typedef int kern_return_t;
typedef uint32_t IOSurfaceLockOptions;
enum { kCFStringEncodingUTF8 = 0x08000100, kCFNumberSInt64Type = 4, kIOSurfaceLockReadOnly = 1 };
#endif

struct ane_apple_api {
    void *framework; /* the dlopen() handle, NULL until loaded */
    /* Objective-C runtime */
    Class (*objc_getClass)(const char *name);
    SEL (*sel_registerName)(const char *name);
    void (*objc_msgSend)(void); /* cast to each selector's exact type at the call */
    void *(*objc_autoreleasePoolPush)(void);
    void (*objc_autoreleasePoolPop)(void *pool);
    /* CoreFoundation (the allocator argument is always NULL, the default allocator) */
    CFTypeRef (*CFRetain)(CFTypeRef cf);
    void (*CFRelease)(CFTypeRef cf);
    CFTypeID (*CFGetTypeID)(CFTypeRef cf);
    CFTypeID (*CFStringGetTypeID)(void);
    CFStringRef (*CFStringCreateWithCString)(CFAllocatorRef a, const char *s, CFStringEncoding e);
    Boolean (*CFStringGetCString)(CFStringRef s, char *buf, CFIndex n, CFStringEncoding e);
    CFNumberRef (*CFNumberCreate)(CFAllocatorRef a, CFNumberType t, const void *v);
    CFDataRef (*CFDataCreate)(CFAllocatorRef a, const UInt8 *bytes, CFIndex n);
    CFDictionaryRef (*CFDictionaryCreate)(CFAllocatorRef a, const void **keys, const void **vals, CFIndex n,
                                          const CFDictionaryKeyCallBacks *kcb, const CFDictionaryValueCallBacks *vcb);
    CFArrayRef (*CFArrayCreate)(CFAllocatorRef a, const void **vals, CFIndex n, const CFArrayCallBacks *cb);
    /* reading what the framework gives back (-modelAttributes, NSError's userInfo) */
    CFTypeID (*CFDictionaryGetTypeID)(void);
    const void *(*CFDictionaryGetValue)(CFDictionaryRef d, const void *key);
    CFTypeID (*CFArrayGetTypeID)(void);
    CFIndex (*CFArrayGetCount)(CFArrayRef a);
    const void *(*CFArrayGetValueAtIndex)(CFArrayRef a, CFIndex i);
    CFTypeID (*CFNumberGetTypeID)(void);
    Boolean (*CFNumberGetValue)(CFNumberRef n, CFNumberType t, void *v);
    const CFDictionaryKeyCallBacks *kCFTypeDictionaryKeyCallBacks;
    const CFDictionaryValueCallBacks *kCFTypeDictionaryValueCallBacks;
    const CFArrayCallBacks *kCFTypeArrayCallBacks;
    /* IOSurface */
    IOSurfaceRef (*IOSurfaceCreate)(CFDictionaryRef props);
    kern_return_t (*IOSurfaceLock)(IOSurfaceRef s, IOSurfaceLockOptions o, uint32_t *seed);
    kern_return_t (*IOSurfaceUnlock)(IOSurfaceRef s, IOSurfaceLockOptions o, uint32_t *seed);
    void *(*IOSurfaceGetBaseAddress)(IOSurfaceRef s);
    size_t (*IOSurfaceGetAllocSize)(IOSurfaceRef s);
    const CFStringRef *kIOSurfaceWidth, *kIOSurfaceHeight, *kIOSurfaceBytesPerElement, *kIOSurfaceBytesPerRow,
        *kIOSurfaceAllocSize, *kIOSurfacePixelFormat;
    };

/* The table; valid after ane_apple_load succeeded. */
extern struct ane_apple_api ane_apple;

/* Loads the framework at path (dlopen) and fills the table. On failure the table is
 * left empty and the message names the path and the missing symbol. Not thread-safe:
 * the runtime calls it under its lock. */
af_status ane_apple_load(const char *path);
/* Closes the framework and empties the table (after a load the caller rejects). */
void ane_apple_unload(void);

/* objc_msgSend as the function type T: `ANE_MSG(id (*)(id, SEL))(obj, sel)`. */
#define ANE_MSG(T) ((T)ane_apple.objc_msgSend)
#endif
