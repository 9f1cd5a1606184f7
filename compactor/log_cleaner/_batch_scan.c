/* The compactors' per-record work, one call per stored batch: the compiled twin of
 * _batch_scan_py.py (same functions, same results; the tests run both).
 *
 * Each function walks the message records of one checked batch payload (layout in
 * storage/batch.py; the same checks and MalformedPayload messages as storage/_batch.c's
 * walk), digests keys (SipHash-2-4-128) and probes or fills an offset map table
 * (_offset_table.h), so neither the LogCleaner nor the two-phase compactor touches a record in Python:
 *
 *   digest_keys     the cleaner's offset map, first half: (offset, key digest) of each
 *                   keyed record in [start, end)
 *   map_digests     its second half: key -> latest offset, in log order
 *   survivors       the cleaner's rewrite: the bytes of the records that survive
 *   digest_positions  phase one, first half: each record's size, flags and key digest
 *   exchange_digested its second half: key -> latest position << 1 | live, with the
 *                   run's figures
 *   winner_bits     phase two's selection through phase one's map, as bits
 *   select_batch    phase two: the records whose bit is set, framed for a new batch
 *   live_bitmap     phase one's map as a bitmap of the live winners' positions
 *   key_digests     a compacted batch's key digests, stored beside it (_key_digests.h)
 *   unsuperseded    the as_of merge: a compacted batch's records a later raw part does
 *                   not supersede, over its stored digests or its keys (_key_digests.h)
 * A payload is walked whole before any record is acted on (a malformed record anywhere
 * fails the call, as a whole-payload walk would; _batch_walk.h).
 *
 * digest_keys, map_digests, survivors, digest_positions and exchange_digested run
 * without the GIL: a cleaner pass and phase one scan batches on several threads
 * (compactor/log_cleaner/fanout.py).
 */
#include "_batch_walk.h"
#include "_key_digests.h"
#include "../../storage/_twin_stamp.h"

typedef struct {
    long long start, end;
    const Table *near; /* the table this thread maps the entries into next, or NULL */
} KeyRange;

static Py_ssize_t key_entry(const uint8_t *buf, const Record *r, uint8_t *out, const void *arg) {
    const KeyRange *range = arg;
    long long off = (long long)r->entry;
    if (!(r->flags & HAS_KEY) || off < range->start || off >= range->end) return 0;
    put_le64(out, (uint64_t)off);
    uint64_t h1 = digest_key(buf + r->ks, (size_t)(r->ke - r->ks), out + 8);
#if defined(__GNUC__)
    if (range->near) { /* its two lines arrive while the next keys are digested */
        uint64_t slot = scale(h1, (uint64_t)range->near->slots);
        __builtin_prefetch((const uint8_t *)range->near->hashes.buf + (slot << 4));
        __builtin_prefetch((const int64_t *)range->near->offsets.buf + slot);
    }
#else
    (void)h1;
#endif
    return ENTRY;
}

/* digest_keys(payload, start, end[, hashes, offsets]) -> bytes: for each keyed record with
 *   start <= offset < end, in log order, 24 bytes: its offset (int64, little-endian), then
 *   its key's digest. The cleaner's offset map, first half (map_digests is the second).
 *   Given the table (a pass on one thread, which maps the batch right after), each key's
 *   slot is prefetched as it is digested: map_digests then finds its lines in cache, as
 *   one fused call would (a pass ran 10-30 % slower without). */
static PyObject *digest_keys(PyObject *self, PyObject *args) {
    Py_buffer v;
    PyObject *h = Py_None, *o = Py_None;
    KeyRange range = {0, 0, NULL};
    if (!PyArg_ParseTuple(args, "y*LL|OO", &v, &range.start, &range.end, &h, &o)) return NULL;
    if (h == Py_None) return walk_entries(&v, key_entry, &range);
    Table t;
    if (table_open(&t, h, o) < 0) { PyBuffer_Release(&v); return NULL; }
    range.near = &t;
    PyObject *result = walk_entries(&v, key_entry, &range);
    table_close(&t);
    return result;
}

/* The table lines of every entry's digest (at byte 8 of an entry), asked for before the
 * first is probed: the misses of a batch (two an entry) then overlap, and the lines wait
 * in cache (a batch's are about 128 KB). Measured against fetching 16 entries ahead:
 * 28-52 against 62-73 ns an entry (1M entries into a 26 MB table, a batch a call). */
