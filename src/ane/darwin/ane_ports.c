/* Port symbols, layouts from -modelAttributes and strided copies (ane_ports.h). */
#include "ane/darwin/ane_ports.h"
#include "ir/ir.h"
#include "netplist/plist.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define A ane_apple

/* ---------------------------------------------------------------- symbols from the program */

/* The last identifier in s[0..n): an argument "tensor<fp16, [1, 4]> x" ends with its name. */
static bool last_ident(const char *s, size_t n, char *out) {
    while (n && isspace((unsigned char)s[n - 1])) n--;
    size_t e = n;
    while (n && (isalnum((unsigned char)s[n - 1]) || s[n - 1] == '_')) n--;
    if (e == n || e - n >= ANE_RT_SYMBOL) return false;
    memcpy(out, s + n, e - n);
    out[e - n] = 0;
    return true;
}

/* Splits s[0..n) at top-level commas (outside <>, [], (), strings) into names. */
static int split_names(const char *s, size_t n, char (*out)[ANE_RT_SYMBOL], int max) {
    int depth = 0, k = 0;
    size_t start = 0;
    bool in_str = false;
    for (size_t i = 0; i <= n; i++) {
        char c = i < n ? s[i] : ',';
        if (in_str) { in_str = c != '"'; continue; }
        if (c == '"') in_str = true;
        else if (c == '<' || c == '[' || c == '(') depth++;
        else if (c == '>' || c == ']' || c == ')') depth--;
        else if (c == ',' && depth == 0) {
            bool blank = true;
            for (size_t j = start; j < i; j++) blank &= isspace((unsigned char)s[j]) != 0;
            if (!blank) {
                if (k >= max || !last_ident(s + start, i - start, out[k])) return -1;
                k++;
            }
            start = i + 1;
        }
    }
    return k;
}

/* The index just past the bracket that closes the one at s[i] (open/close), or 0. */
static size_t closing(const char *s, size_t n, size_t i, char open, char close) {
    int depth = 0;
    bool in_str = false;
    for (; i < n; i++) {
        if (in_str) { in_str = s[i] != '"'; continue; }
        if (s[i] == '"') in_str = true;
        else if (s[i] == open) depth++;
        else if (s[i] == close && --depth == 0) return i + 1;
    }
    return 0;
}

af_status ane_rt_mil_symbols(const char *mil, size_t len, int nin, int nout, ane_rt_symbols *out) {
    const char *f = NULL;
    for (size_t i = 0; i + 9 < len && !f; i++)
        if (!memcmp(mil + i, "func main", 9)) f = mil + i;
    size_t at = f ? (size_t)(f - mil) : len, args = 0, args_end = 0, body = 0, body_end = 0;
    while (at < len && mil[at] != '(') at++;
    if (at < len && (args_end = closing(mil, len, at, '(', ')'))) args = at + 1;
    for (at = args_end; args_end && at < len && mil[at] != '{'; at++) {}
    if (args_end && at < len && (body_end = closing(mil, len, at, '{', '}'))) body = at;
    at = body_end;
    while (body_end && at < len && (isspace((unsigned char)mil[at]) || mil[at] == '-' || mil[at] == '>')) at++;
    size_t rets_end = body && at < len && mil[at] == '(' ? closing(mil, len, at, '(', ')') : 0;
    if (!rets_end)
        return ir_fail(AF_ERR_INVALID, "ane: the MIL text has no `func main(...) { ... } -> (...)` to read its port names from");
    int ni = split_names(mil + args, args_end - 1 - args, out->in, ANE_RT_MAX_PORTS);
    int no = split_names(mil + at + 1, rets_end - 2 - at, out->out, ANE_RT_MAX_PORTS);
    if (ni != nin || no != nout)
        return ir_fail(AF_ERR_INVALID, "ane: the MIL function declares %d arguments and %d results; the ports say %d and %d",
                       ni, no, nin, nout);
    return AF_OK;
}

