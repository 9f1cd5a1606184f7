/* Walking the message records of a stored batch's payload, for _batch_scan.c: every
 * record of a payload at once (walk_all), and a payload's records as fixed-size entries
 * (walk_entries). Each record is read by storage/_wire.h's read_record, the codec's own
 * (the layout in storage/batch.py, its checks and MalformedPayload messages).
 *
 * Walks run without the GIL (a pass scans on several threads), so a walk's error is the
 * thread's own text (walk_error), which the calling function raises as MalformedPayload
 * once it holds the GIL again (raise_walk_error). Static functions: one includer.
 */
#ifndef COMPACTLOG_BATCH_WALK_H
#define COMPACTLOG_BATCH_WALK_H
#include "_offset_table.h"

static PyObject *MalformedPayload = NULL;

/* Why this thread's last walk failed; an empty text: memory ran out. */
static _Thread_local char walk_error[128];

static int bad(const char *what) {
    snprintf(walk_error, sizeof walk_error, "%s", what);
    return -1;
}

static int wire_error(const char *what) { return bad(what); }
#include "../../storage/_wire.h"

static int out_of_memory(void) {
    walk_error[0] = 0;
    return -1;
}

/* The failed walk's MalformedPayload (or MemoryError), with the GIL held. */
static PyObject *raise_walk_error(void) {
    if (!walk_error[0]) return PyErr_NoMemory();
    PyErr_SetString(MalformedPayload, walk_error);
    return NULL;
}

/* Every record of a payload, in order. With a table, each key's digest is computed and its
 * first slot prefetched before any is probed: a batch's probes then overlap their cache
 * misses instead of paying them one after another (the records are handled in order, as
 * one at a time would). Keys of entries in [skip_lo, skip_hi) are not digested: the
 * caller answers for them from a bitmap. */
typedef struct {
    Record *recs;
    uint8_t (*digests)[16]; /* each record's key digest, when walk_all was given a table */
    Py_ssize_t n;
} Walk;

static void walk_free(Walk *w) {
    PyMem_RawFree(w->recs);
    PyMem_RawFree(w->digests);
    w->recs = NULL, w->digests = NULL;
}

/* Records to make room for at first in a payload of `len` bytes: one every 128 bytes (a
 * typical batch then needs no growing), at most 4096 (a payload of a few large records
 * takes no large table), and the room doubles as needed. */
static inline Py_ssize_t first_room(Py_ssize_t len) {
    Py_ssize_t guess = len / 128 + 16;
    return guess < 4096 ? guess : 4096;
}

static int walk_all(const uint8_t *buf, Py_ssize_t len, const Table *t, Walk *w,
                    long long skip_lo, long long skip_hi) {
    Py_ssize_t cap = first_room(len);
    const uint64_t slots = t ? (uint64_t)t->slots : 1;
    w->n = 0;
    w->recs = PyMem_RawMalloc((size_t)cap * sizeof(Record));
    w->digests = t ? PyMem_RawMalloc((size_t)cap * 16) : NULL;
    if (!w->recs || (t && !w->digests)) { walk_free(w); return out_of_memory(); }
    for (Py_ssize_t p = 0; p < len; p = w->recs[w->n++].end) {
        if (w->n == cap) {
            Record *more = PyMem_RawRealloc(w->recs, (size_t)(cap * 2) * sizeof(Record));
            if (more) w->recs = more;
            uint8_t(*dmore)[16] = t ? PyMem_RawRealloc(w->digests, (size_t)(cap * 2) * 16) : NULL;
            if (dmore) w->digests = dmore;
            if (!more || (t && !dmore)) { walk_free(w); return out_of_memory(); }
            cap *= 2;
        }
        Record *r = &w->recs[w->n];
        if (read_record(buf, p, len, r) < 0) { walk_free(w); return -1; }
        long long e = (long long)r->entry;
        if (t && (r->flags & HAS_KEY) && (e < skip_lo || e >= skip_hi)) {
            uint8_t *digest = w->digests[w->n];
            uint64_t h1 = digest_key(buf + r->ks, (size_t)(r->ke - r->ks), digest);
#if defined(__GNUC__)
            uint64_t slot = scale(h1, slots);
            __builtin_prefetch((const uint8_t *)t->hashes.buf + (slot << 4));
            __builtin_prefetch((const int64_t *)t->offsets.buf + slot);
#else
            (void)h1, (void)slots;
#endif
        }
    }
    return 0;
}

/* Bit `off - first` of `bits`, when it is one of them. */
static inline int in_bits(const Py_buffer *b, long long first, long long off) {
    return off >= first && ((off - first) >> 3) < b->len;
}

static inline void set_bit(const Py_buffer *b, long long first, long long off, int on) {
    uint8_t *byte = (uint8_t *)b->buf + ((off - first) >> 3);
    uint8_t mask = (uint8_t)(1 << ((off - first) & 7));
    *byte = on ? (uint8_t)(*byte | mask) : (uint8_t)(*byte & ~mask);
}

/* One record's entry of ENTRY bytes at `out`: its bytes written (0: the record has none). */
#define ENTRY 24
typedef Py_ssize_t (*EntryOf)(const uint8_t *buf, const Record *r, uint8_t *out,
                             const void *arg);

/* The entries of every record of a payload, walked and made without the GIL (threads
 * digest batches side by side while one maps them in order); MalformedPayload for a
 * payload that does not walk, and no entry: they are handed back only once every record
 * walked. Each record goes straight to its entry (no record table to build and grow),
 * into a buffer that doubles as needed and is copied once into the bytes handed back.
 * Releases `v`. */
static PyObject *walk_entries(Py_buffer *v, EntryOf entry_of, const void *arg) {
    const uint8_t *buf = v->buf;
    const Py_ssize_t len = v->len;
    Py_ssize_t n = 0, cap = ENTRY * first_room(len);
    uint8_t *entries;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    entries = PyMem_RawMalloc((size_t)cap);
    failed = entries ? 0 : out_of_memory();
    Record r;
    for (Py_ssize_t p = 0; !failed && p < len; p = r.end) {
        if (n + ENTRY > cap) {
            uint8_t *more = PyMem_RawRealloc(entries, (size_t)(cap *= 2));
            if (!more) { failed = out_of_memory(); break; }
            entries = more;
        }
        if (read_record(buf, p, len, &r) < 0) failed = -1;
        else n += entry_of(buf, &r, entries + n, arg);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(v);
    PyObject *out = failed ? raise_walk_error() : PyBytes_FromStringAndSize((char *)entries, n);
    PyMem_RawFree(entries);
    return out; /* NULL with MemoryError set when the bytes could not be made */
}

#endif