static inline void prefetch_all(const Table *t, const uint8_t *e, Py_ssize_t n) {
#if defined(__GNUC__)
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t slot = scale(le64(e + ENTRY * i + 8), (uint64_t)t->slots);
        __builtin_prefetch((const uint8_t *)t->hashes.buf + (slot << 4));
        __builtin_prefetch((const int64_t *)t->offsets.buf + slot);
    }
#else
    (void)t, (void)e, (void)n;
#endif
}

/* The table of a call over entries, opened, and the entries whole (ENTRY bytes each);
 * on failure both are released and the error set. */
static int open_entries(Table *t, PyObject *h, PyObject *o, Py_buffer *d, const char *who) {
    if (table_open(t, h, o) < 0) {
        PyBuffer_Release(d);
        return -1;
    }
    if (d->len % ENTRY) {
        table_close(t);
        PyBuffer_Release(d);
        PyErr_Format(PyExc_ValueError, "%s: %d bytes an entry", who, ENTRY);
        return -1;
    }
    return 0;
}

/* map_digests(hashes, offsets, digests, size, max_entries, bits, bits_first)
 *   -> (mapped, size, stop): digest_keys' entries put in order, each key mapped to its
 *   latest offset; stop: the offset of the first new key that found the map full (it and
 *   the entries after it are not mapped), or -1. With `bits`, bit `offset - bits_first` is
 *   set for each offset mapped and cleared for the one it replaced (the pass's survivors
 *   then need no digest and no probe). Without the GIL: one thread maps. */
static PyObject *map_digests(PyObject *self, PyObject *args) {
    PyObject *h, *o;
    Py_buffer d, b;
    long long size, max_entries, bits_first, stop = -1, mapped = 0;
    if (!PyArg_ParseTuple(args, "OOy*LLw*L", &h, &o, &d, &size, &max_entries, &b, &bits_first))
        return NULL;
    Table t;
    if (open_entries(&t, h, o, &d, "map_digests") < 0) { PyBuffer_Release(&b); return NULL; }
    const uint8_t *e = d.buf;
    Py_ssize_t n = d.len / ENTRY;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *hashes = t.hashes.buf;
    int64_t *offsets = t.offsets.buf;
    prefetch_all(&t, e, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long off = (long long)le64(e + ENTRY * i);
        long long old = table_exchange(hashes, offsets, t.slots, e + ENTRY * i + 8, off,
                                       size < max_entries);
        if (old == FULL) { stop = off; break; }
        size += old == NEW;
        mapped++;
        if (old >= 0 && in_bits(&b, bits_first, old)) set_bit(&b, bits_first, old, 0);
        if (in_bits(&b, bits_first, off)) set_bit(&b, bits_first, off, 1);
    }
    Py_END_ALLOW_THREADS
    table_close(&t);
    PyBuffer_Release(&d);
    PyBuffer_Release(&b);
    return Py_BuildValue("(LLL)", mapped, size, stop);
}

/* survivors(hashes, offsets, payload, expired, bits, bits_first, bits_end)
 *   -> (record bytes, kept, first, last, tombstone kept, read, keyless, tombstones removed)
 * An entry in [bits_first, bits_end) covered by `bits` (map_digests') is the latest of its
 * key when its bit is set; any other is looked up in the table. Without the GIL: the
 * rewrite's threads read the table and the bits, and nothing writes them meanwhile. */
