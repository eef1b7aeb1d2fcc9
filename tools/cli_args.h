/* Number arguments of the CLI's options, checked whole (cli_args.c). */
#ifndef AF_TOOLS_CLI_ARGS_H
#define AF_TOOLS_CLI_ARGS_H
/* A decimal integer in [lo, hi] with nothing after it: 0, else -1. */
int cli_parse_long(const char *s, long lo, long hi, long *out);
/* A finite number with nothing after it: 0, else -1. */
int cli_parse_float(const char *s, float *out);
/* Prints "CMD: <message> (try --help)" on stderr; returns 2, the usage-error exit code. */
int cli_usage_error(const char *cmd, const char *fmt, ...);
#endif
