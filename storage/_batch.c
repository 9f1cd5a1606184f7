/* Compiled twin of storage/_batch_py.py: the per-record work of the batch codec.
 *
 * Same functions, same results, byte for byte (tests/storage/test_batch_codec.py runs
 * every case through both). Layouts are drawn in storage/batch.py. Built by the ordinary
 * install as an optional extension; storage/batch.py falls back to the Python twin when
 * it is absent.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


static PyObject *MalformedPayload = NULL;

#include "_buf.h"

static void malformed(const char *what) { PyErr_SetString(MalformedPayload, what); }

static int wire_error(const char *what) {
    malformed(what);
    return -1;
}
#include "_wire.h"
#include "_publish_check.h"
#include "_twin_stamp.h"

/* The key index's hash of a key (storage/key_index.py): FNV-1a 64 folded to 32 bits,
 * never 0 (0 marks a keyless record in an index block). */
static uint32_t index_hash(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (Py_ssize_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
    uint32_t folded = (uint32_t)(h ^ (h >> 32));
    return folded ? folded : 1;
}

static int buf_u32be(Buf *b, uint32_t v) {
    unsigned char t[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    return buf_put(b, t, 4);
}

static Py_ssize_t id_field_p(unsigned char *out, uint64_t ledger, uint64_t entry,
                             uint32_t partition) {
    Py_ssize_t n = 2;
    if (ledger) { out[n++] = 0x08; n += varint_encode(out + n, ledger); }
    if (entry) { out[n++] = 0x10; n += varint_encode(out + n, entry); }
    if (partition) { out[n++] = 0x18; n += varint_encode(out + n, partition); }
    out[0] = 0x0A;
    out[1] = (unsigned char)(n - 2);
    return n;
}

static Py_ssize_t id_field(unsigned char *out, uint64_t ledger, uint64_t entry) {
    return id_field_p(out, ledger, entry, 0);
}

/* encode_records(request, pos, ledger_id, first_entry, publish_ms, max_count, room
                  [, partition]) */
static PyObject *encode_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, max_count, room;
    unsigned long long ledger, first_entry;
    long long publish_ms;
    int partition = 0;
    if (!PyArg_ParseTuple(args, "y*nKKLnn|i", &view, &pos, &ledger, &first_entry, &publish_ms,
                          &max_count, &room, &partition))
        return NULL;
    if (partition < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "partition must be >= 0");
        return NULL;
    }
    const unsigned char *req = view.buf;
    Py_ssize_t end = view.len, p = pos, count = 0;
    Buf payload = {0}, keys = {0};
    int64_t max_event = INT64_MIN;
    Py_ssize_t max_size = -1, max_index = -1, keyed = 0;
    PyObject *result = NULL;
    if (pos < 0 || pos > end) { malformed("position outside the request"); goto done; }
    /* room for the records' bytes and their ids and times, as a rule: no regrowth */
    Py_ssize_t want = end - pos < room ? end - pos : room;
    if (buf_reserve(&payload, want + want / 4 + 256) < 0) goto done;
    while (p < end && count < max_count && payload.len < room) {
        Field rec;
        Py_ssize_t nxt = p;
        if (read_field(req, &nxt, end, &rec) < 0) goto done;
        if (rec.number != 2 || rec.wire != 2) { p = nxt; continue; }
        Py_ssize_t rs = rec.start, re = rec.end;
        unsigned char idbuf[32], tail[22];
        Py_ssize_t idlen =
            id_field_p(idbuf, ledger, first_entry + (uint64_t)count, (uint32_t)partition);
        Py_ssize_t key_s = -1, key_e = -1, key_f = -1, val_f = -1, val_e = -1, props = 0;
        uint64_t event = 0;
        /* first pass: locate key/value (last wins), event time, the properties' size */
        Py_ssize_t r = rs;
        Field f;
        while (r < re) {
            if (read_field(req, &r, re, &f) < 0) goto done;
            if (f.number == 1 && f.wire == 2) {
                key_f = f.at; key_s = f.start; key_e = f.end;
            } else if (f.number == 2 && f.wire == 2) {
                val_f = f.at; val_e = f.end;
            } else if (f.number == 3 && f.wire == 2) {
                props += 1 + f.end - f.at;
            } else if (f.number == 4 && f.wire == 0) {
                Py_ssize_t s = f.at;
                if (read_varint(req, &s, re, &event) < 0) goto done;
            }
        }
        Py_ssize_t tlen = 0; /* publish and event times */
        if (publish_ms) {
            tail[tlen++] = 0x28;
            tlen += varint_encode(tail + tlen, (uint64_t)publish_ms);
        }
        if (!event) event = (uint64_t)publish_ms;
        if (event) {
            tail[tlen++] = 0x30;
            tlen += varint_encode(tail + tlen, event);
        }
        Py_ssize_t size = (key_f >= 0 ? 1 + key_e - key_f : 0) +
                          (val_f >= 0 ? 1 + val_e - val_f : 0) + props + tlen;
        Py_ssize_t blen = idlen + size;
        /* the record written in place: its framing, then the Message's fields */
        if (buf_reserve(&payload, 11 + blen) < 0) goto done;
        unsigned char *out = payload.data + payload.len;
        *out++ = 0x0A;
        out += varint_encode(out, (uint64_t)blen);
        memcpy(out, idbuf, (size_t)idlen), out += idlen;
        if (key_f >= 0) {
            *out++ = 0x12;
            memcpy(out, req + key_f, (size_t)(key_e - key_f)), out += key_e - key_f;
        }
        if (val_f >= 0) {
            *out++ = 0x1A;
            memcpy(out, req + val_f, (size_t)(val_e - val_f)), out += val_e - val_f;
        }
        /* second pass: properties, in order */
        for (r = rs; props && r < re;) {
            if (read_field(req, &r, re, &f) < 0) goto done;
            if (f.number == 3 && f.wire == 2) {
                *out++ = 0x22;
                memcpy(out, req + f.at, (size_t)(f.end - f.at)), out += f.end - f.at;
            }
        }
        memcpy(out, tail, (size_t)tlen), out += tlen;
        payload.len = out - payload.data;
        if (buf_u32be(&keys, key_f >= 0 ? index_hash(req + key_s, key_e - key_s) : 0) < 0)
            goto done;
        keyed += key_f >= 0;
        if (size > max_size) { max_size = size; max_index = count; }
        if ((int64_t)event > max_event) max_event = (int64_t)event;
        count++;
        p = nxt;
    }
    while (p < end) { /* trailing non-record fields */
        uint64_t tag;
        Py_ssize_t q = p;
        if (read_varint(req, &q, end, &tag) < 0) goto done;
        if (tag == 0x12) break;
        Py_ssize_t nxt = skip_field(req, q, end, (int)(tag & 7));
        if (nxt < 0) goto done;
        p = nxt;
    }
    result = Py_BuildValue("(y#y#nnLnn)", payload.data ? (char *)payload.data : "", payload.len,
                           keys.data ? (char *)keys.data : "", keyed ? keys.len : 0, count, p,
                           (long long)max_event, max_size, max_index);
done:
    PyMem_Free(payload.data);
    PyMem_Free(keys.data);
    PyBuffer_Release(&view);
    return result;
}