static PyObject *survivors(PyObject *self, PyObject *args) {
    PyObject *h, *o, *out = NULL;
    Py_buffer v, b;
    int expired;
    long long bits_first, bits_end;
    if (!PyArg_ParseTuple(args, "OOy*pw*LL", &h, &o, &v, &expired, &b, &bits_first, &bits_end))
        return NULL;
    Table t;
    if (table_open(&t, h, o) < 0) { PyBuffer_Release(&v); PyBuffer_Release(&b); return NULL; }
    long long covered_end = bits_first + (long long)b.len * 8;
    if (bits_end < covered_end) covered_end = bits_end;
    const uint8_t *buf = v.buf;
    uint8_t *kept_bytes = NULL;
    long long kept = 0, first = 0, last = 0, keyless = 0, removed_tombs = 0, read = 0;
    int tomb_kept = 0, failed, walked;
    Py_ssize_t n = 0;
    Walk w;
    Py_BEGIN_ALLOW_THREADS
    failed = walk_all(buf, v.len, &t, &w, bits_first, covered_end) < 0;
    walked = !failed;
    if (walked) {
        kept_bytes = PyMem_RawMalloc(v.len > 0 ? (size_t)v.len : 1);
        failed = !kept_bytes && out_of_memory() < 0;
        read = w.n;
    }
    for (Py_ssize_t i = 0; kept_bytes && i < w.n; i++) {
        const Record *r = &w.recs[i];
        if (!(r->flags & HAS_KEY)) { keyless++; continue; }
        long long off = (long long)r->entry;
        int superseded;
        if (off >= bits_first && off < covered_end) {
            long long bit = off - bits_first;
            superseded = !(((const uint8_t *)b.buf)[bit >> 3] >> (bit & 7) & 1);
        } else {
            superseded = off < table_get(t.hashes.buf, t.offsets.buf, t.slots, w.digests[i]);
        }
        int tombstone = !(r->flags & VALUE_PRESENT);
        if (superseded || (tombstone && expired)) { removed_tombs += tombstone; continue; }
        tomb_kept |= tombstone;
        memcpy(kept_bytes + n, buf + r->start, (size_t)(r->end - r->start));
        n += r->end - r->start;
        if (!kept) first = off;
        kept++;
        last = off;
    }
    if (walked) walk_free(&w);
    Py_END_ALLOW_THREADS
    if (failed) {
        raise_walk_error();
    } else {
        out = Py_BuildValue("(y#LLLiLLL)", (const char *)kept_bytes, n, kept, first, last,
                            tomb_kept, read, keyless, removed_tombs);
    }
    PyMem_RawFree(kept_bytes);
    table_close(&t);
    PyBuffer_Release(&v);
    PyBuffer_Release(&b);
    return out;
}

static Py_ssize_t position_entry(const uint8_t *buf, const Record *r, uint8_t *out,
                                 const void *arg) {
    (void)arg;
    uint32_t size = (uint32_t)(r->end - r->start), flags = (uint32_t)r->flags;
    memcpy(out, &size, 4); /* the machine's byte order: entries never leave the process */
    memcpy(out + 4, &flags, 4);
    if (r->flags & HAS_KEY) digest_key(buf + r->ks, (size_t)(r->ke - r->ks), out + 8);
    else memset(out + 8, 0, 16);
    return ENTRY;
}

/* digest_positions(payload) -> bytes: for each record of a stored batch, in order, 24
 *   bytes: its framed size (uint32), its flags (uint32; HAS_KEY, VALUE_NON_EMPTY), its
 *   key's digest (zeros when it has none). Phase one's first half (exchange_digested is
 *   the second). */
static PyObject *digest_positions(PyObject *self, PyObject *args) {
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "y*", &v)) return NULL;
    return walk_entries(&v, position_entry, NULL);
}

/* exchange_digested(hashes, offsets, entries, at, first, last, base, size, max_entries,
 *   retain) -> (read, kept, tombstones, keyless, bytes_in, size, stop): phase one over
 *   digest_positions' entries of the batch whose first record is at position `at`, those
 *   in [first, last]: each key -> (base + position) << 1 | live; stop: the position of the
 *   first key that found the map full (not counted, nor anything after it), or -1. */
