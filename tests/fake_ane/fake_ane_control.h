/* Functions only the fake framework has: tests look them up with dlsym() on the
 * library they gave ane_rt_open, to set the fake up and to see what it saw. The fake
 * also reads FAKE_ANE_COMPILE_BUDGET, FAKE_ANE_SUBTYPE, FAKE_ANE_MACOS (14, 15, 26: which
 * compile entry point works) and FAKE_ANE_SET ("name=0,...", the switches of fake_ane_set)
 * from the environment (the fake is test equipment; the
 * library itself reads no environment). */
#ifndef FAKE_ANE_CONTROL_H
#define FAKE_ANE_CONTROL_H
/* Compiles allowed per process before -compileWithQoS fails (default 119). */
void fake_ane_set_compile_budget(long n);
/* -compileWithQoS calls so far (failed ones too). */
long fake_ane_compiles(void);
/* Makes the next n -loadWithQoS calls fail as a busy daemon does. */
void fake_ane_fail_loads(int n);
/* What +[_ANEDeviceInfo aneSubType] answers ("h13" .. "h17"; default "h16"). */
void fake_ane_set_subtype(const char *subtype);
/* -evaluateWithQoS calls that ran the program. */
long fake_ane_evaluations(void);
/* Objects of the fake (CF and _ANE) alive now: 0 after everything is released. */
long fake_ane_live_objects(void);
/* Sets one of the fake's behaviours (ane_classes.c lists them: weights_strict,
 * framework_files, attributes, padded_rows, shuffled_ports, validate, alias_surfaces,
 * underlying_errors, diagnostics, client_compile; 1 = as the real framework, the
 * default; and macos, the OS profile); 0 for an unknown name. */
int fake_ane_set(const char *name, long value);
/* Where -localModelPath puts model folders (NULL or "": NSTemporaryDirectory()). */
void fake_ane_set_model_root(const char *dir);
/* The last failure the fake reported or noticed, with the trap it enforces ("" if none). */
const char *fake_ane_last_error(void);
#endif
