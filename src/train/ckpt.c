/* Checkpoint container and its file format.
 *
 * File format, version 1. Every integer is little-endian and written byte by byte;
 * every record starts at an offset that is a multiple of 8.
 *
 *   offset  size  field
 *   ------  ----  -----------------------------------------------------------------
 *   header (32 bytes)
 *        0     8  magic "AFCKPT01" (ASCII; never changes, the version field does)
 *        8     4  u32 format version = 1
 *       12     4  u32 flags = 0 (reserved; a version-1 reader rejects any other value)
 *       16     8  u64 record count
 *       24     8  u64 total file size in bytes, trailer included
 *   records (record count times, in the checkpoint's order), each:
 *        0     4  u32 name length n, 1..255
 *        4     4  u32 reserved = 0
 *        8     8  u64 payload length b
 *       16     n  name bytes (no NUL among them, no terminator), then zero bytes up to
 *                 the next multiple of 8
 *          b      payload, then zero bytes up to the next multiple of 8 (so every
 *                 payload starts 8-byte aligned in the file)
 *   trailer (32 bytes)
 *                 SHA-256 of every byte before it
 *
 * Invariant across versions: every future version keeps the magic, the u32 version at
 * offset 8 and the trailing SHA-256 of all preceding bytes, so a reader can tell "a newer
 * version" from "a corrupt file" before it understands the rest.
 *
 * Names are unique within a file. An int64 record is 8 bytes of two's complement; a
 * string record is the string's bytes without a terminator. Record names are chosen by
 * the trainer (e.g. "param/<name>", "adam/m/<name>", "step", "rng", "config").
 *
 * Loading checks, in order: magic; the file is long enough for a header and trailer;
 * the SHA-256 (a failure says "checksum mismatch", whatever else looks wrong, since a
 * corrupt or truncated file is the likely cause); the version; then, for version 1,
 * the header fields, each record's name length, name bytes, padding and payload length
 * against the bytes that remain, duplicate names, and that the records end exactly at
 * the trailer. A structural problem in a file whose checksum is right is reported as
 * itself. The file is streamed: payloads are read straight into their own buffers, so
 * loading needs about one copy of the data in memory.
 *
 * Saving writes "<path>.tmp.<pid>" in the same directory (O_EXCL), fsyncs it (on macOS
 * F_FULLFSYNC where the file system supports it), renames it over path and fsyncs the
 * directory. A crash can leave its temp file behind; the next save to that path removes
 * every "<path>.tmp.<pid>" whose process no longer exists. Loading never looks at them.
 */
#define _POSIX_C_SOURCE 200809L
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE 1 /* F_FULLFSYNC */
#endif
#include "ir/bytes.h"
#include "train/ckpt.h"
#include "data/sha256.h"
#include "ir/file.h"
#include "ir/ir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#define CK_MAGIC "AFCKPT01"
#define CK_HDR 32
#define CK_REC_HDR 16
#define CK_TRAILER 32
#define CK_MIN_ANY (12 + CK_TRAILER)       /* magic + version + trailer: any version */
#define CK_MIN_RECORD (CK_REC_HDR + 8)     /* a 1-byte name padded to 8, empty payload */
#define CK_IO_CHUNK ((size_t)1 << 30)      /* macOS read/write reject counts over INT_MAX */
#define CK_BUF ((size_t)1 << 18)

typedef struct {
    char *name;
    uint8_t *data;   /* bytes + 1, the last one a NUL */
    int64_t bytes;
    uint32_t hash;
} ck_rec;

struct ckpt {
    ck_rec *recs;
    int64_t n, cap;
    int64_t *slots;  /* open addressing: record index + 1, 0 = empty; nslots a power of 2 */
    size_t nslots;
    char *origin;    /* the path it was loaded from, for messages; NULL if built in memory */
};

/* ---------------------------------------------------------------- small helpers */

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint64_t pad8(uint64_t x) { return (x + 7) & ~(uint64_t)7; } /* callers keep x < 2^63 */


