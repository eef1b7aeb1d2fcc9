/* Stub of <objc/runtime.h> for the Linux compile check of src/ane/darwin (declarations only). */
#ifndef AF_STUB_OBJC_RUNTIME_H
#define AF_STUB_OBJC_RUNTIME_H
#include <stdbool.h>
typedef struct objc_class *Class;
typedef struct objc_object { Class isa; } *id;
typedef struct objc_selector *SEL;
typedef bool BOOL; /* arm64 */
#define YES true
#define NO false
Class objc_getClass(const char *name);
SEL sel_registerName(const char *str);
#endif