af_status ane_rt_netplist_symbols(const char *xml, size_t len, int nin, int nout, ane_rt_symbols *out) {
    char err[256] = "";
    plist_value *doc = plist_read_xml(xml, len, err, sizeof err);
    if (!doc) return ir_fail(AF_ERR_INVALID, "ane: the net.plist does not read: %s", err);
    const plist_value *procs = plist_get_kind(doc, "ProcedureList", PLIST_ARRAY);
    const plist_value *proc = procs && procs->n == 1 ? procs->items[0] : NULL;
    const plist_value *ins = proc ? plist_get_kind(proc, "InputList", PLIST_ARRAY) : NULL;
    const plist_value *outs = proc ? plist_get_kind(proc, "OutputList", PLIST_ARRAY) : NULL;
    bool ok = ins && outs && ins->n == nin && outs->n == nout;
    for (int k = 0; ok && k < nin + nout; k++) {
        const char *s = k < nin ? plist_get_str(ins->items[k], "InputName") : plist_get_str(outs->items[k - nin], "Name");
        ok = s && strlen(s) < ANE_RT_SYMBOL;
        if (ok) snprintf(k < nin ? out->in[k] : out->out[k - nin], ANE_RT_SYMBOL, "%s", s);
    }
    plist_free(doc);
    return ok ? AF_OK
              : ir_fail(AF_ERR_INVALID, "ane: the net.plist's one procedure must list %d named inputs (InputName) and %d "
                                        "output (Name), as the ports say", nin, nout);
}

/* ---------------------------------------------------------------- layouts */

static _Atomic size_t surface_step = ANE_RT_SURFACE_ROUND;
static atomic_bool surface_odd;

void ane_rt_set_surface_step(size_t step, bool odd) {
    atomic_store(&surface_step, step ? step : ANE_RT_SURFACE_ROUND);
    atomic_store(&surface_odd, odd);
}

static size_t round_surface(size_t bytes) {
    size_t step = atomic_load(&surface_step);
    if (bytes < ANE_RT_MIN_SURFACE) bytes = ANE_RT_MIN_SURFACE;
    size_t n = (bytes + step - 1) / step;
    if (atomic_load(&surface_odd) && n % 2 == 0) n++;
    return n * step;
}

/* Flat when every dimension longer than 1 has the packed stride. */
static void finish(ane_rt_layout *l) {
    int64_t packed = 2, extent = 2;
    l->flat = true;
    for (int k = 3; k >= 0; k--) { /* row, depth, plane, batch: dims 3, 2, 1, 0 */
        int64_t inner = l->dim[k + 1];
        packed *= inner;
        if (l->dim[k] > 1 && l->stride[k] != packed) l->flat = false;
    }
    for (int k = 0; k < 4; k++) extent += (l->dim[k] - 1) * l->stride[k];
    extent += (l->dim[4] - 1) * 2;
    if (l->dim[0] * l->stride[0] > extent) extent = l->dim[0] * l->stride[0]; /* the engine may write whole batches */
    l->bytes = round_surface((size_t)extent);
}

void ane_rt_layout_flat(ane_rt_layout *l, int index, int64_t count) {
    *l = (ane_rt_layout){.index = index, .dim = {1, 1, 1, 1, count}};
    for (int k = 0; k < 4; k++) l->stride[k] = count * 2;
    finish(l);
}

static bool number(CFTypeRef d, const char *key, int64_t *v) {
    CFStringRef k = A.CFStringCreateWithCString(NULL, key, kCFStringEncodingUTF8);
    CFTypeRef n = k ? A.CFDictionaryGetValue((CFDictionaryRef)d, k) : NULL;
    if (k) A.CFRelease(k);
    return n && A.CFGetTypeID(n) == A.CFNumberGetTypeID() && A.CFNumberGetValue((CFNumberRef)n, kCFNumberSInt64Type, v);
}

static CFTypeRef get(CFTypeRef d, const char *key, CFTypeID type) {
    if (!d || A.CFGetTypeID(d) != A.CFDictionaryGetTypeID()) return NULL;
    CFStringRef k = A.CFStringCreateWithCString(NULL, key, kCFStringEncodingUTF8);
    CFTypeRef v = k ? A.CFDictionaryGetValue((CFDictionaryRef)d, k) : NULL;
    if (k) A.CFRelease(k);
    return v && A.CFGetTypeID(v) == type ? v : NULL;
}

static CFTypeRef item(CFTypeRef a, CFIndex i, CFTypeID type) {
    CFTypeRef v = i < A.CFArrayGetCount((CFArrayRef)a) ? A.CFArrayGetValueAtIndex((CFArrayRef)a, i) : NULL;
    return v && A.CFGetTypeID(v) == type ? v : NULL;
}

