/* Environment variables the CLI maps onto library options (cli_env.c). */
#ifndef AF_TOOLS_CLI_ENV_H
#define AF_TOOLS_CLI_ENV_H
#include "aneforge.h"

#include <stdbool.h>
#include <stddef.h>

/* $ANEFORGE_DATA, else "./data". */
const char *cli_data_dir(void);
/* Applies $ANEFORGE_TARGET (unless a target was given on the command line),
 * $ANEFORGE_SIM_VIA_MIL, $ANEFORGE_PRECISION_CHECK and $ANEFORGE_ANE_FRAMEWORK to o.
 * Returns 0, or 1 with the reason in err. */
int cli_env_compile(af_compile_opts *o, bool target_given, char *err, size_t n);
#endif
