/* Key digests stored beside a compacted ledger's batches, for _batch_scan.c: each
 * batch's digests made once when the batch is written (key_digests), and the as_of
 * merge over them (unsuperseded), which then probes the raw part's offset map with
 * the stored digests instead of hashing every key of the compacted ledger again.
 * Static functions: one includer (after _batch_walk.h).
 */
#ifndef COMPACTLOG_KEY_DIGESTS_H
#define COMPACTLOG_KEY_DIGESTS_H
#include "_batch_walk.h"

#define DIGEST 16

static Py_ssize_t digest_entry(const uint8_t *buf, const Record *r, uint8_t *out,
                               const void *arg) {
    (void)arg;
    if (r->flags & HAS_KEY) digest_key(buf + r->ks, (size_t)(r->ke - r->ks), out);
    else memset(out, 0, DIGEST);
    return DIGEST;
}

/* key_digests(payload) -> bytes: for each record, in order, its key's digest (the offset
 *   map's SipHash-2-4-128), 16 zero bytes for a keyless record. Without the GIL. */
static PyObject *key_digests(PyObject *self, PyObject *args) {
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "y*", &v)) return NULL;
    return walk_entries(&v, digest_entry, NULL);
}

/* Each digest's table lines asked for before any is probed (their misses overlap). */
static inline void prefetch_digests(const Table *t, const uint8_t *d, Py_ssize_t n) {
#if defined(__GNUC__)
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t slot = scale(le64(d + DIGEST * i), (uint64_t)t->slots);
        __builtin_prefetch((const uint8_t *)t->hashes.buf + (slot << 4));
        __builtin_prefetch((const int64_t *)t->offsets.buf + slot);
    }
#else
    (void)t, (void)d, (void)n;
#endif
}

static inline int held(const Table *t, const uint8_t *digest) {
    return table_get(t->hashes.buf, t->offsets.buf, t->slots, digest) >= 0;
}

/* unsuperseded(hashes, offsets, payload, retain[, digests, live_only]) -> (records,
 *   count, first ledger, first entry, last ledger, last entry): the records of one batch
 *   of a compacted ledger that a run over it and a later raw part keeps, where the table
 *   maps the raw part's keys: keyed with a non-empty value and a key the table does not
 *   hold, or keyless when `retain`; the records as they are framed in the payload. When
 *   every record is kept: (the payload itself, count, 0, 0, 0, 0), no copy (the caller
 *   has the batch and its header). `digests`: the records' stored key digests (16 bytes
 *   each, key_digests'), used instead of hashing the keys; with `live_only` (the batch
 *   is LIVE_ONLY: every record keyed and live) a batch that keeps all or none of its
 *   records is answered without walking it. */
static PyObject *unsuperseded(PyObject *self, PyObject *args) {
    PyObject *h, *o, *dobj = Py_None, *out = NULL;
    Py_buffer v, d = {0};
    int retain, live_only = 0;
    if (!PyArg_ParseTuple(args, "OOy*p|Op", &h, &o, &v, &retain, &dobj, &live_only)) return NULL;
    Table t;
    if (table_open(&t, h, o) < 0) { PyBuffer_Release(&v); return NULL; }
    const uint8_t *stored = NULL;
    Py_ssize_t ndigests = 0;
    if (dobj != Py_None) {
        if (PyObject_GetBuffer(dobj, &d, PyBUF_SIMPLE) < 0) { d.obj = NULL; goto done; }
        if (d.len % DIGEST) {
            PyErr_Format(PyExc_ValueError, "unsuperseded: %d bytes a digest", DIGEST);
            goto done;
        }
        stored = d.buf, ndigests = d.len / DIGEST;
        prefetch_digests(&t, stored, ndigests);
    }
    if (stored && live_only) {
        Py_ssize_t gone = 0;
        for (Py_ssize_t i = 0; i < ndigests; i++) gone += held(&t, stored + DIGEST * i);
        if (gone == 0) { out = Py_BuildValue("(OLiiii)", v.obj, (long long)ndigests, 0, 0, 0, 0); goto done; }
        if (gone == ndigests) { out = Py_BuildValue("(y#iiiii)", "", (Py_ssize_t)0, 0, 0, 0, 0, 0); goto done; }
    }
    const uint8_t *buf = v.buf;
    Walk w;
    if (walk_all(buf, v.len, stored ? NULL : &t, &w, 0, 0) < 0) { raise_walk_error(); goto done; }
    if (stored && w.n != ndigests) {
        PyErr_Format(PyExc_ValueError, "unsuperseded: %zd digests for %zd records", ndigests, w.n);
        walk_free(&w);
        goto done;
    }
    uint8_t *kept_bytes = PyMem_Malloc(v.len > 0 ? (size_t)v.len : 1);
    if (!kept_bytes) { PyErr_NoMemory(); walk_free(&w); goto done; }
    unsigned long long fl = 0, fe = 0, ll = 0, le = 0;
    long long count = 0;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < w.n; i++) {
        const Record *r = &w.recs[i];
        if (r->flags & HAS_KEY) {
            if (!(r->flags & VALUE_NON_EMPTY)) continue;
            if (held(&t, stored ? stored + DIGEST * i : w.digests[i])) continue;
        } else if (!retain) {
            continue;
        }
        memcpy(kept_bytes + n, buf + r->start, (size_t)(r->end - r->start));
        n += r->end - r->start;
        if (!count) fl = r->ledger, fe = r->entry;
        ll = r->ledger, le = r->entry;
        count++;
    }
    if (count == w.n && count) out = Py_BuildValue("(OLiiii)", v.obj, count, 0, 0, 0, 0);
    else out = Py_BuildValue("(y#LKKKK)", (const char *)kept_bytes, n, count, fl, fe, ll, le);
    PyMem_Free(kept_bytes);
    walk_free(&w);
done:
    if (d.obj) PyBuffer_Release(&d);
    table_close(&t);
    PyBuffer_Release(&v);
    return out;
}

#endif
