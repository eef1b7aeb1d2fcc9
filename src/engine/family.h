/* Neural Engine families: their limits and numerics, target-spec parsing ("ane-sim:m1",
 * "ane-sim:chip.json", ANEFORGE_TARGET) and hardware detection. Every family is a family
 * file (family_file.h): the built-in ones are src/engine/families/<name>.json, compiled in;
 * others are loaded from a path (a `doctor --probe` result) and registered for the
 * process. */
#ifndef AF_ANE_FAMILY_H
#define AF_ANE_FAMILY_H
#include "aneforge.h"
#include <stdint.h>

typedef struct {
    af_family_id id;
    char name[16];           /* "A13" */
    char chips[48];          /* "M1" */
    char base[16];           /* the built-in family its unknowns come from ("" for a built-in) */
    int64_t max_spatial;     /* W, H and matmul K: 16384 before A16, 65536 from A16 */
    int64_t max_axis;        /* channels and every other axis */
    int64_t max_rank;        /* NCHW plus depth */
    int64_t max_kernel_w;    /* conv kernel width: 13 on A13, 15 later */
    int64_t wide_row_max;    /* the widest row a reshape may produce and feed to a concat */
    int64_t crop_dma_saturates;  /* slice with a last-axis begin != 0 saturates past 4094, and so do
                                  * conv weight gradients (A13 per seed 000, A14 per ane-formats.md) */
    int64_t compile_hangs_on_large_batch; /* large-batch programs compile for minutes or hang (A13, seed 000) */
    int64_t compile_budget;  /* compiles per process before the compiler fails */
    int64_t surface_align;   /* bytes an IOSurface's row (the whole 1-D surface) must be a multiple of
                              * (0: none needed, or unknown) */
    int64_t max_inputs;      /* inputs one program may bind (the runtime binds at most 64) */
    int64_t max_weight_bytes; /* constant weight bytes (fp16) one program may hold */
    int64_t matmul_overflow; /* matmul and conv outputs beyond +-this become +-inf (the accumulator's range) */
    uint32_t unknown;        /* bit i: field i was null in the file (taken from base) */
} ane_family_info;

/* The family-file fields the simulator uses, one row each: the reader, the writer, the
 * probe and --compare all walk this table. */
typedef struct {
    const char *key;
    size_t offset;          /* into ane_family_info */
    int64_t lo, hi;         /* accepted range */
    const char *what;
} ane_family_field;
extern const ane_family_field ane_family_fields[];
extern const int ane_family_nfields;
static inline int64_t ane_family_get(const ane_family_info *fi, int f) {
    return *(const int64_t *)((const char *)fi + ane_family_fields[f].offset);
}

/* The row for a family (built-in or loaded), or NULL (AF_FAMILY_DEFAULT and unknown values). */
const ane_family_info *ane_family_info_of(af_family_id fam);
/* "m1".."m5", "a13".."a16", the other compiled-in files ("a17", "h17"), or a path to a
 * family file (containing '/' or ending in ".json"), which is loaded and registered. */
af_status ane_family_parse(const char *s, af_family_id *out);
/* Loads a family file from path and registers it (the same path twice: the same id). */
af_status ane_family_load(const char *path, af_family_id *out);
/* A parsed family file as a family (not registered); src names it in messages. */
struct ff_doc_t;
af_status ane_family_from_doc(const struct ff_doc_t *d, const char *src, ane_family_info *out);
/* The family of the machine we run on (Apple Silicon), or AF_FAMILY_DEFAULT elsewhere. */
af_family_id ane_family_detect(void);
#endif
