/* safetensors files both ways (https://github.com/huggingface/safetensors, "Format"):
 * 8 bytes little-endian header length N, N bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
 * then the data, offsets relative to its start. Read by memory-mapping the file; every
 * field is checked before a byte of data is touched: the header's size and JSON, each
 * dtype (F32, F16, BF16 read; the rest refused by name), rank and dims, that
 * count x element size equals end - begin without overflow, and that the tensors tile
 * the data exactly (no overlap, no gap, nothing past the end), as the format demands. */
#ifndef AF_HF_SAFETENSORS_H
#define AF_HF_SAFETENSORS_H
#include "aneforge.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_HEADER ((uint64_t)16 << 20) /* 16 MiB of JSON: a 70B model's is ~100 KB */
#define ST_MAX_RANK 8
#define ST_MAX_NAME 512

typedef enum { ST_F32 = 0, ST_F16 = 1, ST_BF16 = 2 } st_dtype;

typedef struct {
    char *name;
    st_dtype dtype;
    int rank;
    int64_t shape[ST_MAX_RANK];
    int64_t count;
    uint64_t begin, end; /* within the data */
} st_tensor;

typedef struct {
    void *map;           /* the mapping (st_open) or NULL (st_parse over caller bytes) */
    size_t map_size;
    const uint8_t *data; /* the data section */
    uint64_t data_len;
    st_tensor *t;
    int n;
} st_file;

/* Parses size bytes held by the caller (they must outlive *out); what names the file in
 * messages. On failure the error says which field of which tensor is wrong. */
af_status st_parse(const uint8_t *bytes, size_t size, const char *what, st_file **out);
/* Memory-maps path and parses it. */
af_status st_open(const char *path, st_file **out);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
/* Tensor t's values as floats (F16 and BF16 widened exactly). */
void st_read_f32(const st_file *f, const st_tensor *t, float *dst);
const char *st_dtype_name(st_dtype d);

/* One tensor to write: fp32 values in row-major order. */
typedef struct {
    const char *name;
    int rank;
    int64_t shape[ST_MAX_RANK];
    const float *data;
} st_out;
/* Writes n tensors as F32 (temporary + rename), with __metadata__ {"format": "pt"}. */
af_status st_write(const char *path, int n, const st_out *t);
#endif
