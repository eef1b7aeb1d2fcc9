/* One temporary folder per test program: made under /tmp, paths inside it, removed at
 * the end with everything in it. */
#ifndef TEST_TMPDIR_H
#define TEST_TMPDIR_H

/* Makes /tmp/PREFIX_XXXXXX; returns its path, or NULL (the test should fail). */
const char *test_tmpdir_make(const char *prefix);
/* "<folder>/name"; four results stay valid at once (a call's arguments may be paths). */
char *path_in(const char *name);
/* Removes the folder and everything in it. */
void test_tmpdir_remove(void);
#endif
