/* Neural Engine families, target specs and hardware detection. Every family is data: the
 * built-in ones are the files in src/engine/families/ (compiled in by CMake, each fact
 * cited there), others are family files loaded at run time, such as what `aneforge
 * doctor --probe` measured on a Mac. The naming follows ANEForge: A13 = M1, A14 = M2,
 * A15 = M3, A16 = M4 and M5. */
#include "engine/family.h"
#include "engine/family_file.h"
#include "ir/ir.h"

#include <ctype.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#define F(k, lo, hi, what) { #k, offsetof(ane_family_info, k), lo, hi, what }
const ane_family_field ane_family_fields[] = {
    F(max_spatial, 1, 1 << 24, "largest W, H and matmul K"),
    F(max_axis, 1, 1 << 24, "largest channel (any other) extent"),
    F(max_rank, 1, 16, "largest rank"),
    F(max_kernel_w, 1, 4096, "widest conv kernel"),
    F(wide_row_max, 1, 1 << 24, "widest reshaped row feeding a concat"),
    F(crop_dma_saturates, 0, 1, "crop DMA saturates past 4094"),
    F(compile_hangs_on_large_batch, 0, 1, "large-batch compiles hang"),
    F(compile_budget, 1, 1 << 20, "compiles per process"),
    F(surface_align, 0, 1 << 16, "IOSurface byte alignment (0: none needed)"),
    F(max_inputs, 1, 1 << 16, "inputs one program binds"),
    F(max_weight_bytes, 1, (int64_t)1 << 40, "constant weight bytes per program"),
    F(matmul_overflow, 1, 65504, "matmul/conv output magnitude before inf"),
};
#undef F
const int ane_family_nfields = (int)(sizeof ane_family_fields / sizeof ane_family_fields[0]);

/* The compiled-in family files (engine_families.inc, made by CMake from
 * src/engine/families/<name>.json; A13..A16 first, in id order). */
static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

static const char *const builtin_json[] = {
#include "engine_families.inc"
};
#define NBUILTIN ((int)(sizeof builtin_json / sizeof builtin_json[0]))
#define MAX_LOADED 32
#define LOADED_ID0 100

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static ane_family_info builtin[NBUILTIN];
static int nbuiltin_ok;
static ane_family_info loaded[MAX_LOADED];
static char *loaded_path[MAX_LOADED];
static int nloaded;

static bool ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

static bool has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* Keys a family file may hold besides the fields: descriptions and citations, and what
 * a probe measured that the simulator does not use. */
static bool free_key(const char *k, ff_type t) {
    static const char *const strs[] = { "note", "subtype", "chip", "model", "macos", "framework", "compile_entry" };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!strcmp(k, strs[i])) return t == FF_STR;
    size_t n = strlen(k);
    if (n > 7 && !strcmp(k + n - 7, "_source")) return t == FF_STR;
    return has_prefix(k, "measured.") || has_prefix(k, "op.") || has_prefix(k, "bridge.") || has_prefix(k, "spelling.") ||
           has_prefix(k, "step.");
}

static const ane_family_info *builtin_named(const char *name);
static const ane_family_info *builtin_table(int *n);

static af_status str_field(const ff_doc *d, const char *src, const char *key, char *out, size_t cap, bool required) {
    const ff_member *m = ff_get(d, key);
    out[0] = 0;
    if (!m && !required) return AF_OK;
    if (!m) return ir_fail(AF_ERR_CORRUPT, "%s: no \"%s\" (every family file names its family)", src, key);
    if (m->type != FF_STR || !m->str[0] || strlen(m->str) >= cap)
        return ir_fail(AF_ERR_CORRUPT, "%s: \"%s\" must be a string of 1 to %zu characters", src, key, cap - 1);
    snprintf(out, cap, "%s", m->str);
    return AF_OK;
}

/* A parsed family file as a family: every key checked, every field in its range, a null
 * field taken from the base family. */
