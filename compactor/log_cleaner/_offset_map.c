/* The offset map's per-key work, compiled: the twin of _offset_map_py.py.
 *
 * Functions over the map's two buffers, owned by offset_map.SkimpyOffsetMap (the table,
 * its probing and key digest are in _offset_table.h, shared with _batch_scan.c). A key costs one
 * call and no Python object.
 *
 *   exchange(hashes, offsets, key, value, can_add) -> previous value | -1 new | -2 full
 *   get(hashes, offsets, key) -> value | -1
 *   rehash(old_hashes, old_offsets, hashes, offsets) -> entries moved
 *   digest(key) -> the 16 bytes the map keeps for a key
 *   siphash128(key16, data) -> SipHash-2-4-128 under any key (its test vectors)
 */
#include "_offset_table.h"
#include "../../storage/_twin_stamp.h"

static int key_digest(PyObject *key, uint8_t digest[16]) {
    Py_buffer k;
    if (PyObject_GetBuffer(key, &k, PyBUF_SIMPLE) < 0) return -1;
    digest_key((const uint8_t *)k.buf, (size_t)k.len, digest);
    PyBuffer_Release(&k);
    return 0;
}

static PyObject *exchange(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "exchange(hashes, offsets, key, value, can_add)");
        return NULL;
    }
    long long value = PyLong_AsLongLong(args[3]);
    if (value == -1 && PyErr_Occurred()) return NULL;
    if (value < 0 || value == INT64_MAX) {
        PyErr_SetString(PyExc_ValueError, "offset map values are 0 .. 2**63 - 2");
        return NULL;
    }
    int can_add = PyObject_IsTrue(args[4]);
    if (can_add < 0) return NULL;
    uint8_t digest[16];
    if (key_digest(args[2], digest) < 0) return NULL;
    Table t;
    if (table_open(&t, args[0], args[1]) < 0) return NULL;
    uint8_t *hashes = (uint8_t *)t.hashes.buf;
    int64_t *offsets = (int64_t *)t.offsets.buf;
    long long old = table_exchange(hashes, offsets, t.slots, digest, value, can_add);
    table_close(&t);
    return PyLong_FromLongLong(old);
}

static PyObject *get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "get(hashes, offsets, key)");
        return NULL;
    }
    uint8_t digest[16];
    if (key_digest(args[2], digest) < 0) return NULL;
    Table t;
    if (table_open(&t, args[0], args[1]) < 0) return NULL;
    const int64_t *offsets = (const int64_t *)t.offsets.buf;
    Py_ssize_t slot = find((const uint8_t *)t.hashes.buf, offsets, t.slots, digest);
    long long value = slot >= 0 ? offsets[slot] - 1 : -1;
    table_close(&t);
    return PyLong_FromLongLong(value);
}

static PyObject *rehash(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "rehash(old_hashes, old_offsets, hashes, offsets)");
        return NULL;
    }
    Table old, t;
    if (table_open(&old, args[0], args[1]) < 0) return NULL;
    if (table_open(&t, args[2], args[3]) < 0) {
        table_close(&old);
        return NULL;
    }
    const uint8_t *old_hashes = (const uint8_t *)old.hashes.buf;
    const int64_t *old_offsets = (const int64_t *)old.offsets.buf;
    uint8_t *hashes = (uint8_t *)t.hashes.buf;
    int64_t *offsets = (int64_t *)t.offsets.buf;
    Py_ssize_t moved = 0;
    for (Py_ssize_t s = 0; s < old.slots; s++) {
        if (!old_offsets[s]) continue;
        const uint8_t *digest = old_hashes + ((size_t)s << 4);
        Py_ssize_t at = find(hashes, offsets, t.slots, digest);
        if (at < 0) {
            table_close(&old);
            table_close(&t);
            PyErr_SetString(PyExc_ValueError, "offset map: the new table is too small");
            return NULL;
        }
        memcpy(hashes + ((size_t)at << 4), digest, 16);
        offsets[at] = old_offsets[s];
        moved++;
    }
    table_close(&old);
    table_close(&t);
    return PyLong_FromSsize_t(moved);
}

static PyObject *digest(PyObject *self, PyObject *key) {
    uint8_t out[16];
    if (key_digest(key, out) < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

static PyObject *siphash(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "siphash128(key16, data)");
        return NULL;
    }
    Py_buffer k, d;
    if (PyObject_GetBuffer(args[0], &k, PyBUF_SIMPLE) < 0) return NULL;
    if (k.len != 16) {
        PyBuffer_Release(&k);
        PyErr_SetString(PyExc_ValueError, "a SipHash key is 16 bytes");
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &d, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&k);
        return NULL;
    }
    uint8_t out[16];
    siphash128((const uint8_t *)k.buf, (const uint8_t *)d.buf, (size_t)d.len, out);
    PyBuffer_Release(&k);
    PyBuffer_Release(&d);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

static PyMethodDef methods[] = {
    {"exchange", (PyCFunction)(void (*)(void))exchange, METH_FASTCALL,
     "Map a key to a value; its previous value, -1 (new) or -2 (full)."},
    {"get", (PyCFunction)(void (*)(void))get, METH_FASTCALL, "A key's value, or -1."},
    {"rehash", (PyCFunction)(void (*)(void))rehash, METH_FASTCALL,
     "Move every entry of a table into a larger, empty one."},
    {"digest", digest, METH_O, "A key's digest, as the map keeps it."},
    {"siphash128", (PyCFunction)(void (*)(void))siphash, METH_FASTCALL,
     "SipHash-2-4 with a 128-bit output under a 16-byte key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_offset_map", NULL, -1, methods};

PyMODINIT_FUNC PyInit__offset_map(void) { return twin_stamped(PyModule_Create(&module)); }
