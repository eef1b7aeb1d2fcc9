/* The Neural Engine runtime: compiles MIL text + its weight file with the private
 * AppleNeuralEngine framework (_ANEInMemoryModelDescriptor, _ANEInMemoryModel,
 * _ANERequest, _ANEIOSurfaceObject), loads it, evaluates it on fp16 IOSurfaces and
 * unloads it. Plain C through the Objective-C runtime, CoreFoundation and IOSurface
 * (apple_api.h). On Apple it drives the real framework; on Linux it runs, unchanged,
 * against the fake framework the test suite builds (tests/fake_ane).
 *
 * Ports: every MIL function argument (in the order the function declares them; the
 * project's emitter writes them alphabetically) and every returned value (in the
 * order of `-> (...)`) is one port, given and taken as the tensor's fp16 elements flat
 * in the row-major order of its declared shape. On the engine side each port is an
 * IOSurface bound by the symbol and index the loaded model lists for it, laid out with
 * the model's strides (ane_ports.h); the copy between the two is the runtime's.
 *
 * Compiled programs are cached by the SHA-256 of (MIL text, weights): compiling the
 * same program again loads nothing and compiles nothing, it only gives the caller its
 * own surfaces and request on the loaded model. A program released and asked for again
 * is reloaded without compiling while the daemon still has it compiled
 * (-compiledModelExists, maderix/ANE issue 24). Every real compile counts against a
 * per-process budget (the daemon fails after about 119 compiles in one process):
 * past ane_rt_compile_budget() compiles, ane_rt_compile refuses new programs with
 * AF_ERR_UNSUPPORTED and a message naming the family file's compile_budget, saying to
 * reuse programs or restart the process.
 *
 * Compiling goes through -[_ANEInMemoryModel compileWithQoS:options:error:] or, where
 * this macOS lacks it or it fails, -[_ANEClient compileModel:options:qos:error:] on the
 * same staged folder; the first that compiles is kept for the process and logged
 * (ane_rt_compile_entry).
 *
 * Not thread-safe per program; the cache and loader are. */
#ifndef ANE_DARWIN_RUNTIME_H
#define ANE_DARWIN_RUNTIME_H
#include "aneforge.h"
#include "ane/darwin/ane_device.h"
#include <stddef.h>
#include <stdint.h>

#define ANE_RT_SYSTEM_FRAMEWORK "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework/AppleNeuralEngine"
#define ANE_RT_COMPILE_BUDGET 100 /* below the ~119 where the daemon starts failing */
#define ANE_RT_MAX_PORTS 64
#define ANE_RT_QOS 21

typedef struct ane_rt_program ane_rt_program;

typedef struct {
    int nin, nout;
    int64_t in_count[ANE_RT_MAX_PORTS];  /* fp16 elements of each argument, MIL order */
    int64_t out_count[ANE_RT_MAX_PORTS]; /* fp16 elements of each returned value */
} ane_rt_ports;

/* Loads the framework once per process: framework_path, or NULL for the system one
 * (ANE_RT_SYSTEM_FRAMEWORK). Fails with a message naming the path and what is missing
 * (the library, a symbol, an _ANE class). Calling it again after success is a no-op
 * when the path is the same (or NULL) and an error when it names another framework. */
af_status ane_rt_open(const char *framework_path);
/* The loaded framework's path, or NULL before a successful ane_rt_open. */
const char *ane_rt_framework(void);
/* Chip and engine family (ane_device.h), the subtype asked of the loaded framework.
 * Works without ane_rt_open (then subtype stays ""). */
af_status ane_rt_device_info(ane_rt_device *out);

/* Compiles and loads a program, or takes it from the cache. weights (may be NULL when
 * the MIL cites no BLOBFILE) is the MILBlob file the MIL cites as
 * @model_path/weights/weight.bin. A program needs at least one input and one output
 * (the framework's request validation). *out is the caller's handle: its own surfaces
 * and request, released with ane_rt_release. */
af_status ane_rt_compile(const char *mil, size_t mil_len, const uint8_t *weights, size_t weights_len,
                         const ane_rt_ports *ports, ane_rt_program **out);
/* The same for a net.plist program (native layers, seed 004): its XML, weights.0 and
 * weights.1 (NULL: empty), compiled through
 * +[_ANEInMemoryModelDescriptor modelWithNetworkDescription:weights:optionsPlist:]. The
 * ports are the procedure's InputList in order and its one output. One procedure only
 * (in-memory models take single-procedure netplists). */
af_status ane_rt_compile_netplist(const char *plist, size_t plist_len, const uint8_t *w0, size_t w0_len,
                                  const uint8_t *w1, size_t w1_len, const ane_rt_ports *ports, ane_rt_program **out);
/* Copies in[i] (fp16, in_count[i] values) to the input surfaces, evaluates, copies the
 * outputs to out[i]. in[i] may be NULL to keep what the surface holds (resident
 * state); out[i] may be NULL to not deliver it (an aliased output is never copied). */
af_status ane_rt_eval(ane_rt_program *p, const uint16_t *const *in, uint16_t *const *out);
/* Resident state: output out_index feeds input in_index (equal sizes) at the next
 * evaluation without crossing to the caller. Written straight into the input's surface
 * (one surface in both lists of the request) when state aliasing is on and both
 * layouts agree; otherwise copied from the output's surface after each evaluation. */
af_status ane_rt_alias(ane_rt_program *p, int out_index, int in_index);
/* 1 when output o of p is written straight into its state input's surface. */
int ane_rt_output_aliased(const ane_rt_program *p, int o);
/* Whether later ane_rt_alias calls may alias (default 1). No public project binds one
 * surface as an input and an output of one request, so this is a capability for the
 * chip probe to confirm on the first run; 0 copies state between separate surfaces. */
void ane_rt_set_state_alias(int on);
int ane_rt_state_alias(void);
/* Reads (to_host) or writes an input surface: seeding and reading resident state. */
af_status ane_rt_input_io(ane_rt_program *p, int in_index, uint16_t *host, int to_host);
/* Frees the handle; the last handle on a cached program unloads it and removes its
 * folder (-localModelPath), whatever the framework left in it. */
void ane_rt_release(ane_rt_program *p);

/* When the compiler refuses MIL that passed the family's walls: ". Likely cause: <op>
 * '<name>' [shape]: <extent> = v, p% of <limit> = L in the family file. Try: <remedy>.
 * To measure this chip's limits: aneforge doctor --probe ..." ("" when nothing fits). */
void ane_rt_diagnose(const char *mil, size_t len, af_family_id family, char *out, size_t n);

/* The compile entry point this process uses (the one that compiled, else the one it
 * would try first), as "-[Class selector]"; NULL before ane_rt_open. */
const char *ane_rt_compile_entry(void);
/* Programs loaded without compiling because the daemon still had them compiled. */
int64_t ane_rt_reload_count(void);
/* Real compiles done by this process (cache hits and reloads do not count), and the budget. */
int64_t ane_rt_compile_count(void);
int64_t ane_rt_compile_budget(void);
/* Sets the budget (>= 0): lower for callers that know their daemon allows fewer; higher
 * only for a framework without the real daemon's limit (the fake, in tests), since the
 * real one fails past about 119 compiles whatever this says. */
void ane_rt_set_compile_budget(int64_t n);
#endif