static af_status from_doc(const ff_doc *d, const char *src, bool is_builtin, ane_family_info *out) {
    memset(out, 0, sizeof *out);
    const ff_member *fmt = ff_get(d, "format");
    if (!fmt || fmt->type != FF_STR || strcmp(fmt->str, "aneforge-family 1"))
        return ir_fail(AF_ERR_CORRUPT, "%s: not a family file (\"format\" must be \"aneforge-family 1\")", src);
    af_status st;
    if ((st = str_field(d, src, "name", out->name, sizeof out->name, true)) ||
        (st = str_field(d, src, "chips", out->chips, sizeof out->chips, true)) ||
        (st = str_field(d, src, "base", out->base, sizeof out->base, false)))
        return st;
    const ane_family_info *base = NULL;
    if (out->base[0] && !(base = builtin_named(out->base)))
        return ir_fail(AF_ERR_CORRUPT, "%s: base family \"%s\" is not built in; use A13, A14, A15 or A16", src, out->base);
    for (int i = 0; i < d->n; i++) {
        const ff_member *m = &d->m[i];
        bool known = !strcmp(m->key, "format") || !strcmp(m->key, "name") || !strcmp(m->key, "chips") || !strcmp(m->key, "base");
        for (int f = 0; f < ane_family_nfields && !known; f++) known = !strcmp(m->key, ane_family_fields[f].key);
        if (!known && !free_key(m->key, m->type))
            return ir_fail(AF_ERR_CORRUPT, "%s: unknown key \"%s\" (or a value of the wrong type); the fields are max_spatial, "
                          "max_axis, max_rank, max_kernel_w, wide_row_max, crop_dma_saturates, compile_hangs_on_large_batch, "
                          "compile_budget, surface_align, max_inputs, max_weight_bytes, matmul_overflow, each with an "
                          "optional <field>_source string", src, m->key);
    }
    for (int f = 0; f < ane_family_nfields; f++) {
        const ane_family_field *fd = &ane_family_fields[f];
        const ff_member *m = ff_get(d, fd->key);
        int64_t *v = (int64_t *)((char *)out + fd->offset);
        if (!m) return ir_fail(AF_ERR_CORRUPT, "%s: no \"%s\" (%s); write null when it is unknown", src, fd->key, fd->what);
        if (m->type == FF_NULL) {
            if (is_builtin && fd->offset != offsetof(ane_family_info, surface_align))
                return ir_fail(AF_ERR_CORRUPT, "%s: a built-in family must know \"%s\"", src, fd->key);
            if (!base && fd->offset != offsetof(ane_family_info, surface_align))
                return ir_fail(AF_ERR_CORRUPT, "%s: \"%s\" is null (unknown) and the file names no \"base\" family to take it "
                               "from; add \"base\": \"A16\" (or A13..A15) or give the value", src, fd->key);
            *v = base ? ane_family_get(base, f) : 0;
            out->unknown |= 1u << f;
            continue;
        }
        if ((m->type != FF_INT && m->type != FF_BOOL) || m->i < fd->lo || m->i > fd->hi)
            return ir_fail(AF_ERR_CORRUPT, "%s: \"%s\" (%s) must be an integer in %lld..%lld or null", src, fd->key, fd->what,
                           (long long)fd->lo, (long long)fd->hi);
        *v = m->i;
    }
    return AF_OK;
}

af_status ane_family_from_doc(const ff_doc *d, const char *src, ane_family_info *out) {
    int nb;
    builtin_table(&nb);
    return from_doc(d, src, false, out);
}

static void init_builtin(void) {
    for (int i = 0; i < NBUILTIN; i++) {
        ff_doc d;
        char src[40];
        snprintf(src, sizeof src, "built-in family file %d", i);
        if (ff_parse(src, (const uint8_t *)builtin_json[i], strlen(builtin_json[i]), &d)) return;
        ane_family_info fi;
        /* A13..A16 must know every field; the newer ones may leave some to a probe. */
        af_status st = from_doc(&d, src, i < 4, &fi);
        ff_free(&d);
        if (st) return;
        fi.id = (af_family_id)(AF_FAMILY_A13 + i);
        builtin[i] = fi;
        nbuiltin_ok = i + 1;
    }
}

static const ane_family_info *builtin_table(int *n) {
    pthread_once(&once, init_builtin);
    *n = nbuiltin_ok;
    return builtin;
}

/* Reads the table without pthread_once: from_doc calls it inside init_builtin (the newer
 * built-in families name A16 as their base), and ane_family_load runs the init first. */
static const ane_family_info *builtin_named(const char *name) {
    for (int i = 0; i < nbuiltin_ok && i < 4; i++)
        if (ieq(builtin[i].name, name)) return &builtin[i];
    return NULL;
}

const ane_family_info *ane_family_info_of(af_family_id fam) {
    int n;
    const ane_family_info *t = builtin_table(&n);
    for (int i = 0; i < n; i++)
        if (t[i].id == fam) return &t[i];
    const ane_family_info *r = NULL;
    pthread_mutex_lock(&lock);
    int k = (int)fam - LOADED_ID0;
    if (k >= 0 && k < nloaded) r = &loaded[k];
    pthread_mutex_unlock(&lock);
    return r;
}

af_status ane_family_load(const char *path, af_family_id *out) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nloaded; i++)
        if (!strcmp(loaded_path[i], path)) {
            if (out) *out = loaded[i].id;
            pthread_mutex_unlock(&lock);
            return AF_OK;
        }
    pthread_mutex_unlock(&lock);
    int nb;
    builtin_table(&nb);
    ff_doc d;
    af_status st = ff_read(path, &d);
    if (st) return st;
    ane_family_info fi;
    st = from_doc(&d, path, false, &fi);
    ff_free(&d);
    if (st) return st;
    pthread_mutex_lock(&lock);
    char *p = nloaded < MAX_LOADED ? dupstr(path) : NULL;
    if (!p) {
        pthread_mutex_unlock(&lock);
        return ir_fail(AF_ERR_INVALID, "family file %s: %d family files are loaded in this process already (or out of memory)", path,
                       MAX_LOADED);
    }
    fi.id = (af_family_id)(LOADED_ID0 + nloaded);
    loaded[nloaded] = fi;
    loaded_path[nloaded++] = p;
    pthread_mutex_unlock(&lock);
    if (out) *out = fi.id;
    return AF_OK;
}