/* walk(payload, start=0, end=-1) -> [(ledger, entry, flags, key, start, end)] */
static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start = 0, stop = -1;
    if (!PyArg_ParseTuple(args, "y*|nn", &view, &start, &stop)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = stop < 0 ? view.len : stop;
    PyObject *out = PyList_New(0);
    if (!out) goto fail;
    if (start < 0 || end > view.len || start > end) {
        malformed("range outside the payload");
        goto fail;
    }
    Record r;
    for (Py_ssize_t p = start; p < end; p = r.end) {
        if (read_record(buf, p, end, &r) < 0) goto fail;
        PyObject *key;
        if (r.ks >= 0) {
            key = PyBytes_FromStringAndSize((const char *)buf + r.ks, r.ke - r.ks);
            if (!key) goto fail;
        } else {
            key = Py_NewRef(Py_None);
        }
        PyObject *item = Py_BuildValue("(KKiNnn)", (unsigned long long)r.ledger,
                                       (unsigned long long)r.entry, r.flags, key, r.start, r.end);
        if (!item || PyList_Append(out, item) < 0) { Py_XDECREF(item); goto fail; }
        Py_DECREF(item);
    }
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static int record_id(const unsigned char *buf, Py_ssize_t q, Py_ssize_t me, uint64_t *ledger,
                     uint64_t *entry) {
    *ledger = *entry = 0;
    Field f;
    while (q < me) {
        if (read_field(buf, &q, me, &f) < 0) return -1;
        if (f.number == 1 && f.wire == 2) return parse_id(buf, f.start, f.end, ledger, entry);
    }
    return 0;
}

static int id_cmp(uint64_t al, uint64_t ae, uint64_t bl, uint64_t be) {
    if (al != bl) return al < bl ? -1 : 1;
    if (ae != be) return ae < be ? -1 : 1;
    return 0;
}

/* span(payload, lo_ledger, lo_entry, hi_ledger, hi_entry, limit)
 *   -> (begin, end, count, last_ledger, last_entry) */
static PyObject *span(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long lol, loe, hil, hie;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*KKKKn", &view, &lol, &loe, &hil, &hie, &limit)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, p = 0, begin = -1, stop = -1, count = 0;
    uint64_t last_l = 0, last_e = 0;
    while (p < end && count < limit) {
        Py_ssize_t ms = 0, me = 0;
        uint64_t l, e;
        if (read_frame(buf, p, end, &ms, &me) < 0 || record_id(buf, ms, me, &l, &e) < 0)
            goto fail;
        if (id_cmp(l, e, hil, hie) > 0) break;
        if (id_cmp(l, e, lol, loe) >= 0) {
            if (begin < 0) begin = p;
            stop = me;
            count++;
            last_l = l;
            last_e = e;
        }
        p = me;
    }
    PyBuffer_Release(&view);
    if (count == 0) return Py_BuildValue("(nnnKK)", (Py_ssize_t)0, (Py_ssize_t)0, (Py_ssize_t)0, 0ULL, 0ULL);
    return Py_BuildValue("(nnnKK)", begin, stop, count, (unsigned long long)last_l,
                         (unsigned long long)last_e);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* skip_records(payload, start, count) -> position after count records */
static PyObject *skip_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, count;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &count)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, p = start;
    if (start < 0 || start > end) {
        PyBuffer_Release(&view);
        malformed("position outside the payload");
        return NULL;
    }
    while (count > 0 && p < end) {
        Py_ssize_t ms = p + 1;
        uint64_t n;
        if (read_varint(buf, &ms, end, &n) < 0) { PyBuffer_Release(&view); return NULL; }
        if (n > (uint64_t)(end - ms)) {
            PyBuffer_Release(&view);
            malformed("message record runs past the payload");
            return NULL;
        }
        p = ms + (Py_ssize_t)n;
        count--;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(p);
}

/* id_runs([(ledger, first, count)]) -> wire bytes of repeated MessageId ids = 1 */
static PyObject *id_runs(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "id_runs takes a sequence of runs");
    if (!seq) return NULL;
    Buf out = {0};
    PyObject *result = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long ledger, first;
        Py_ssize_t cnt;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KKn", &ledger, &first, &cnt))
            goto done;
        if (buf_reserve(&out, cnt * 24) < 0) goto done;
        for (Py_ssize_t k = 0; k < cnt; k++)
            out.len += id_field(out.data + out.len, ledger, first + (uint64_t)k);
    }
    result = PyBytes_FromStringAndSize(out.data ? (char *)out.data : "", out.len);