static char *dup_str(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A payload buffer of bytes + 1 with the hidden NUL set; NULL when out of memory. */
static uint8_t *alloc_payload(uint64_t bytes) {
    if (bytes > (uint64_t)INT64_MAX || bytes >= (uint64_t)SIZE_MAX) return NULL;
    uint8_t *p = malloc((size_t)bytes + 1);
    if (p) p[bytes] = 0;
    return p;
}

/* "path: " or "checkpoint: ", for messages about records. */
static const char *origin(const ckpt *c) { return c->origin ? c->origin : "checkpoint"; }

/* ---------------------------------------------------------------- the record table */

static int64_t find(const ckpt *c, const char *name, size_t n, uint32_t h) {
    if (!c->nslots) return -1;
    size_t mask = c->nslots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        int64_t s = c->slots[i];
        if (!s) return -1;
        const ck_rec *r = &c->recs[s - 1];
        if (r->hash == h && strlen(r->name) == n && memcmp(r->name, name, n) == 0) return s - 1;
    }
}

static void slot_insert(ckpt *c, int64_t idx) {
    size_t mask = c->nslots - 1;
    size_t i = c->recs[idx].hash & mask;
    while (c->slots[i]) i = (i + 1) & mask;
    c->slots[i] = idx + 1;
}

/* Room for one more record in recs and in the index (kept under half full). */
static af_status reserve_one(ckpt *c) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 16;
        if ((uint64_t)cap > SIZE_MAX / sizeof(ck_rec)) return ir_fail(AF_ERR_NOMEM, "checkpoint: out of memory");
        ck_rec *r = realloc(c->recs, (size_t)cap * sizeof *r);
        if (!r) return ir_fail(AF_ERR_NOMEM, "checkpoint: out of memory for %lld records", (long long)cap);
        c->recs = r, c->cap = cap;
    }
    if ((uint64_t)(c->n + 1) * 2 > c->nslots) {
        size_t ns = c->nslots ? c->nslots * 2 : 32;
        while ((uint64_t)(c->n + 1) * 2 > ns) ns *= 2;
        if (ns > SIZE_MAX / sizeof(int64_t)) return ir_fail(AF_ERR_NOMEM, "checkpoint: out of memory");
        int64_t *s = calloc(ns, sizeof *s);
        if (!s) return ir_fail(AF_ERR_NOMEM, "checkpoint: out of memory for the record index");
        free(c->slots);
        c->slots = s, c->nslots = ns;
        for (int64_t i = 0; i < c->n; i++) slot_insert(c, i);
    }
    return AF_OK;
}

/* Stores an owned payload (from alloc_payload) under name[0..n). On a name that exists:
 * replaces it when `replace`, else returns AF_ERR_CORRUPT without a message (a
 * duplicate in a file). Frees data on failure. */
static af_status insert(ckpt *c, const char *name, size_t n, uint8_t *data, int64_t bytes,
                        int replace) {
    uint32_t h = name_hash(name, n);
    int64_t i = find(c, name, n, h);
    if (i >= 0) {
        if (!replace) return free(data), AF_ERR_CORRUPT;
        free(c->recs[i].data);
        c->recs[i].data = data, c->recs[i].bytes = bytes;
        return AF_OK;
    }
    af_status st = reserve_one(c);
    char *nm = st == AF_OK ? dup_str(name, n) : NULL;
    if (!nm) {
        free(data);
        return st != AF_OK ? st : ir_fail(AF_ERR_NOMEM, "checkpoint: out of memory");
    }
    c->recs[c->n] = (ck_rec){nm, data, bytes, h};
    slot_insert(c, c->n);
    c->n++;
    return AF_OK;
}

