/* Fills the Apple API table: linked addresses on Apple, dlsym() from the framework
 * library elsewhere (see apple_api.h). */
#include "ane/darwin/apple_api.h"
#include "ir/ir.h"

#include <dlfcn.h>
#include <string.h>

struct ane_apple_api ane_apple;

#ifdef ANE_RT_LINKED
/* libobjc exports the autorelease pool entry points without declaring them. */
void *objc_autoreleasePoolPush(void);
void objc_autoreleasePoolPop(void *pool);

static af_status bind_all(void *lib, const char *path) {
    (void)path;
    struct ane_apple_api *a = &ane_apple;
    a->objc_getClass = objc_getClass;
    a->sel_registerName = sel_registerName;
    a->objc_msgSend = (void (*)(void))objc_msgSend;
    a->objc_autoreleasePoolPush = objc_autoreleasePoolPush;
    a->objc_autoreleasePoolPop = objc_autoreleasePoolPop;
    a->CFRetain = CFRetain;
    a->CFRelease = CFRelease;
    a->CFGetTypeID = CFGetTypeID;
    a->CFStringGetTypeID = CFStringGetTypeID;
    a->CFStringCreateWithCString = CFStringCreateWithCString;
    a->CFStringGetCString = CFStringGetCString;
    a->CFNumberCreate = CFNumberCreate;
    a->CFDataCreate = CFDataCreate;
    a->CFDictionaryCreate = CFDictionaryCreate;
    a->CFArrayCreate = CFArrayCreate;
    a->CFDictionaryGetTypeID = CFDictionaryGetTypeID;
    a->CFDictionaryGetValue = CFDictionaryGetValue;
    a->CFArrayGetTypeID = CFArrayGetTypeID;
    a->CFArrayGetCount = CFArrayGetCount;
    a->CFArrayGetValueAtIndex = CFArrayGetValueAtIndex;
    a->CFNumberGetTypeID = CFNumberGetTypeID;
    a->CFNumberGetValue = CFNumberGetValue;
    a->kCFTypeDictionaryKeyCallBacks = &kCFTypeDictionaryKeyCallBacks;
    a->kCFTypeDictionaryValueCallBacks = &kCFTypeDictionaryValueCallBacks;
    a->kCFTypeArrayCallBacks = &kCFTypeArrayCallBacks;
    a->IOSurfaceCreate = IOSurfaceCreate;
    a->IOSurfaceLock = IOSurfaceLock;
    a->IOSurfaceUnlock = IOSurfaceUnlock;
    a->IOSurfaceGetBaseAddress = IOSurfaceGetBaseAddress;
    a->IOSurfaceGetAllocSize = IOSurfaceGetAllocSize;
    a->kIOSurfaceWidth = &kIOSurfaceWidth;
    a->kIOSurfaceHeight = &kIOSurfaceHeight;
    a->kIOSurfaceBytesPerElement = &kIOSurfaceBytesPerElement;
    a->kIOSurfaceBytesPerRow = &kIOSurfaceBytesPerRow;
    a->kIOSurfaceAllocSize = &kIOSurfaceAllocSize;
    a->kIOSurfacePixelFormat = &kIOSurfacePixelFormat;
    (void)lib;
    return AF_OK;
}
#else
static af_status bind_all(void *lib, const char *path) {
    static const struct { const char *name; size_t offset; } syms[] = {
#define SYM(n) { #n, offsetof(struct ane_apple_api, n) }
        SYM(objc_getClass), SYM(sel_registerName), SYM(objc_msgSend), SYM(objc_autoreleasePoolPush),
        SYM(objc_autoreleasePoolPop), SYM(CFRetain), SYM(CFRelease), SYM(CFGetTypeID), SYM(CFStringGetTypeID),
        SYM(CFStringCreateWithCString), SYM(CFStringGetCString), SYM(CFNumberCreate), SYM(CFDataCreate),
        SYM(CFDictionaryCreate), SYM(CFArrayCreate), SYM(CFDictionaryGetTypeID), SYM(CFDictionaryGetValue),
        SYM(CFArrayGetTypeID), SYM(CFArrayGetCount), SYM(CFArrayGetValueAtIndex), SYM(CFNumberGetTypeID), SYM(CFNumberGetValue), SYM(kCFTypeDictionaryKeyCallBacks),
        SYM(kCFTypeDictionaryValueCallBacks), SYM(kCFTypeArrayCallBacks), SYM(IOSurfaceCreate), SYM(IOSurfaceLock),
        SYM(IOSurfaceUnlock), SYM(IOSurfaceGetBaseAddress), SYM(IOSurfaceGetAllocSize), SYM(kIOSurfaceWidth),
        SYM(kIOSurfaceHeight), SYM(kIOSurfaceBytesPerElement), SYM(kIOSurfaceBytesPerRow), SYM(kIOSurfaceAllocSize),
        SYM(kIOSurfacePixelFormat),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p)
            return ir_fail(AF_ERR_UNSUPPORTED,
                           "ane: %s has no symbol %s: it is not an AppleNeuralEngine framework with the Objective-C runtime, "
                           "CoreFoundation and IOSurface behind it (on Linux, name the fake built in build/fake_ane/)",
                           path, syms[i].name);
        memcpy((char *)&ane_apple + syms[i].offset, &p, sizeof p);
    }
    return AF_OK;
}
#endif

af_status ane_apple_load(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return ir_fail(AF_ERR_UNSUPPORTED, "ane: cannot load the AppleNeuralEngine framework %s: %s", path,
                       why ? why : "dlopen failed");
    }
    af_status st = bind_all(lib, path);
    ane_apple.framework = lib;
    if (st) ane_apple_unload();
    return st;
}

void ane_apple_unload(void) {
    if (ane_apple.framework) dlclose(ane_apple.framework);
    memset(&ane_apple, 0, sizeof ane_apple);
}