done:
    PyMem_Free(out.data);
    Py_DECREF(seq);
    return result;
}

/* key_hash(key) -> the index hash of a key */
static PyObject *key_hash(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t h = index_hash(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(h);
}

/* Run entries: hash u32 + entry id u64, big-endian (12 bytes). */
#define RUN_ENTRY 12

typedef struct { uint64_t hash, entry; } IndexEntry;

static int entry_lt(const IndexEntry *a, const IndexEntry *b) {
    return a->hash < b->hash || (a->hash == b->hash && a->entry < b->entry);
}

static uint64_t load_be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static void store_be(unsigned char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) { p[i] = (unsigned char)v; v >>= 8; }
}

/* block_entries(block, first_entry) -> run entries of a batch's index block (keyless
 * records, hash 0, have none) */
static PyObject *block_entries(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long first;
    if (!PyArg_ParseTuple(args, "y*K", &view, &first)) return NULL;
    if (view.len % 4) {
        PyBuffer_Release(&view);
        malformed("key index block is not a whole number of hashes");
        return NULL;
    }
    const unsigned char *src = view.buf;
    Py_ssize_t n = view.len / 4, keyed = 0;
    for (Py_ssize_t i = 0; i < n; i++) keyed += load_be(src + 4 * i, 4) != 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, keyed * RUN_ENTRY);
    if (!out) { PyBuffer_Release(&view); return NULL; }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h = load_be(src + 4 * i, 4);
        if (!h) continue;
        store_be(dst, h, 4);
        store_be(dst + 4, first + (uint64_t)i, 8);
        dst += RUN_ENTRY;
    }
    PyBuffer_Release(&view);
    return out;
}

