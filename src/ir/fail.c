/* af_fail: the thread's error message, set from outside the library (callbacks, the CLI). */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>

af_status af_fail(af_status st, const char *fmt, ...) {
    char buf[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
    }
    return ir_fail(st, "%s", buf);
}
