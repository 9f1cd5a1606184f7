/* Compiled twin of compactlog/spark/_columns_py.py: one serialized ReadResponse turned
 * into the Spark source's column buffers, with no Python object per message.
 *
 * Same function, same results, byte for byte (tests/spark/test_columns.py runs every
 * case through both); compactlog/spark/columns.py wraps the buffers as Arrow arrays and
 * falls back to the Python twin when this one was not built. The protobuf walk is the
 * storage codec's (storage/_wire.h): a response is the stored payloads, concatenated.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *MalformedResponse = NULL;

static int wire_error(const char *what) {
    PyErr_SetString(MalformedResponse, what);
    return -1;
}
#include "_wire.h"
#include "_twin_stamp.h"

/* A growable byte buffer, handed to Python as bytes at the end. */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n) cap *= 2;
        char *d = PyMem_Realloc(b->data, (size_t)cap);
        if (!d) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = d, b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static int put_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }

/* An Arrow offset: the column's data length so far, which must fit int32. */
static int put_offset(Buf *b, Py_ssize_t at) {
    if (at > INT32_MAX) return wire_error("a response's column passes 2 GiB");
    int32_t v = (int32_t)at;
    return buf_put(b, &v, 4);
}

/* A binary column: validity bits (LSB first), int32 offsets and the bytes. */
typedef struct {
    Buf valid, offsets, data;
    Py_ssize_t nulls;
} Binary;

static int binary_add(Binary *c, Py_ssize_t row, const uint8_t *p, Py_ssize_t n, int present) {
    if ((row & 7) == 0) {
        uint8_t zero = 0;
        if (buf_put(&c->valid, &zero, 1) < 0) return -1;
    }
    if (present) {
        c->valid.data[row >> 3] |= (char)(1 << (row & 7));
        if (buf_put(&c->data, p, n) < 0) return -1;
    } else {
        c->nulls++;
    }
    return put_offset(&c->offsets, c->data.len);
}

/* Every buffer the function returns, in its order. */
typedef struct {
    Binary key, value;
    Buf ledger, entry, publish, event;
    Buf map_offsets, pkey_offsets, pkey_data, pval_offsets, pval_data;
} Columns;

#define NBUFS 15

static void bufs(Columns *c, Buf **out) {
    Buf *all[NBUFS] = {&c->key.valid, &c->key.offsets, &c->key.data, &c->value.valid,
                       &c->value.offsets, &c->value.data, &c->ledger, &c->entry, &c->publish,
                       &c->event, &c->map_offsets, &c->pkey_offsets, &c->pkey_data,
                       &c->pval_offsets, &c->pval_data};
    memcpy(out, all, sizeof all);
}

/* One properties map entry (field 1 key, field 2 value; absent: ""), a later one wins. */
static int add_property(Columns *c, const uint8_t *buf, Py_ssize_t p, Py_ssize_t end) {
    Py_ssize_t ks = p, ke = p, vs = p, ve = p;
    Field f;
    while (p < end) {
        if (read_field(buf, &p, end, &f) < 0) return -1;
        if (f.wire != 2) continue;
        if (f.number == 1) ks = f.start, ke = f.end;
        else if (f.number == 2) vs = f.start, ve = f.end;
    }
    if (buf_put(&c->pkey_data, buf + ks, ke - ks) < 0) return -1;
    if (put_offset(&c->pkey_offsets, c->pkey_data.len) < 0) return -1;
    if (buf_put(&c->pval_data, buf + vs, ve - vs) < 0) return -1;
    return put_offset(&c->pval_offsets, c->pval_data.len);
}

/* The fields of one Message [p, end) after its id: key, value, properties, times. */
static int add_message(Columns *c, Py_ssize_t row, const uint8_t *buf, Py_ssize_t p,
                       Py_ssize_t end, uint64_t ledger, uint64_t entry) {
    Py_ssize_t ks = -1, ke = -1, vs = -1, ve = -1;
    uint64_t publish = 0, event = 0;
    Py_ssize_t q = p;
    Field f;
    while (q < end) {
        if (read_field(buf, &q, end, &f) < 0) return -1;
        if (f.wire == 2 && f.number == 2) ks = f.start, ke = f.end;
        else if (f.wire == 2 && f.number == 3) vs = f.start, ve = f.end;
        else if (f.wire == 2 && f.number == 4) {
            if (add_property(c, buf, f.start, f.end) < 0) return -1;
        } else if (f.wire == 0 && (f.number == 5 || f.number == 6)) {
            Py_ssize_t at = f.at;
            if (read_varint(buf, &at, f.end, f.number == 5 ? &publish : &event) < 0) return -1;
        }
    }
    int64_t publish_us = (int64_t)publish * 1000;
    int64_t event_us = event ? (int64_t)event * 1000 : publish_us;
    if (binary_add(&c->key, row, ks >= 0 ? buf + ks : buf, ke - ks, ks >= 0) < 0 ||
        binary_add(&c->value, row, vs >= 0 ? buf + vs : buf, ve - vs, vs >= 0) < 0 ||
        put_i64(&c->ledger, (int64_t)ledger) < 0 || put_i64(&c->entry, (int64_t)entry) < 0 ||
        put_i64(&c->publish, publish_us) < 0 || put_i64(&c->event, event_us) < 0)
        return -1;
    return put_offset(&c->map_offsets, c->pkey_offsets.len / 4 - 1);
}