static af_status check_name(const char *fn, const char *name, size_t *n) {
    if (!name || !*name) return ir_fail(AF_ERR_INVALID, "%s: a record name must be a non-empty string", fn);
    size_t len = strlen(name);
    if (len > AF_CKPT_MAX_NAME)
        return ir_fail(AF_ERR_INVALID, "%s: record name '%.40s...' is %zu bytes; the limit is %d", fn, name,
                       len, AF_CKPT_MAX_NAME);
    *n = len;
    return AF_OK;
}

/* ---------------------------------------------------------------- public: memory */

ckpt *ckpt_new(void) {
    ckpt *c = calloc(1, sizeof *c);
    if (!c) ir_fail(AF_ERR_NOMEM, "ckpt_new: out of memory");
    return c;
}

void ckpt_free(ckpt *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->n; i++) free(c->recs[i].name), free(c->recs[i].data);
    free(c->recs);
    free(c->slots);
    free(c->origin);
    free(c);
}

af_status ckpt_put(ckpt *c, const char *name, const void *data, int64_t bytes) {
    if (!c) return ir_fail(AF_ERR_INVALID, "ckpt_put: checkpoint is NULL");
    size_t n = 0;
    af_status st = check_name("ckpt_put", name, &n);
    if (st != AF_OK) return st;
    if (bytes < 0) return ir_fail(AF_ERR_INVALID, "ckpt_put('%s'): negative size %lld", name, (long long)bytes);
    if (!data && bytes > 0)
        return ir_fail(AF_ERR_INVALID, "ckpt_put('%s'): data is NULL but size is %lld", name, (long long)bytes);
    uint8_t *p = alloc_payload((uint64_t)bytes);
    if (!p)
        return ir_fail(AF_ERR_NOMEM, "ckpt_put('%s'): out of memory for %lld bytes", name, (long long)bytes);
    if (bytes) memcpy(p, data, (size_t)bytes); /* before insert frees an old payload data may point into */
    return insert(c, name, n, p, bytes, 1);
}

af_status ckpt_put_i64(ckpt *c, const char *name, int64_t v) {
    uint8_t b[8];
    ir_put_u64(b, (uint64_t)v);
    return ckpt_put(c, name, b, 8);
}

af_status ckpt_put_str(ckpt *c, const char *name, const char *s) {
    if (!s) return ir_fail(AF_ERR_INVALID, "ckpt_put_str('%s'): string is NULL", name ? name : "(null)");
    return ckpt_put(c, name, s, (int64_t)strlen(s));
}

static const ck_rec *lookup(const ckpt *c, const char *name) {
    if (!c || !name) return NULL;
    size_t n = strlen(name);
    int64_t i = find(c, name, n, name_hash(name, n));
    return i >= 0 ? &c->recs[i] : NULL;
}

const void *ckpt_get(const ckpt *c, const char *name, int64_t *bytes) {
    const ck_rec *r = lookup(c, name);
    if (bytes) *bytes = r ? r->bytes : 0;
    if (!r) {
        if (!c || !name) ir_fail(AF_ERR_INVALID, "ckpt_get: checkpoint or name is NULL");
        else ir_fail(AF_ERR_INVALID, "%s: no record named '%s'", origin(c), name);
        return NULL;
    }
    return r->data;
}

af_status ckpt_get_i64(const ckpt *c, const char *name, int64_t *v) {
    if (!c || !name || !v) return ir_fail(AF_ERR_INVALID, "ckpt_get_i64: NULL argument");
    const ck_rec *r = lookup(c, name);
    if (!r) return ir_fail(AF_ERR_INVALID, "%s: no record named '%s' (expected an int64)", origin(c), name);
    if (r->bytes != 8)
        return ir_fail(AF_ERR_CORRUPT, "%s: record '%s' holds %lld bytes; an int64 record holds 8", origin(c),
                       name, (long long)r->bytes);
    *v = (int64_t)ir_get_u64(r->data);
    return AF_OK;
}

