/* af_free: the one way to release an array the library returned (its allocator, not
 * the caller's). */
#include "aneforge.h"

#include <stdlib.h>

void af_free(void *p) { free(p); }
