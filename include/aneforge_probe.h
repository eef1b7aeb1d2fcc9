/* The chip probe (`aneforge doctor --probe`): measures a Neural Engine's limits through
 * the AppleNeuralEngine framework and writes them as a family file, the format of the
 * built-in families, which `--target ane-sim:FILE.json` simulates. Each step runs in the
 * caller's process; the CLI runs each in a child process, so a crash or the compile
 * budget of one step never ends the probe. The file is rewritten (temporary + rename)
 * after every step, so an interrupted probe resumes where it stopped. */
#ifndef ANEFORGE_PROBE_H
#define ANEFORGE_PROBE_H
#include "aneforge.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct af_probe af_probe;

AF_API int         af_probe_step_count(void);
AF_API const char *af_probe_step_name(int i); /* "max_spatial", NULL out of range */
AF_API const char *af_probe_step_what(int i); /* one line: what it measures and how */

/* Opens the probe file at path: a new one when path does not exist, else the earlier
 * probe's results (its steps count as done). */
AF_API af_status af_probe_open(const char *path, af_probe **out);
AF_API int       af_probe_step_done(const af_probe *p, int i);
/* Runs step i against the framework (NULL: the system's), quick = fewer repetitions,
 * records the result and rewrites the file. A step that finds the engine refusing is
 * not a failure: it records what it found. */
AF_API af_status af_probe_run_step(af_probe *p, int i, const char *framework, int quick);
/* Records that step i did not finish (why: "crashed (signal 11)", "timed out") and
 * rewrites the file; the step's limit is written as null (unknown). */
AF_API af_status af_probe_mark_failed(af_probe *p, int i, const char *why);
/* The step's result as one line ("12000", "refused at 12001: ..."), "" when not run. */
AF_API const char *af_probe_step_result(const af_probe *p, int i);
AF_API void      af_probe_free(af_probe *p);

/* Compares the family file at path with the simulator's family named by family ("m1",
 * "a16", another file; NULL: the file's own base family, else the one its engine
 * subtype names). Writes one line per field to out ("max_spatial  sim 16384  file
 * 12000  DIFFERS") and returns the number of fields that differ, or -1 with the error
 * set. */
AF_API int af_family_compare(const char *path, const char *family, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