const char *ckpt_get_str(const ckpt *c, const char *name) {
    if (!c || !name) {
        ir_fail(AF_ERR_INVALID, "ckpt_get_str: checkpoint or name is NULL");
        return NULL;
    }
    const ck_rec *r = lookup(c, name);
    if (!r) {
        ir_fail(AF_ERR_INVALID, "%s: no record named '%s' (expected a string)", origin(c), name);
        return NULL;
    }
    if (memchr(r->data, 0, (size_t)r->bytes)) {
        ir_fail(AF_ERR_CORRUPT, "%s: record '%s' holds a NUL byte, so it is not a string", origin(c), name);
        return NULL;
    }
    return (const char *)r->data;
}

int64_t ckpt_count(const ckpt *c) { return c ? c->n : 0; }

const char *ckpt_name(const ckpt *c, int64_t i) {
    return c && i >= 0 && i < c->n ? c->recs[i].name : NULL;
}

/* ---------------------------------------------------------------- save */

typedef struct {
    int fd;
    uint8_t *buf;
    size_t n;
    data_sha256_ctx sha;
} ck_writer;

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n > CK_IO_CHUNK ? CK_IO_CHUNK : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int wr_flush(ck_writer *w) {
    int rc = write_all(w->fd, w->buf, w->n);
    w->n = 0;
    return rc;
}

static int wr_put(ck_writer *w, const void *p, size_t n, int hash) {
    if (hash) data_sha256_update(&w->sha, p, n);
    if (w->n + n > CK_BUF && wr_flush(w)) return -1;
    if (n >= CK_BUF) return write_all(w->fd, p, n);
    memcpy(w->buf + w->n, p, n);
    w->n += n;
    return 0;
}

static int wr_zeros(ck_writer *w, size_t n) {
    static const uint8_t z[8];
    return n ? wr_put(w, z, n, 1) : 0;
}

/* fsync, or on macOS F_FULLFSYNC (which also flushes the drive's cache) when the file
 * system supports it. */
static int sync_fd(int fd) {
#if defined(__APPLE__) && defined(F_FULLFSYNC)
    if (fcntl(fd, F_FULLFSYNC) == 0) return 0;
#endif
    while (fsync(fd) != 0)
        if (errno != EINTR) return -1;
    return 0;
}

/* Removes "<base>.tmp.<pid>" files in dir whose process no longer exists: what a save
 * that crashed leaves. Best effort; a live process's temp file is never touched. */
static void sweep_stale_temps(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t bl = strlen(base), dl = strlen(dir);
    pid_t me = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp.", 5) != 0) continue;
        const char *p = nm + bl + 5;
        long long pid = 0;
        int ok = *p != 0;
        for (; *p && ok; p++) {
            if (*p < '0' || *p > '9' || pid > 100000000000LL) ok = 0;
            else pid = pid * 10 + (*p - '0');
        }
        if (!ok || pid <= 0 || (long long)(pid_t)pid != pid || (pid_t)pid == me) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        size_t len = dl + 1 + strlen(nm) + 1;
        char *full = malloc(len);
        if (!full) break;
        snprintf(full, len, "%s/%s", dir, nm);
        unlink(full);
        free(full);
    }
    closedir(d);
}

