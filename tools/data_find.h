/* Where the CLI finds a dataset: the user's data dir, else the copy shipped with
 * aneforge (MNIST, data/mnist/ in the source tree, installed under share/aneforge/). */
#ifndef AF_TOOLS_DATA_FIND_H
#define AF_TOOLS_DATA_FIND_H
#include "aneforge.h"
#include "aneforge_data.h"

/* The data dir to hand af_dataset_load for `kind`: `dir` when dir/<set>/ holds the
 * split's files (plain or .gz) or nothing is shipped for the set; else the first of
 * the shipped copies that holds them (see data_shipped_dir); else `dir`, whose missing
 * file the loader then names. The result lives in static storage. */
const char *data_dir_for(af_dataset_kind kind, const char *dir);
/* The i-th place (0, 1, ...) a shipped copy may live, as a data dir holding mnist/; NULL
 * past the last: <exe>/../share/aneforge (a relocated install, Linux), the install
 * prefix's share/aneforge compiled in, and the source tree's data/ (the build tree). */
const char *data_shipped_dir(int i);
/* 1 when dir/<set>/<name> or its .gz is a regular file. */
int data_has_file(const char *dir, const char *set, const char *name);
#endif
