/* Hash maps the BPE trainer counts with: interned byte strings and 64-bit keys. Both
 * grow by doubling; functions that can fail on memory return false or -1. */
#ifndef AF_TEXT_MAPS_H
#define AF_TEXT_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* FNV-1a over s[0..n). */
uint64_t txt_hash_bytes(const uint8_t *s, size_t n);

/* Distinct byte strings, numbered 0, 1, ... in the order first seen. */
typedef struct {
    uint8_t *bytes;          /* the strings one after the other */
    size_t nbytes, capbytes;
    size_t *off;
    uint32_t *len;
    int32_t n, cap;
    int32_t *slot;           /* -1 empty, else a string's number */
    size_t nslot;
} txt_strset;

/* The number of s[0..n), adding it if new (*added says which); -1 when out of memory. */
int32_t txt_strset_intern(txt_strset *m, const uint8_t *s, size_t n, bool *added);
int32_t txt_strset_find(const txt_strset *m, const uint8_t *s, size_t n);
static inline const uint8_t *txt_strset_get(const txt_strset *m, int32_t i, uint32_t *len) {
    *len = m->len[i];
    return m->bytes + m->off[i];
}
void txt_strset_free(txt_strset *m);

/* 64-bit keys to non-negative int32 values. */
typedef struct {
    uint64_t *key;
    int32_t *val;            /* -1 empty */
    size_t nslot, n;
} txt_u64map;

int32_t txt_u64map_get(const txt_u64map *m, uint64_t key);
bool txt_u64map_put(txt_u64map *m, uint64_t key, int32_t val);
void txt_u64map_free(txt_u64map *m);

#endif
