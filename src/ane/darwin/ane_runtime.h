/* The Neural Engine runtime on Apple Silicon: compiles MIL text + weight file with the
 * private AppleNeuralEngine framework (_ANEInMemoryModelDescriptor, _ANEInMemoryModel,
 * _ANERequest, _ANEIOSurfaceObject), loads it, evaluates it on fp16 IOSurfaces laid
 * out [1, C, 1, S], and unloads it. Plain C through the Objective-C runtime,
 * CoreFoundation and IOSurface; built only on Apple (Linux CI compiles it against
 * tests/darwin_stubs).
 *
 * Programs are cached by SHA-256 of (MIL text, weights): compiling the same program
 * twice loads it once and shares it. Every real compile counts against the per-process
 * budget the ANE daemon imposes (about 119 compiles, then failures): past
 * AF_ANE_MAX_COMPILES, af_ane_compile refuses with AF_ERR_UNSUPPORTED, and the caller
 * must reuse programs or restart the process. */
#ifndef AF_ANE_DARWIN_RUNTIME_H
#define AF_ANE_DARWIN_RUNTIME_H
#include "aneforge.h"
#include <stddef.h>
#include <stdint.h>

#define AF_ANE_MAX_COMPILES 100
#define AF_ANE_MAX_PORTS 16
#define AF_ANE_QOS 21

typedef struct af_ane_program af_ane_program;

typedef struct {
    int nin, nout;                      /* ports, in MIL order (alphabetical arguments) */
    int64_t in_ch[AF_ANE_MAX_PORTS], in_sp[AF_ANE_MAX_PORTS];   /* each port is fp16 [1, C, 1, S] */
    int64_t out_ch[AF_ANE_MAX_PORTS], out_sp[AF_ANE_MAX_PORTS];
} af_ane_ports;

/* Compiles and loads a program (or takes it from the cache). weights may be NULL when
 * the MIL cites no BLOBFILE; they are served as @model_path/weights/weight.bin. */
af_status af_ane_compile(const char *mil, size_t mil_len, const uint8_t *weights, size_t weights_len,
                         const af_ane_ports *ports, af_ane_program **out);
/* Copies in[i] (fp16, C*S values each) to the input surfaces, evaluates, copies the
 * outputs to out[i]. An aliased output has no out[i] to fill (pass NULL). */
af_status af_ane_eval(af_ane_program *p, const uint16_t *const *in, uint16_t *const *out);
/* Resident state: output `o` is written straight into input surface `i` (same size),
 * so the next evaluation reads it without a host copy. */
af_status af_ane_alias(af_ane_program *p, int o, int i);
/* Drops a reference; the last one unloads the program and removes its files. */
void af_ane_release(af_ane_program *p);
/* Real compiles done by this process (cache hits do not count). */
int64_t af_ane_compile_count(void);
#endif
