/* Helpers of the tests that run the built aneforge binary (AF_CLI, else ./aneforge in
 * ctest's build directory) and of those that check a llama model's loss by hand. */
#ifndef AF_TEST_CLI_RUN_H
#define AF_TEST_CLI_RUN_H
#include "aneforge.h"
#include "aneforge_llama.h"

#include <stddef.h>
#include <stdint.h>

#ifndef AF_CLI
#define AF_CLI "./aneforge"
#endif
/* Runs `BIN ARGS`, stdout (and stderr when merge, else stderr dropped) into out;
 * returns the exit code, -1 when it did not exit normally. cli_run runs the test's
 * AF_CLI (CMake sets it to the built binary). */
int cli_run_bin(const char *bin, const char *args, int merge, char *out, size_t cap);
#define cli_run(args, merge, out, cap) cli_run_bin(AF_CLI, args, merge, out, cap)
/* The number after "key": in a JSON line, NAN when absent. */
double json_num(const char *s, const char *key);
/* Mean next-token nats over tok[0..n) in windows of T + 1 at stride T, through the host
 * KV-cache forward (af_llama_gen, reset per window): an independent reference for the
 * graph-based losses of train llama --val and eval llama. NAN on failure. */
double host_window_loss(const af_llama_weights *w, const int32_t *tok, int64_t n, int T);
#endif
