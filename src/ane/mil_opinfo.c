#include "ane/opinfo.h"
#include <stddef.h>
const char *af_mil_op_lowering(int op) { (void)op; return NULL; }
