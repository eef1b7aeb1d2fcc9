/* Stub of <objc/runtime.h>: declarations only (the fake framework defines the structs). */
#ifndef AF_STUB_OBJC_RUNTIME_H
#define AF_STUB_OBJC_RUNTIME_H
#include <stdbool.h>
typedef struct objc_class *Class;
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
#if defined(__aarch64__)
typedef bool BOOL; /* arm64 */
#else
typedef signed char BOOL; /* x86-64 */
#endif
#define YES true
#define NO false
Class objc_getClass(const char *name);
SEL sel_registerName(const char *str);
#endif