/* One LiveInputList / LiveOutputList entry. Missing dimensions are 1, missing strides packed. */
static bool entry_layout(CFTypeRef e, ane_rt_layout *l) {
    static const char *const dims[5] = {"Batches", "Channels", "Depth", "Height", "Width"};
    static const char *const strides[4] = {"BatchStride", "PlaneStride", "DepthStride", "RowStride"};
    int64_t packed[4];
    for (int k = 0; k < 5; k++) {
        if (!number(e, dims[k], &l->dim[k])) l->dim[k] = 1;
        if (l->dim[k] < 1 || l->dim[k] > ((int64_t)1 << 28)) return false;
    }
    packed[3] = l->dim[4] * 2;                /* row */
    packed[2] = packed[3] * l->dim[3];        /* depth */
    packed[1] = packed[2] * l->dim[2];        /* plane (channel) */
    packed[0] = packed[1] * l->dim[1];        /* batch */
    for (int k = 0; k < 4; k++) {
        if (!number(e, strides[k], &l->stride[k])) l->stride[k] = packed[k];
        if (l->stride[k] < 0 || l->stride[k] > ((int64_t)1 << 31) || (l->stride[k] & 1)) return false;
    }
    finish(l);
    return true;
}

af_status ane_rt_layouts(CFTypeRef attrs, bool inputs, int n, const char (*sym)[ANE_RT_SYMBOL], const int64_t *count,
                         ane_rt_layout *out, bool *found) {
    const char *list_key = inputs ? "LiveInputList" : "LiveOutputList", *what = inputs ? "input" : "output";
    CFTypeRef status = get(attrs, "NetworkStatusList", A.CFArrayGetTypeID());
    CFTypeRef net = status ? item(status, 0, A.CFDictionaryGetTypeID()) : NULL;
    CFTypeRef list = get(net, list_key, A.CFArrayGetTypeID());
    *found = list != NULL;
    if (!list) return AF_OK;
    CFIndex len = A.CFArrayGetCount((CFArrayRef)list);
    for (int k = 0; k < n; k++) {
        out[k].index = -1;
        for (CFIndex i = 0; i < len && out[k].index < 0; i++) {
            char s[ANE_RT_SYMBOL];
            CFTypeRef e = item(list, i, A.CFDictionaryGetTypeID());
            CFTypeRef name = get(e, "Symbol", A.CFStringGetTypeID());
            if (!name || !A.CFStringGetCString((CFStringRef)name, s, sizeof s, kCFStringEncodingUTF8) || strcmp(s, sym[k])) continue;
            if (!entry_layout(e, &out[k]))
                return ir_fail(AF_ERR_UNSUPPORTED, "ane: the model's %s entry for %s %s has dimensions or strides out of range",
                               list_key, what, sym[k]);
            out[k].index = (int)i;
        }
        if (out[k].index < 0)
            return ir_fail(AF_ERR_UNSUPPORTED, "ane: the loaded model lists no %s named %s in its %s (%ld entries): "
                           "the program and the model disagree", what, sym[k], list_key, (long)len);
        if (out[k].index >= ANE_RT_MAX_BUFFERS)
            return ir_fail(AF_ERR_UNSUPPORTED, "ane: %s %s has index %d; a request carries indices below %d", what, sym[k],
                           out[k].index, ANE_RT_MAX_BUFFERS);
        int64_t elems = 1;
        for (int d = 0; d < 5; d++) elems *= out[k].dim[d];
        if (elems != count[k])
            return ir_fail(AF_ERR_UNSUPPORTED, "ane: the model lays out %s %s as %lld values; the port holds %lld",
                           what, sym[k], (long long)elems, (long long)count[k]);
    }
    return AF_OK;
}

/* ---------------------------------------------------------------- copies */

void ane_rt_layout_copy(const ane_rt_layout *l, uint8_t *surface, uint16_t *host, bool to_surface) {
    int64_t total = l->dim[0] * l->dim[1] * l->dim[2] * l->dim[3] * l->dim[4];
    if (l->flat) {
        if (to_surface) memcpy(surface, host, (size_t)total * 2);
        else memcpy(host, surface, (size_t)total * 2);
        return;
    }
    size_t row = (size_t)l->dim[4] * 2;
    uint16_t *h = host;
    for (int64_t b = 0; b < l->dim[0]; b++)
        for (int64_t c = 0; c < l->dim[1]; c++)
            for (int64_t d = 0; d < l->dim[2]; d++)
                for (int64_t y = 0; y < l->dim[3]; y++, h += l->dim[4]) {
                    uint8_t *s = surface + b * l->stride[0] + c * l->stride[1] + d * l->stride[2] + y * l->stride[3];
                    if (to_surface) memcpy(s, h, row);
                    else memcpy(h, s, row);
                }
}

bool ane_rt_layout_same(const ane_rt_layout *a, const ane_rt_layout *b) {
    for (int k = 0; k < 5; k++)
        if (a->dim[k] != b->dim[k] || (k < 4 && a->dim[k] > 1 && a->stride[k] != b->stride[k])) return false;
    return a->bytes == b->bytes;
}
