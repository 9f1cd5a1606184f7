/* The compiled twin of client/_publish_py.py: send_async's per-message work in C.
 *
 * append() writes one record into the pending PublishRequest's bytes (a bytearray that
 * starts with the topic field), so a message costs no protobuf object and no Python
 * container; call_back() hands each message of an answered request its MessageId, built
 * from the reply's first id and the message's place, as it calls the message's callback.
 * Both behave exactly as the pure twin does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_twin_stamp.h"

static Py_ssize_t varint_len(uint64_t n) {
    Py_ssize_t len = 1;
    while (n >= 0x80) { n >>= 7; len++; }
    return len;
}

static unsigned char *put_varint(unsigned char *out, uint64_t n) {
    while (n >= 0x80) { *out++ = (unsigned char)((n & 0x7F) | 0x80); n >>= 7; }
    *out++ = (unsigned char)n;
    return out;
}

/* A bytes field (tag, length, bytes) at out; a NULL field writes nothing. */
static unsigned char *put_field(unsigned char *out, unsigned char tag, const char *data,
                                Py_ssize_t len) {
    if (!data) return out;
    *out++ = tag;
    out = put_varint(out, (uint64_t)len);
    memcpy(out, data, (size_t)len);
    return out + len;
}

/* bytes or None: its buffer and length (data NULL for None); -1 with TypeError else. */
static int bytes_or_none(PyObject *obj, const char **data, Py_ssize_t *len, const char *what) {
    if (obj == Py_None) { *data = NULL; *len = 0; return 0; }
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes or None, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *data = PyBytes_AS_STRING(obj);
    *len = PyBytes_GET_SIZE(obj);
    return 0;
}

/* append(buf, key, value) -> len(key) + len(value): one PublishRequest.records entry. */
static PyObject *append(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "append(buf, key, value)");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "append: buf must be a bytearray");
        return NULL;
    }
    const char *key, *value;
    Py_ssize_t klen, vlen;
    if (bytes_or_none(args[1], &key, &klen, "a key") < 0 ||
        bytes_or_none(args[2], &value, &vlen, "a value") < 0)
        return NULL;
    Py_ssize_t record = (key ? 1 + varint_len((uint64_t)klen) + klen : 0) +
                        (value ? 1 + varint_len((uint64_t)vlen) + vlen : 0);
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    Py_ssize_t added = 1 + varint_len((uint64_t)record) + record;
    if (PyByteArray_Resize(buf, old + added) < 0) return NULL;
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(buf) + old;
    *out++ = 0x12;  /* PublishRequest.records, length-delimited */
    out = put_varint(out, (uint64_t)record);
    out = put_field(out, 0x0a, key, klen);  /* Record.key */
    put_field(out, 0x12, value, vlen);      /* Record.value */
    return PyLong_FromSsize_t(klen + vlen);
}

/* The MessageId (a tuple subclass) (ledger, entry), as tuple.__new__(cls, pair) makes it. */
static PyObject *message_id(PyTypeObject *cls, PyObject *ledger, long long entry) {
    PyObject *e = PyLong_FromLongLong(entry);
    if (!e) return NULL;
    PyObject *mid = cls->tp_alloc(cls, 2);
    if (!mid) { Py_DECREF(e); return NULL; }
    Py_INCREF(ledger);
    PyTuple_SET_ITEM(mid, 0, ledger);
    PyTuple_SET_ITEM(mid, 1, e);
    return mid;
}

/* call_back(callbacks, start, result, ledger, first, cls) -> (next, error):
 * callbacks[i](result, cls(ledger, first + i)) for i from start, in order. When one raises
 * (an Exception), stops after it: next is the index after it, error the exception (with its
 * traceback) for the caller to log; else next is len(callbacks) and error None. */
static PyObject *call_back(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyType_Check(args[5]) ||
        !PyType_IsSubtype((PyTypeObject *)args[5], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "call_back(callbacks: list, start, result, ledger, first, cls)");
        return NULL;
    }
    PyObject *callbacks = args[0], *result = args[2], *ledger = args[3];
    PyTypeObject *cls = (PyTypeObject *)args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    long long first = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    for (Py_ssize_t i = start; i < PyList_GET_SIZE(callbacks); i++) {
        PyObject *mid = message_id(cls, ledger, first + i);
        if (!mid) return NULL;
        PyObject *callback = PyList_GET_ITEM(callbacks, i);
        Py_INCREF(callback);
        PyObject *call_args[2] = {result, mid};
        PyObject *out = PyObject_Vectorcall(callback, call_args, 2, NULL);
        Py_DECREF(callback);
        Py_DECREF(mid);
        if (out) { Py_DECREF(out); continue; }
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        PyObject *pair = Py_BuildValue("(nN)", i + 1, value);
        return pair;
    }
    return Py_BuildValue("(nO)", PyList_GET_SIZE(callbacks), Py_None);
}

static PyMethodDef methods[] = {
    {"append", (PyCFunction)(void (*)(void))append, METH_FASTCALL,
     "append(buf, key, value) -> len(key) + len(value)"},
    {"call_back", (PyCFunction)(void (*)(void))call_back, METH_FASTCALL,
     "call_back(callbacks, start, result, ledger, first, cls) -> (next, error)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_publish", NULL, -1, methods};

PyMODINIT_FUNC PyInit__publish(void) { return twin_stamped(PyModule_Create(&module)); }
