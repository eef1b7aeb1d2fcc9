/* The ane backend's table (registered in src/model/registry.c): programs lowered to
 * MIL and run on the Neural Engine through the private runtime (src/ane/darwin). */
#ifndef AF_ANE_BACKEND_H
#define AF_ANE_BACKEND_H
#include "compile/backend.h"
extern const backend_iface ane_backend;
#endif
