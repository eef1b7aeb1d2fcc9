/* How the runtime's ports meet the engine's surfaces (inside src/ane/darwin only):
 *   - each port's symbol, read from the program itself (the MIL function's argument and
 *     returned names; a net.plist's InputName and OutputList names), because the loaded
 *     model names its live inputs and outputs by symbol, in an order of its own;
 *   - each port's layout from -modelAttributes (NetworkStatusList[0].LiveInputList /
 *     LiveOutputList: Batches, Channels, Depth, Height, Width and the byte strides), so
 *     data is copied row by row where rows are padded and flat only where the layout is;
 *   - the surface size: the layout's extent, at least ANE_RT_MIN_SURFACE bytes, rounded
 *     up to ANE_RT_SURFACE_ROUND (docs/fake-ane.md gives the sources). */
#ifndef ANE_DARWIN_PORTS_H
#define ANE_DARWIN_PORTS_H
#include "ane/darwin/ane_runtime.h"
#include "ane/darwin/apple_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ANE_RT_SYMBOL 128
#define ANE_RT_MIN_SURFACE 2048  /* imperatormk/ane-train's stated minimum surface */
#define ANE_RT_SURFACE_ROUND 128 /* maderix/ANE PR 35: M5 wants surface sizes in 128-byte steps */
#define ANE_RT_MAX_BUFFERS 255   /* -[_ANERequest validate]: buffers and indices below 255 */

typedef struct {
    int index;                                   /* the index the model gives this port (its list position) */
    int64_t dim[5];                              /* batches, channels, depth, height, width */
    int64_t stride[4];                           /* bytes: batch, channel (plane), depth, row */
    size_t bytes;                                /* the surface to allocate */
    bool flat;                                   /* the layout is the tensor's packed fp16 elements */
} ane_rt_layout;

typedef struct {
    char in[ANE_RT_MAX_PORTS][ANE_RT_SYMBOL], out[ANE_RT_MAX_PORTS][ANE_RT_SYMBOL];
} ane_rt_symbols;

/* The symbols of a MIL program's main function (nin arguments, nout results). */
af_status ane_rt_mil_symbols(const char *mil, size_t len, int nin, int nout, ane_rt_symbols *out);
/* The symbols of a net.plist program (InputList's InputName, OutputList's Name). */
af_status ane_rt_netplist_symbols(const char *xml, size_t len, int nin, int nout, ane_rt_symbols *out);

/* A packed layout of count fp16 values at index i: what is used when the model
 * publishes no attributes (an older framework), in declaration order. */
void ane_rt_layout_flat(ane_rt_layout *l, int index, int64_t count);
/* The layouts of n ports named sym[] from a -modelAttributes dictionary (inputs or
 * outputs); *found is false (and nothing is set) when attrs has no live port lists.
 * Fails naming the symbol when the model does not list one, or lists it with another
 * element count or an index the request cannot carry. */
af_status ane_rt_layouts(CFTypeRef attrs, bool inputs, int n, const char (*sym)[ANE_RT_SYMBOL], const int64_t *count,
                         ane_rt_layout *out, bool *found);
/* The chip probe's knob for IOSurface alignment (ane_probe.c): the surfaces of programs
 * compiled from now on are sized in steps of `step` bytes (0: back to
 * ANE_RT_SURFACE_ROUND), and with `odd` in an odd number of steps, so that each size is a
 * multiple of step and of nothing twice as large. */
void ane_rt_set_surface_step(size_t step, bool odd);
/* Copies the tensor between host (packed fp16) and a surface's base in layout l. */
void ane_rt_layout_copy(const ane_rt_layout *l, uint8_t *surface, uint16_t *host, bool to_surface);
/* True when two layouts place every element at the same byte. */
bool ane_rt_layout_same(const ane_rt_layout *a, const ane_rt_layout *b);
#endif
