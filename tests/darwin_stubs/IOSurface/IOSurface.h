/* Stub of <IOSurface/IOSurface.h> (IOSurfaceRef.h) for the Linux compile check. */
#ifndef AF_STUB_IOSURFACE_H
#define AF_STUB_IOSURFACE_H
#include <CoreFoundation/CoreFoundation.h>
#include <stddef.h>
typedef struct __IOSurface *IOSurfaceRef;
typedef int kern_return_t;
typedef uint32_t IOSurfaceLockOptions;
enum { kIOSurfaceLockReadOnly = 0x00000001, kIOSurfaceLockAvoidSync = 0x00000002 };
extern const CFStringRef kIOSurfaceWidth, kIOSurfaceHeight, kIOSurfaceBytesPerElement, kIOSurfaceBytesPerRow,
    kIOSurfaceAllocSize, kIOSurfacePixelFormat;
IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties);
kern_return_t IOSurfaceLock(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t *seed);
kern_return_t IOSurfaceUnlock(IOSurfaceRef buffer, IOSurfaceLockOptions options, uint32_t *seed);
void *IOSurfaceGetBaseAddress(IOSurfaceRef buffer);
size_t IOSurfaceGetAllocSize(IOSurfaceRef buffer);
#endif
