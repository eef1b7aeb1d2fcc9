/* The version the library was built as (a program compiled against another header can
 * compare AF_VERSION with this). */
#include "aneforge.h"

const char *af_version(void) { return AF_VERSION; }