static PyObject *exchange_digested(PyObject *self, PyObject *args) {
    PyObject *h, *o;
    Py_buffer d;
    long long at, first, last, base, size, max_entries;
    int retain;
    if (!PyArg_ParseTuple(args, "OOy*LLLLLLp", &h, &o, &d, &at, &first, &last, &base, &size,
                          &max_entries, &retain))
        return NULL;
    Table t;
    if (open_entries(&t, h, o, &d, "exchange_digested") < 0) return NULL;
    long long read = 0, kept = 0, tombs = 0, keyless = 0, bytes_in = 0, stop = -1;
    const uint8_t *e = d.buf;
    Py_ssize_t n = d.len / ENTRY;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *hashes = t.hashes.buf;
    int64_t *offsets = t.offsets.buf;
    prefetch_all(&t, e, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long pos = at + i;
        if (pos < first || pos > last) continue;
        uint32_t nbytes, flags;
        memcpy(&nbytes, e + ENTRY * i, 4);
        memcpy(&flags, e + ENTRY * i + 4, 4);
        if (flags & HAS_KEY) {
            int live = (flags & VALUE_NON_EMPTY) ? 1 : 0;
            long long old = table_exchange(hashes, offsets, t.slots, e + ENTRY * i + 8,
                                           (base + pos) << 1 | live, size < max_entries);
            if (old == FULL) { stop = pos; break; }
            if (old == NEW) {
                size++;
                kept += live;
            } else {
                kept += live - (old & 1);
            }
            tombs += 1 - live;
        } else if (retain) {
            kept++;
        } else {
            keyless++;
        }
        read++;
        bytes_in += nbytes;
    }
    Py_END_ALLOW_THREADS
    table_close(&t);
    PyBuffer_Release(&d);
    return Py_BuildValue("(LLLLLLL)", read, kept, tombs, keyless, bytes_in, size, stop);
}

/* winner_bits(hashes, offsets, payload, at, first, last, base, retain, tombstones, bits,
 *   bits_first) -> bits set: phase two's selection through phase one's map (when no bitmap
 *   fits): an entry wins when it is live (or a tombstone, when `tombstones`) and the map
 *   holds exactly its own position and liveness; a keyless one when `retain`.
 *   Bit = position - bits_first. */
static PyObject *winner_bits(PyObject *self, PyObject *args) {
    PyObject *h, *o;
    Py_buffer v, b;
    long long at, first, last, base, bits_first, set = 0;
    int retain, tombstones;
    if (!PyArg_ParseTuple(args, "OOy*LLLLppw*L", &h, &o, &v, &at, &first, &last, &base, &retain,
                          &tombstones, &b, &bits_first))
        return NULL;
    Table t;
    if (table_open(&t, h, o) < 0) { PyBuffer_Release(&v); PyBuffer_Release(&b); return NULL; }
    uint8_t *bits = b.buf;
    Walk w;
    int failed = walk_all(v.buf, v.len, &t, &w, 0, 0) < 0;
    for (Py_ssize_t i = 0; !failed && i < w.n; i++) {
        const Record *r = &w.recs[i];
        long long pos = at + i, off = pos - bits_first;
        if (pos < first || pos > last) continue;
        if (r->flags & HAS_KEY) {
            long long live = (r->flags & VALUE_NON_EMPTY) ? 1 : 0;
            if (!live && !tombstones) continue;
            long long found = table_get(t.hashes.buf, t.offsets.buf, t.slots, w.digests[i]);
            if (found != ((base + pos) << 1 | live)) continue;
        } else if (!retain) {
            continue;
        }
        if (off < 0 || (off >> 3) >= b.len) continue;
        bits[off >> 3] |= (uint8_t)(1 << (off & 7));
        set++;
    }
    if (!failed) walk_free(&w);
    table_close(&t);
    PyBuffer_Release(&v);
    PyBuffer_Release(&b);
    return failed ? raise_walk_error() : PyLong_FromLongLong(set);
}

static Py_ssize_t put_varint(uint8_t *out, uint64_t n) {
    Py_ssize_t i = 0;
    for (; n >= 0x80; n >>= 7) out[i++] = (uint8_t)(n | 0x80);
    out[i++] = (uint8_t)n;
    return i;
}

/* select_batch(payload, at, first, last, bits, bits_first, limit) -> (records, count,
 *   message bytes, first ledger, first entry, last ledger, last entry, next position,
 *   not live: records taken that are keyless or tombstones) */