/* Quicksort (median of three, insertion sort below 16, recursion on the smaller side). */
static void sort_entries(IndexEntry *a, Py_ssize_t n) {
    while (n > 16) {
        IndexEntry *lo = a, *mid = a + n / 2, *hi = a + n - 1, t;
        if (entry_lt(mid, lo)) { t = *mid; *mid = *lo; *lo = t; }
        if (entry_lt(hi, mid)) { t = *hi; *hi = *mid; *mid = t; }
        if (entry_lt(mid, lo)) { t = *mid; *mid = *lo; *lo = t; }
        IndexEntry pivot = *mid;
        Py_ssize_t i = 0, j = n - 1;
        for (;;) {
            while (entry_lt(&a[i], &pivot)) i++;
            while (entry_lt(&pivot, &a[j])) j--;
            if (i >= j) break;
            t = a[i]; a[i] = a[j]; a[j] = t;
            i++; j--;
        }
        Py_ssize_t left = j + 1;
        if (left < n - left) { sort_entries(a, left); a += left; n -= left; }
        else { sort_entries(a + left, n - left); n = left; }
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        IndexEntry v = a[i];
        Py_ssize_t j = i;
        while (j > 0 && entry_lt(&v, &a[j - 1])) { a[j] = a[j - 1]; j--; }
        a[j] = v;
    }
}

/* Hashes are uniform: one counting pass puts each entry in its bucket by the top bits of
 * its hash (about one entry a bucket), then each bucket is sorted on its own (quicksort,
 * so that a key with many entries, one bucket, stays n log n). Result in out[]. */
static int bucket_sort(const IndexEntry *in, IndexEntry *out, Py_ssize_t n) {
    int bits = 4;
    while (bits < 16 && ((Py_ssize_t)1 << bits) < n) bits++;
    size_t buckets = (size_t)1 << bits;
    Py_ssize_t *start = PyMem_RawCalloc(buckets + 1, sizeof(Py_ssize_t));
    if (!start) return -1;
    for (Py_ssize_t i = 0; i < n; i++) start[(in[i].hash >> (32 - bits)) + 1]++;
    for (size_t b = 0; b < buckets; b++) start[b + 1] += start[b];
    for (Py_ssize_t i = 0; i < n; i++) out[start[in[i].hash >> (32 - bits)]++] = in[i];
    Py_ssize_t from = 0; /* start[b] is now the end of bucket b */
    for (size_t b = 0; b < buckets; b++) {
        if (start[b] - from > 1) sort_entries(out + from, start[b] - from);
        from = start[b];
    }
    PyMem_RawFree(start);
    return 0;
}

/* sort_index(entries) -> run entries (hash u32, entry u64) in byte order.
 * The sort runs without the GIL: the key indexer's merges never stall a publish. */
static PyObject *sort_index(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len % RUN_ENTRY) {
        PyBuffer_Release(&view);
        malformed("key index run is not a whole number of entries");
        return NULL;
    }
    Py_ssize_t n = view.len / RUN_ENTRY;
    IndexEntry *entries = PyMem_RawMalloc((size_t)(n ? 2 * n : 1) * sizeof(IndexEntry));
    if (!entries) { PyBuffer_Release(&view); return PyErr_NoMemory(); }
    PyObject *out = PyBytes_FromStringAndSize(NULL, view.len);
    if (!out) { PyMem_RawFree(entries); PyBuffer_Release(&view); return NULL; }
    const unsigned char *src = view.buf;
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    IndexEntry *sorted = entries + n;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        entries[i].hash = load_be(src + RUN_ENTRY * i, 4);
        entries[i].entry = load_be(src + RUN_ENTRY * i + 4, 8);
    }
    failed = bucket_sort(entries, sorted, n);
    for (Py_ssize_t i = 0; !failed && i < n; i++) {
        store_be(dst + RUN_ENTRY * i, sorted[i].hash, 4);
        store_be(dst + RUN_ENTRY * i + 4, sorted[i].entry, 8);
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(entries);
    if (failed) { Py_DECREF(out); PyBuffer_Release(&view); return PyErr_NoMemory(); }
    PyBuffer_Release(&view);
    return out;
}

