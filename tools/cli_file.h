/* Files and small text helpers for the CLI, over the library's public file calls
 * (aneforge_data.h): the same regular-file checks and size caps as its readers. */
#ifndef AF_TOOLS_CLI_FILE_H
#define AF_TOOLS_CLI_FILE_H
#include "aneforge.h"
#include "aneforge_data.h"

#include <stdio.h>

/* af_open_regular as a stdio stream ("rb"); NULL with the error set. */
FILE *cli_fopen_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size);
/* "[2,3,4]" ("[]" for a scalar) into buf, as the library writes shapes in messages. */
void cli_shape_str(af_shape s, char *buf, size_t n);
/* A malloc'd copy of s, or NULL. */
char *cli_strdup(const char *s);
/* Monotonic clock, seconds. */
double cli_now_s(void);
#endif
