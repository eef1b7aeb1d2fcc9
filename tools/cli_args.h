/* Number arguments of the CLI's options, checked whole, and other argument helpers (cli_args.c). */
#ifndef AF_TOOLS_CLI_ARGS_H
#define AF_TOOLS_CLI_ARGS_H
#include <stdio.h>

/* A decimal integer in [lo, hi] with nothing after it: 0, else -1. */
int cli_parse_long(const char *s, long lo, long hi, long *out);
/* A finite number with nothing after it: 0, else -1. */
int cli_parse_float(const char *s, float *out);
/* Prints "CMD: <message> (try --help)" on stderr; returns 2, the usage-error exit code. */
int cli_usage_error(const char *cmd, const char *fmt, ...);
/* The message for an option given last with no value after it: "--x needs a value"
 * when the command's usage text names --x, else "unknown option --x". */
const char *cli_missing_value_message(void (*usage)(FILE *), const char *opt);
/* The part of a path after its last '/' (a run's default name in dashboard and report). */
const char *cli_base_name(const char *path);
#endif