/* Kafka's Utils.murmur2 (seed 0x9747b28c), as an unsigned 32-bit value. */
static uint32_t murmur2(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t whole = length & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < whole; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) |
                     ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3: h ^= (uint32_t)data[whole + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[whole + 1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)data[whole]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* route_records(request, partitions, first_keyless)
   -> ([part bytes per partition], order bytes, keyless count) */
static PyObject *route_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t partitions;
    unsigned long long keyless;
    if (!PyArg_ParseTuple(args, "y*nK", &view, &partitions, &keyless)) return NULL;
    if (partitions < 1 || partitions > 65536) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "partitions must be 1 to 65536");
        return NULL;
    }
    const unsigned char *req = view.buf;
    Py_ssize_t end = view.len, p = 0;
    unsigned long long first_keyless = keyless;
    Buf *parts = PyMem_Calloc((size_t)partitions, sizeof(Buf));
    uint32_t *counts = PyMem_Calloc((size_t)partitions, sizeof(uint32_t));
    Buf order = {0};
    PyObject *result = NULL, *list = NULL;
    if (!parts || !counts) { PyErr_NoMemory(); goto done; }
    while (p < end) {
        Field rec, f;
        Py_ssize_t nxt = p;
        if (read_field(req, &nxt, end, &rec) < 0) goto done;
        if (rec.number != 2 || rec.wire != 2) { p = nxt; continue; }
        Py_ssize_t r = rec.start, re = rec.end, key_s = -1, key_e = -1;
        while (r < re) { /* the key field: the last one wins, as in encode_records */
            if (read_field(req, &r, re, &f) < 0) goto done;
            if (f.number == 1 && f.wire == 2) key_s = f.start, key_e = f.end;
        }
        Py_ssize_t partition;
        if (key_s >= 0)
            partition = (Py_ssize_t)((murmur2(req + key_s, key_e - key_s) & 0x7fffffffu) %
                                     (uint32_t)partitions);
        else
            partition = (Py_ssize_t)(keyless++ % (unsigned long long)partitions);
        uint32_t pair[2] = {(uint32_t)partition, counts[partition]++};
        if (buf_put(&parts[partition], req + p, nxt - p) < 0) goto done;
        if (buf_put(&order, (const unsigned char *)pair, sizeof pair) < 0) goto done;
        p = nxt;
    }
    list = PyList_New(partitions);
    if (!list) goto done;
    for (Py_ssize_t i = 0; i < partitions; i++) {
        PyObject *b = PyBytes_FromStringAndSize(parts[i].data ? (char *)parts[i].data : "",
                                                parts[i].len);
        if (!b) goto done;
        PyList_SET_ITEM(list, i, b);
    }
    result = Py_BuildValue("(Oy#K)", list, order.data ? (char *)order.data : "", order.len,
                           keyless - first_keyless);
done:
    Py_XDECREF(list);
    if (parts)
        for (Py_ssize_t i = 0; i < partitions; i++) PyMem_Free(parts[i].data);
    PyMem_Free(parts);
    PyMem_Free(counts);
    PyMem_Free(order.data);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"key_hash", key_hash, METH_O, "The key index's hash of a key."},
    {"block_entries", block_entries, METH_VARARGS, "Run entries of an index block."},
    {"sort_index", sort_index, METH_O, "Key index run entries in byte order."},
    {"encode_records", encode_records, METH_VARARGS, "Records of a PublishRequest as messages."},
    {"walk", walk, METH_VARARGS, "Message records of a payload."},
    {"span", span, METH_VARARGS, "Byte range of the records in an id range."},
    {"skip_records", skip_records, METH_VARARGS, "Position after n message records."},
    {"id_runs", id_runs, METH_O, "Wire bytes of repeated MessageId for id runs."},
    {"route_records", route_records, METH_VARARGS, "Records of a PublishRequest by partition."},
    {"check_publish", check_publish, METH_O, "A PublishRequest checked; its topic."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *py = PyImport_ImportModule("compactlog.storage._batch_py");
    if (!py) { Py_DECREF(m); return NULL; }
    MalformedPayload = PyObject_GetAttrString(py, "MalformedPayload");
    Py_DECREF(py);
    if (!MalformedPayload || PyModule_AddObjectRef(m, "MalformedPayload", MalformedPayload) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "HAS_KEY", HAS_KEY);
    PyModule_AddIntConstant(m, "VALUE_NON_EMPTY", VALUE_NON_EMPTY);
    PyModule_AddIntConstant(m, "VALUE_PRESENT", VALUE_PRESENT);
    return twin_stamped(m);
}