static bool is_path(const char *s) {
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && ieq(s + n - 5, ".json"));
}

af_status ane_family_parse(const char *s, af_family_id *out) {
    static const struct { const char *name; af_family_id id; } names[] = {
        { "m1", AF_FAMILY_A13 }, { "m2", AF_FAMILY_A14 }, { "m3", AF_FAMILY_A15 }, { "m4", AF_FAMILY_A16 },
        { "m5", AF_FAMILY_A16 },
    };
    if (s && is_path(s)) return ane_family_load(s, out);
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (ieq(s, names[i].name)) {
            if (out) *out = names[i].id;
            return AF_OK;
        }
    int n;
    const ane_family_info *t = builtin_table(&n);
    for (int i = 0; s && i < n; i++)
        if (ieq(s, t[i].name)) {
            if (out) *out = t[i].id;
            return AF_OK;
        }
    return ir_fail(AF_ERR_INVALID, "unknown Neural Engine family '%s'; use m1, m2, m3, m4, m5, a13, a14, a15, a16, a17, h17 "
                   "or the path of a family file (a doctor --probe result, ending in .json)", s ? s : "(null)");
}

af_status af_target_parse(const char *spec, af_target *t, af_family_id *fam) {
    if (!spec) return ir_fail(AF_ERR_INVALID, "af_target_parse: spec is NULL");
    char head[16];
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    af_target tt;
    af_family_id ff = AF_FAMILY_DEFAULT;
    if (n >= sizeof head) n = sizeof head - 1; /* too long to match anything */
    memcpy(head, spec, n);
    head[n] = 0;
    if (ieq(head, "cpu")) tt = AF_TARGET_CPU;
    else if (ieq(head, "ane-sim")) tt = AF_TARGET_ANE_SIM;
    else if (ieq(head, "ane")) tt = AF_TARGET_ANE;
    else return ir_fail(AF_ERR_INVALID, "unknown target '%s'; use cpu, ane-sim[:m1..m5|a13..a17|h17|FILE.json] or ane[:...]", spec);
    if (colon) {
        if (tt == AF_TARGET_CPU) return ir_fail(AF_ERR_INVALID, "target '%s': the cpu target has no family; use plain 'cpu'", spec);
        if (ane_family_parse(colon + 1, &ff)) {
            char why[600];
            snprintf(why, sizeof why, "%s", af_error_message());
            return ir_fail(AF_ERR_INVALID, "target '%s': %s", spec, why);
        }
    }
    if (t) *t = tt;
    if (fam) *fam = ff;
    return AF_OK;
}

#if defined(__APPLE__)
/* "Apple M1 Pro" -> A13 ... "Apple M5" -> A16. */
static af_family_id family_of_brand(const char *b) {
    const char *m = strstr(b, "Apple M");
    if (!m || !isdigit((unsigned char)m[7])) return AF_FAMILY_DEFAULT;
    int gen = atoi(m + 7);
    return gen <= 1 ? AF_FAMILY_A13 : gen == 2 ? AF_FAMILY_A14 : gen == 3 ? AF_FAMILY_A15 : AF_FAMILY_A16;
}
#endif

af_family_id ane_family_detect(void) {
#if defined(__APPLE__)
    char brand[128] = { 0 };
    size_t len = sizeof brand - 1;
    if (sysctlbyname("machdep.cpu.brand_string", brand, &len, NULL, 0) == 0) return family_of_brand(brand);
#endif
    return AF_FAMILY_DEFAULT;
}

af_status af_family_resolve(af_family_id fam, af_family_id *out) {
    if (fam != AF_FAMILY_DEFAULT) {
        if (!ane_family_info_of(fam))
            return ir_fail(AF_ERR_INVALID, "unknown Neural Engine family %d; use AF_FAMILY_A13 .. AF_FAMILY_A16, AF_FAMILY_DEFAULT "
                           "or a family af_target_parse loaded", (int)fam);
        if (out) *out = fam;
        return AF_OK;
    }
    af_family_id f = ane_family_detect();
    if (f == AF_FAMILY_DEFAULT) f = AF_FAMILY_A16; /* no hardware to ask: the newest family */
    if (out) *out = f;
    return AF_OK;
}

const char *af_family_name_of(af_family_id fam) {
    af_family_id f = fam;
    if (fam == AF_FAMILY_DEFAULT && af_family_resolve(fam, &f)) return "?";
    const ane_family_info *fi = ane_family_info_of(f);
    return fi ? fi->name : "?";
}