/* The messages of `buf` before `end`; returns the rows taken, sets *stopped when a
 * message at or past the end was met, and the last id taken. -1 on a malformed one. */
static Py_ssize_t walk(Columns *c, const uint8_t *buf, Py_ssize_t len, uint64_t end_ledger,
                       uint64_t end_entry, int *stopped, uint64_t *last_ledger,
                       uint64_t *last_entry) {
    Py_ssize_t p = 0, row = 0;
    Field f;
    while (p < len) {
        if (read_field(buf, &p, len, &f) < 0) return -1;
        if (f.number != 1 || f.wire != 2) continue; /* ReadResponse holds messages only */
        uint64_t ledger = 0, entry = 0;
        Py_ssize_t q = f.start;
        Field g;
        while (q < f.end) { /* the id, wherever it is (a later one wins, as in protobuf) */
            if (read_field(buf, &q, f.end, &g) < 0) return -1;
            if (g.number == 1 && g.wire == 2 && parse_id(buf, g.start, g.end, &ledger, &entry) < 0)
                return -1;
        }
        if (ledger > end_ledger || (ledger == end_ledger && entry >= end_entry)) {
            *stopped = 1;
            break;
        }
        if (add_message(c, row, buf, f.start, f.end, ledger, entry) < 0) return -1;
        *last_ledger = ledger, *last_entry = entry;
        row++;
    }
    return row;
}

static PyObject *columns(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long end_ledger, end_entry;
    if (!PyArg_ParseTuple(args, "y*KK", &view, &end_ledger, &end_entry)) return NULL;
    Columns c;
    memset(&c, 0, sizeof c);
    Buf *all[NBUFS];
    bufs(&c, all);
    PyObject *out = NULL;
    int stopped = 0;
    uint64_t last_ledger = 0, last_entry = 0;
    if (put_offset(&c.key.offsets, 0) < 0 || put_offset(&c.value.offsets, 0) < 0 ||
        put_offset(&c.map_offsets, 0) < 0 || put_offset(&c.pkey_offsets, 0) < 0 ||
        put_offset(&c.pval_offsets, 0) < 0)
        goto done;
    Py_ssize_t rows = walk(&c, view.buf, view.len, end_ledger, end_entry, &stopped,
                           &last_ledger, &last_entry);
    if (rows < 0) goto done;
    out = PyTuple_New(7 + NBUFS);
    if (!out) goto done;
    PyObject *head[7] = {PyLong_FromSsize_t(rows), PyBool_FromLong(stopped),
                         PyLong_FromUnsignedLongLong(last_ledger),
                         PyLong_FromUnsignedLongLong(last_entry),
                         PyLong_FromSsize_t(c.key.nulls), PyLong_FromSsize_t(c.value.nulls),
                         PyLong_FromSsize_t(c.pkey_offsets.len / 4 - 1)};
    for (int i = 0; i < 7; i++) {
        if (!head[i]) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, i, head[i]);
    }
    for (int i = 0; i < NBUFS; i++) {
        PyObject *b = PyBytes_FromStringAndSize(all[i]->data ? all[i]->data : "", all[i]->len);
        if (!b) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, 7 + i, b);
    }
done:
    for (int i = 0; i < NBUFS; i++) PyMem_Free(all[i]->data);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "A ReadResponse's messages as column buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_columns", NULL, -1, methods};

PyMODINIT_FUNC PyInit__columns(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *py = PyImport_ImportModule("compactlog.spark._columns_py");
    if (!py) {
        Py_DECREF(m);
        return NULL;
    }
    MalformedResponse = PyObject_GetAttrString(py, "MalformedResponse");
    Py_DECREF(py);
    if (!MalformedResponse ||
        PyModule_AddObjectRef(m, "MalformedResponse", MalformedResponse) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return twin_stamped(m);
}
