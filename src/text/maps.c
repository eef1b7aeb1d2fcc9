/* Open-addressing hash maps with linear probing (maps.h). */
#include "text/maps.h"

#include <stdlib.h>
#include <string.h>

uint64_t txt_hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static uint64_t mix64(uint64_t x) { /* splitmix64's finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t strset_probe(const txt_strset *m, const uint8_t *s, size_t n) {
    size_t mask = m->nslot - 1;
    size_t i = (size_t)txt_hash_bytes(s, n) & mask;
    for (; m->slot[i] >= 0; i = (i + 1) & mask) {
        int32_t k = m->slot[i];
        if (m->len[k] == n && (n == 0 || memcmp(m->bytes + m->off[k], s, n) == 0)) break;
    }
    return i;
}

static bool strset_rehash(txt_strset *m, size_t nslot) {
    int32_t *slot = malloc(nslot * sizeof *slot);
    if (!slot) return false;
    for (size_t i = 0; i < nslot; i++) slot[i] = -1;
    free(m->slot);
    m->slot = slot;
    m->nslot = nslot;
    for (int32_t k = 0; k < m->n; k++) m->slot[strset_probe(m, m->bytes + m->off[k], m->len[k])] = k;
    return true;
}

int32_t txt_strset_find(const txt_strset *m, const uint8_t *s, size_t n) {
    return m->nslot ? m->slot[strset_probe(m, s, n)] : -1;
}

int32_t txt_strset_intern(txt_strset *m, const uint8_t *s, size_t n, bool *added) {
    if (added) *added = false;
    if (n > UINT32_MAX) return -1;
    if (2 * ((size_t)m->n + 1) > m->nslot && !strset_rehash(m, m->nslot ? 2 * m->nslot : 1024)) return -1;
    size_t i = strset_probe(m, s, n);
    if (m->slot[i] >= 0) return m->slot[i];
    if (m->n == INT32_MAX) return -1;
    if (m->n == m->cap) {
        int32_t cap = m->cap ? (m->cap > INT32_MAX / 2 ? INT32_MAX : 2 * m->cap) : 256;
        size_t *off = realloc(m->off, (size_t)cap * sizeof *off);
        if (off) m->off = off;
        uint32_t *len = realloc(m->len, (size_t)cap * sizeof *len);
        if (len) m->len = len;
        if (!off || !len) return -1;
        m->cap = cap;
    }
    if (m->nbytes + n > m->capbytes) {
        size_t cap = m->capbytes ? m->capbytes : 4096;
        while (cap < m->nbytes + n) cap *= 2;
        uint8_t *b = realloc(m->bytes, cap);
        if (!b) return -1;
        m->bytes = b;
        m->capbytes = cap;
    }
    if (n) memcpy(m->bytes + m->nbytes, s, n);
    m->off[m->n] = m->nbytes;
    m->len[m->n] = (uint32_t)n;
    m->nbytes += n;
    m->slot[i] = m->n;
    if (added) *added = true;
    return m->n++;
}

void txt_strset_free(txt_strset *m) {
    free(m->bytes);
    free(m->off);
    free(m->len);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static size_t u64_probe(const txt_u64map *m, uint64_t key) {
    size_t mask = m->nslot - 1;
    size_t i = (size_t)mix64(key) & mask;
    while (m->val[i] >= 0 && m->key[i] != key) i = (i + 1) & mask;
    return i;
}

int32_t txt_u64map_get(const txt_u64map *m, uint64_t key) {
    return m->nslot ? m->val[u64_probe(m, key)] : -1;
}

bool txt_u64map_put(txt_u64map *m, uint64_t key, int32_t val) {
    if (2 * (m->n + 1) > m->nslot) {
        size_t nslot = m->nslot ? 2 * m->nslot : 1024;
        uint64_t *k = malloc(nslot * sizeof *k);
        int32_t *v = malloc(nslot * sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return false;
        }
        for (size_t i = 0; i < nslot; i++) v[i] = -1;
        txt_u64map old = *m;
        m->key = k, m->val = v, m->nslot = nslot;
        for (size_t i = 0; i < old.nslot; i++)
            if (old.val[i] >= 0) {
                size_t j = u64_probe(m, old.key[i]);
                m->key[j] = old.key[i], m->val[j] = old.val[i];
            }
        free(old.key);
        free(old.val);
    }
    size_t i = u64_probe(m, key);
    if (m->val[i] < 0) m->n++;
    m->key[i] = key;
    m->val[i] = val;
    return true;
}

void txt_u64map_free(txt_u64map *m) {
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}
