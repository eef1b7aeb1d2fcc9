/* The CLI's writers (cli_out.c): JSON numbers and strings that are always valid JSON,
 * output files written whole or not at all (temporary file + rename), append-style logs
 * that stop and say so at the first failed write, and output paths checked before a
 * long run starts. Every failure is printed as "CMD: ... PATH: <errno text>". */
#ifndef AF_TOOLS_CLI_OUT_H
#define AF_TOOLS_CLI_OUT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- JSON */

/* v printed with fmt (one double conversion, e.g. "%.6f"), or null when v is not finite:
 * JSON has no nan or inf. Returns buf. */
const char *cli_jnum(char *buf, size_t cap, const char *fmt, double v);
/* cli_jnum into a buffer that lives until the end of the enclosing block. */
#define JNUM(fmt, v) cli_jnum((char[64]){ 0 }, 64, (fmt), (double)(v))
/* The same written to f: the number, or null. */
void cli_json_num(FILE *f, const char *fmt, double v);
/* s as a JSON string (quotes, \" \\ and control bytes escaped), or null for NULL. */
void cli_json_str(FILE *f, const char *s);

/* ---- whole files */

/* A file being written: to a temporary beside it, renamed over path by cli_file_commit.
 * A path that exists and is not a regular file (/dev/stdout, /dev/full, a pipe) is
 * written in place. */
typedef struct {
    FILE *f;
    char *path, *tmp; /* tmp NULL: written in place */
    const char *cmd;
} cli_file;

/* Opens o for writing (prints the failure and returns 1). */
int cli_file_open(cli_file *o, const char *path, const char *cmd);
/* Flushes, syncs and closes the file and renames it into place; on any failure (a write
 * earlier included) prints it, removes the temporary and returns 1. Frees o either way. */
int cli_file_commit(cli_file *o);
/* Drops a file being written (the temporary removed, path untouched). */
void cli_file_abort(cli_file *o);

/* ---- append-style logs */

typedef struct {
    FILE *f;
    const char *path, *cmd;
    bool failed; /* a write failed: nothing more is written */
} cli_log;

/* Opens path for appending (prints the failure and returns 1). */
int cli_log_open(cli_log *l, const char *path, const char *cmd);
/* One formatted write, flushed (a dashboard follows the file). The first failure is
 * printed and stops the log; later calls do nothing. Does nothing when l->f is NULL. */
void cli_log_printf(cli_log *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Closes the log; 1 when any write (or the close) failed, printed once. */
int cli_log_close(cli_log *l);

/* ---- checks before a run */

/* Whether a file can be created at path: not a directory, and its folder exists and takes
 * a new file (probed with a temporary file, removed at once). Prints
 * "CMD: FLAG PATH cannot be written: ..." and returns 1 when not. A NULL path passes. */
int cli_check_output(const char *path, const char *flag, const char *cmd);
/* The same for a file appended to (a log): an existing one must take writes itself. */
int cli_check_append(const char *path, const char *flag, const char *cmd);

/* Test hook for a save that fails mid-run: with $ANEFORGE_TEST_FAIL_SAVE=N (a list such
 * as "2" or "2,3"), the save counted nth (from 1) runs with a file size limit of 0, so its
 * writes really fail (EFBIG) as on a full disk. Returns whether it did; pass that to
 * cli_fault_end after the save. */
bool cli_fault_begin(int nth);
void cli_fault_end(bool on);

/* Checks that stdout took everything written to it (`--json > /dev/full`); prints the
 * failure and returns 1 when not. */
int cli_stdout_check(const char *cmd);
#endif