static PyObject *select_batch(PyObject *self, PyObject *args) {
    Py_buffer v, b;
    long long at, first, last, bits_first, limit;
    if (!PyArg_ParseTuple(args, "y*LLLy*LL", &v, &at, &first, &last, &b, &bits_first, &limit))
        return NULL;
    PyObject *out = NULL;
    const uint8_t *buf = v.buf, *bits = b.buf;
    uint8_t *framed = PyMem_Malloc((size_t)v.len + 16);
    if (!framed) { PyErr_NoMemory(); goto done; }
    unsigned long long fl = 0, fe = 0, ll = 0, le = 0;
    long long count = 0, body_bytes = 0, pos = at - 1, next = -1, dead = 0;
    Py_ssize_t n = 0;
    Record r;
    for (Py_ssize_t p = 0; p < v.len; p = r.end) {
        if (read_record(buf, p, v.len, &r) < 0) { raise_walk_error(); goto done; }
        pos++;
        if (next >= 0 || pos < first || pos > last) continue;
        long long off = pos - bits_first;
        if (off < 0 || (off >> 3) >= b.len || !(bits[off >> 3] >> (off & 7) & 1)) continue;
        Py_ssize_t len = r.end - r.body;
        framed[n++] = 0x0A;
        n += put_varint(framed + n, (uint64_t)len);
        memcpy(framed + n, buf + r.body, (size_t)len);
        n += len;
        if (!count) fl = r.ledger, fe = r.entry;
        ll = r.ledger, le = r.entry;
        count++;
        body_bytes += len;
        if ((r.flags & (HAS_KEY | VALUE_NON_EMPTY)) != (HAS_KEY | VALUE_NON_EMPTY)) dead++;
        if (count >= limit) next = pos + 1;
    }
    if (next < 0) next = pos + 1;
    out = Py_BuildValue("(y#LLKKKKLL)", (const char *)framed, n, count, body_bytes, fl, fe, ll,
                        le, next, dead);
done:
    PyMem_Free(framed);
    PyBuffer_Release(&v);
    PyBuffer_Release(&b);
    return out;
}

/* live_bitmap(offsets, bits, tombstones) -> positions set: every live entry (value + 1
 * even) of a phase-one table, and every tombstone too when `tombstones`, value = position
 * << 1 | live, as bit `position` of `bits`. */
static PyObject *live_bitmap(PyObject *self, PyObject *args) {
    Py_buffer o, b;
    int tombstones;
    if (!PyArg_ParseTuple(args, "y*w*p", &o, &b, &tombstones)) return NULL;
    const int64_t *offsets = o.buf;
    uint8_t *bits = b.buf;
    Py_ssize_t slots = o.len / 8, set = 0, s = 0;
    for (; s < slots; s++) {
        int64_t stored = offsets[s];
        if (!stored || (!tombstones && (stored & 1))) continue;
        int64_t pos = (stored - 1) >> 1;
        if ((pos >> 3) >= b.len) break;
        bits[pos >> 3] |= (uint8_t)(1 << (pos & 7));
        set++;
    }
    PyBuffer_Release(&o);
    PyBuffer_Release(&b);
    if (s < slots) {
        PyErr_SetString(PyExc_IndexError, "bytearray index out of range");
        return NULL;
    }
    return PyLong_FromSsize_t(set);
}

static PyMethodDef methods[] = {
    {"digest_keys", digest_keys, METH_VARARGS, "The offsets and key digests of one batch."},
    {"map_digests", map_digests, METH_VARARGS, "The cleaner's offset map over digested keys."},
    {"survivors", survivors, METH_VARARGS, "The records of one batch that survive cleaning."},
    {"digest_positions", digest_positions, METH_VARARGS, "Phase one: a batch's digests."},
    {"exchange_digested", exchange_digested, METH_VARARGS, "Phase one over a batch's digests."},
    {"select_batch", select_batch, METH_VARARGS, "Phase two: one batch's selected records."},
    {"winner_bits", winner_bits, METH_VARARGS, "Phase two: one batch's winners as bits."},
    {"live_bitmap", live_bitmap, METH_VARARGS, "Phase one's live winners as a bitmap."},
    {"unsuperseded", unsuperseded, METH_VARARGS, "A compacted batch's records a merge keeps."},
    {"key_digests", key_digests, METH_VARARGS, "Each record's key digest, 16 bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch_scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *py = PyImport_ImportModule("compactlog.storage._batch_py");
    if (!py) { Py_DECREF(m); return NULL; }
    MalformedPayload = PyObject_GetAttrString(py, "MalformedPayload");
    Py_DECREF(py);
    if (!MalformedPayload) { Py_DECREF(m); return NULL; }
    return twin_stamped(m);
}
