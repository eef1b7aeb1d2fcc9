/* The cpu backend's table (registered in src/model/registry.c). */
#ifndef AF_CPU_BACKEND_H
#define AF_CPU_BACKEND_H
#include "compile/backend.h"
extern const backend_iface cpu_backend;
#endif
