#include "ane/opinfo.h"
#include <stddef.h>
const char *af_sim_op_restrictions(int op) { (void)op; return NULL; }