af_status ckpt_save(const ckpt *c, const char *path) {
    if (!c || !path || !*path) return ir_fail(AF_ERR_INVALID, "ckpt_save: checkpoint or path is NULL/empty");

    /* The file's size, checked for overflow (it must also fit in an off_t/int64). */
    uint64_t total = CK_HDR + CK_TRAILER;
    const uint64_t limit = (uint64_t)INT64_MAX;
    for (int64_t i = 0; i < c->n; i++) {
        uint64_t r = CK_REC_HDR + pad8(strlen(c->recs[i].name));
        uint64_t b = (uint64_t)c->recs[i].bytes;
        if (b > limit - r || pad8(b) > limit - r || r + pad8(b) > limit - total)
            return ir_fail(AF_ERR_INVALID, "%s: checkpoint too large (size overflows 64 bits)", path);
        total += r + pad8(b);
    }

    /* Directory and base name of path. */
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return ir_fail(AF_ERR_INVALID, "%s: path names a directory, not a file", path);
    char *dir = slash ? dup_str(path, slash == path ? 1 : (size_t)(slash - path)) : dup_str(".", 1);
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    uint8_t *buf = malloc(CK_BUF);
    if (!dir || !tmp || !buf) {
        free(dir), free(tmp), free(buf);
        return ir_fail(AF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, tlen, "%s.tmp.%lld", path, (long long)getpid());

    sweep_stale_temps(dir, base);

    af_status st = AF_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) { /* left by an earlier process that had our pid */
        unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        st = ir_fail(AF_ERR_IO, "%s: cannot create temp file %s: %s", path, tmp, strerror(errno));
        goto done;
    }

    ck_writer w = {fd, buf, 0, {{0}, 0, {0}, 0}};
    data_sha256_init(&w.sha);
    uint8_t h[CK_HDR];
    memcpy(h, CK_MAGIC, 8);
    ir_put_u32(h + 8, AF_CKPT_FORMAT_VERSION);
    ir_put_u32(h + 12, 0);
    ir_put_u64(h + 16, (uint64_t)c->n);
    ir_put_u64(h + 24, total);
    int bad = wr_put(&w, h, CK_HDR, 1);
    for (int64_t i = 0; i < c->n && !bad; i++) {
        const ck_rec *r = &c->recs[i];
        size_t nl = strlen(r->name);
        uint8_t rh[CK_REC_HDR];
        ir_put_u32(rh, (uint32_t)nl);
        ir_put_u32(rh + 4, 0);
        ir_put_u64(rh + 8, (uint64_t)r->bytes);
        bad = wr_put(&w, rh, CK_REC_HDR, 1) || wr_put(&w, r->name, nl, 1) || wr_zeros(&w, pad8(nl) - nl) ||
              wr_put(&w, r->data, (size_t)r->bytes, 1) ||
              wr_zeros(&w, (size_t)(pad8((uint64_t)r->bytes) - (uint64_t)r->bytes));
    }
    if (!bad) {
        uint8_t d[CK_TRAILER];
        data_sha256_final(&w.sha, d);
        bad = wr_put(&w, d, CK_TRAILER, 0) || wr_flush(&w);
    }
    if (bad) {
        st = ir_fail(AF_ERR_IO, "%s: cannot write temp file %s: %s", path, tmp, strerror(errno));
        close(fd), unlink(tmp);
        goto done;
    }
    if (sync_fd(fd) != 0) {
        st = ir_fail(AF_ERR_IO, "%s: cannot fsync temp file %s: %s", path, tmp, strerror(errno));
        close(fd), unlink(tmp);
        goto done;
    }
    if (close(fd) != 0) {
        st = ir_fail(AF_ERR_IO, "%s: cannot close temp file %s: %s", path, tmp, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st = ir_fail(AF_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        unlink(tmp);
        goto done;
    }
    /* Make the rename itself durable. Some file systems cannot fsync a directory
     * (EINVAL/ENOTSUP); there is nothing more to do on those. */
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd < 0) {
        st = ir_fail(AF_ERR_IO, "%s: written, but cannot open directory %s to sync it: %s", path, dir,
                     strerror(errno));
        goto done;
    }
    if (sync_fd(dfd) != 0 && errno != EINVAL
#ifdef ENOTSUP
        && errno != ENOTSUP
#endif
    )
        st = ir_fail(AF_ERR_IO, "%s: written, but cannot fsync directory %s: %s", path, dir, strerror(errno));
    close(dfd);
done:
    free(dir), free(tmp), free(buf);
    return st;
}

/* ---------------------------------------------------------------- load */

typedef struct {
    int fd;           /* the file, or -1 to read from mem */
    const uint8_t *mem;
    size_t mem_len, mem_pos;
    uint8_t *buf;
    size_t pos, len;
    uint64_t off;     /* file offset of the next byte handed out */
    data_sha256_ctx sha;
} ck_reader;

/* Up to `want` bytes from the file or the memory image, as read() reports them. */
static ssize_t rd_raw(ck_reader *r, uint8_t *into, size_t want) {
    if (r->fd >= 0) return read(r->fd, into, want);
    size_t k = r->mem_len - r->mem_pos < want ? r->mem_len - r->mem_pos : want;
    if (k) memcpy(into, r->mem + r->mem_pos, k);
    r->mem_pos += k;
    return (ssize_t)k;
}

/* Reads exactly n bytes into dst (NULL discards them), hashing them when `hash`.
 * 0 on success, -1 on a read error (errno set), -2 when the file ends early. */
static int rd_get(ck_reader *r, void *dst, uint64_t n, int hash) {
    uint8_t *d = dst;
    while (n) {
        if (r->pos == r->len) {
            uint8_t *into = d && n >= CK_BUF ? d : r->buf;
            size_t want = into == d ? (n > CK_IO_CHUNK ? CK_IO_CHUNK : (size_t)n) : CK_BUF;
            ssize_t k = rd_raw(r, into, want);
            if (k < 0) {
                if (errno == EINTR) continue;
                return -1;
            }
            if (k == 0) return -2;
            if (into == d) { /* read straight into the destination */
                if (hash) data_sha256_update(&r->sha, d, (size_t)k);
                d += k, n -= (uint64_t)k, r->off += (uint64_t)k;
                continue;
            }
            r->pos = 0, r->len = (size_t)k;
        }
        size_t m = r->len - r->pos;
        if (m > n) m = (size_t)n;
        if (hash) data_sha256_update(&r->sha, r->buf + r->pos, m);
        if (d) memcpy(d, r->buf + r->pos, m), d += m;
        r->pos += m, n -= m, r->off += m;
    }
    return 0;
}

static af_status rd_error(const char *path, int rc) {
    if (rc == -2) return ir_fail(AF_ERR_IO, "%s: file ended early while reading (changed while being read?)", path);
    return ir_fail(AF_ERR_IO, "%s: read error: %s", path, strerror(errno));
}

/* Loads from r (a file or a memory image of `size` bytes; `path` names it). */
static af_status load(ck_reader *r, const uint64_t size, const char *path, ckpt **out) {
    af_status st = AF_OK;
    ckpt *c = NULL;
    data_sha256_init(&r->sha);
    char why[512] = "";           /* a structural problem, reported if the checksum is right */
    uint64_t hdr_size = size;     /* the header's idea of the file size */
    int rc;
    uint8_t h[CK_HDR];

    /* Magic, then enough bytes for any version's header and trailer. */
    size_t nm = size < 8 ? (size_t)size : 8;
    if ((rc = rd_get(r, h, nm, 1)) != 0) {
        st = rd_error(path, rc);
        goto fail;
    }
    if (memcmp(h, CK_MAGIC, nm) != 0) {
        st = ir_fail(AF_ERR_CORRUPT, "%s: not an aneforge checkpoint (bad magic)", path);
        goto fail;
    }
    if (size < CK_MIN_ANY) {
        st = ir_fail(AF_ERR_CORRUPT, "%s: truncated (%llu bytes; too short for a checkpoint)", path,
                     (unsigned long long)size);
        goto fail;
    }
    const uint64_t body_end = size - CK_TRAILER;
    if ((rc = rd_get(r, h + 8, 4, 1)) != 0) {
        st = rd_error(path, rc);
        goto fail;
    }
    const uint32_t version = ir_get_u32(h + 8);
    if (version != AF_CKPT_FORMAT_VERSION) {
        if (version == 0) snprintf(why, sizeof why, "unknown format version 0");
        goto verify; /* "newer version" only if the checksum says the file is intact */
    }
    if (size < CK_HDR + CK_TRAILER) {
        snprintf(why, sizeof why, "truncated (%llu bytes; too short for a version-1 checkpoint)",
                 (unsigned long long)size);
        goto verify;
    }
    if ((rc = rd_get(r, h + 12, CK_HDR - 12, 1)) != 0) {
        st = rd_error(path, rc);
        goto fail;
    }
    const uint32_t flags = ir_get_u32(h + 12);
    const uint64_t count = ir_get_u64(h + 16);
    hdr_size = ir_get_u64(h + 24);
    if (hdr_size != size) {
        snprintf(why, sizeof why, "header says the file has %llu bytes, but it has %llu",
                 (unsigned long long)hdr_size, (unsigned long long)size);
        goto verify;
    }
    if (flags) {
        snprintf(why, sizeof why, "unknown header flags 0x%x", (unsigned)flags);
        goto verify;
    }
    if (count > (body_end - CK_HDR) / CK_MIN_RECORD) {
        snprintf(why, sizeof why, "record count %llu cannot fit in %llu bytes", (unsigned long long)count,
                 (unsigned long long)(body_end - CK_HDR));
        goto verify;
    }
    if (!(c = ckpt_new())) {
        st = AF_ERR_NOMEM;
        goto fail;
    }

    for (uint64_t i = 0; i < count; i++) {
        uint8_t rh[CK_REC_HDR];
        if (body_end - r->off < CK_REC_HDR) {
            snprintf(why, sizeof why, "record %llu: header runs past the end of the records", (unsigned long long)i);
            goto verify;
        }
        if ((rc = rd_get(r, rh, CK_REC_HDR, 1)) != 0) {
            st = rd_error(path, rc);
            goto fail;
        }
        const uint32_t nlen = ir_get_u32(rh), resv = ir_get_u32(rh + 4);
        const uint64_t bytes = ir_get_u64(rh + 8);
        if (nlen == 0 || nlen > AF_CKPT_MAX_NAME) {
            snprintf(why, sizeof why, "record %llu: name length %u (must be 1..%d)", (unsigned long long)i,
                     (unsigned)nlen, AF_CKPT_MAX_NAME);
            goto verify;
        }
        if (resv) {
            snprintf(why, sizeof why, "record %llu: reserved field is %u, expected 0", (unsigned long long)i,
                     (unsigned)resv);
            goto verify;
        }
        char name[AF_CKPT_MAX_NAME + 8];
        const uint64_t npad = pad8(nlen);
        if (body_end - r->off < npad) {
            snprintf(why, sizeof why, "record %llu: name runs past the end of the records", (unsigned long long)i);
            goto verify;
        }
        if ((rc = rd_get(r, name, npad, 1)) != 0) {
            st = rd_error(path, rc);
            goto fail;
        }
        int zero_pad = 1;
        for (uint64_t k = nlen; k < npad; k++) zero_pad &= name[k] == 0;
        if (memchr(name, 0, nlen) || !zero_pad) {
            snprintf(why, sizeof why, "record %llu: %s", (unsigned long long)i,
                     zero_pad ? "name holds a NUL byte" : "nonzero padding after the name");
            goto verify;
        }
        name[nlen] = 0;
        const uint64_t remain = body_end - r->off;
        if (bytes > remain || pad8(bytes) > remain) {
            snprintf(why, sizeof why, "record %llu ('%s'): payload of %llu bytes runs past the end of the records",
                     (unsigned long long)i, name, (unsigned long long)bytes);
            goto verify;
        }
        uint8_t *data = alloc_payload(bytes);
        if (!data) {
            st = ir_fail(AF_ERR_NOMEM, "%s: out of memory for record '%s' (%llu bytes)", path, name,
                         (unsigned long long)bytes);
            goto fail;
        }
        uint8_t tail[8];
        const uint64_t ntail = pad8(bytes) - bytes;
        if ((rc = rd_get(r, data, bytes, 1)) != 0 || (rc = rd_get(r, tail, ntail, 1)) != 0) {
            free(data);
            st = rd_error(path, rc);
            goto fail;
        }
        for (uint64_t k = 0; k < ntail; k++) {
            if (tail[k]) {
                free(data);
                snprintf(why, sizeof why, "record %llu ('%s'): nonzero padding after the payload",
                         (unsigned long long)i, name);
                goto verify;
            }
        }
        st = insert(c, name, nlen, data, (int64_t)bytes, 0);
        if (st == AF_ERR_CORRUPT) {
            snprintf(why, sizeof why, "record %llu: duplicate name '%s'", (unsigned long long)i, name);
            st = AF_OK;
            goto verify;
        }
        if (st != AF_OK) goto fail;
    }
    if (r->off != body_end)
        snprintf(why, sizeof why, "%llu stray bytes after the last record",
                 (unsigned long long)(body_end - r->off));

verify:
    /* Hash whatever was not read, then compare with the trailer. */
    if ((rc = rd_get(r, NULL, body_end - r->off, 1)) != 0) {
        st = rd_error(path, rc);
        goto fail;
    }
    uint8_t want[CK_TRAILER], got[CK_TRAILER];
    if ((rc = rd_get(r, want, CK_TRAILER, 0)) != 0) {
        st = rd_error(path, rc);
        goto fail;
    }
    data_sha256_final(&r->sha, got);
    if (memcmp(want, got, CK_TRAILER) != 0) {
        if (hdr_size > size)
            st = ir_fail(AF_ERR_CORRUPT,
                         "%s: truncated: header says %llu bytes, file has %llu (checksum mismatch)", path,
                         (unsigned long long)hdr_size, (unsigned long long)size);
        else
            st = ir_fail(AF_ERR_CORRUPT, "%s: checksum mismatch (file corrupt or truncated)", path);
        goto fail;
    }
    if (version > AF_CKPT_FORMAT_VERSION) {
        st = ir_fail(AF_ERR_UNSUPPORTED, "%s: written by format version %u; this build reads up to %d", path,
                     (unsigned)version, AF_CKPT_FORMAT_VERSION);
        goto fail;
    }
    if (why[0]) {
        st = ir_fail(AF_ERR_CORRUPT, "%s: %s", path, why);
        goto fail;
    }
    c->origin = dup_str(path, strlen(path));
    if (!c->origin) {
        st = ir_fail(AF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    *out = c;
    return AF_OK;

fail:
    ckpt_free(c);
    return st;
}

af_status ckpt_load(const char *path, ckpt **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "ckpt_load: out is NULL");
    *out = NULL;
    if (!path) return ir_fail(AF_ERR_INVALID, "ckpt_load: path is NULL");
    uint64_t size = 0;
    int fd = ir_open_regular(path, "checkpoint", 0, &size);
    if (fd < 0) return AF_ERR_IO;
    ck_reader r = {.fd = fd, .buf = malloc(CK_BUF)};
    af_status st = r.buf ? load(&r, size, path, out) : ir_fail(AF_ERR_NOMEM, "%s: out of memory", path);
    free(r.buf);
    close(fd);
    return st;
}

af_status ckpt_load_bytes(const uint8_t *bytes, size_t n, const char *name, ckpt **out) {
    if (!out) return ir_fail(AF_ERR_INVALID, "ckpt_load_bytes: out is NULL");
    *out = NULL;
    if (!name || (!bytes && n)) return ir_fail(AF_ERR_INVALID, "ckpt_load_bytes: name or bytes is NULL");
    ck_reader r = {.fd = -1, .mem = bytes, .mem_len = n, .buf = malloc(CK_BUF)};
    af_status st = r.buf ? load(&r, (uint64_t)n, name, out) : ir_fail(AF_ERR_NOMEM, "%s: out of memory", name);
    free(r.buf);
    return st;
}
