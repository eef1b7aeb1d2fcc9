/* The ane-sim backend's table (registered in src/model/registry.c). */
#ifndef AF_SIM_BACKEND_H
#define AF_SIM_BACKEND_H
#include "compile/backend.h"
extern const backend_iface ane_sim_backend;
/* Models compiled through MIL in this process (tests prove the path was taken). */
long long sim_via_mil_count(void);
#endif
