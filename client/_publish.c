/* The compiled twin of client/_publish_py.py: send_async's per-message work in C.
 *
 * A Pending holds a producer's queued messages as the bytes of the PublishStream requests
 * they will go in (each begins with the topic field, ``head``) and one callback list per
 * request: add() writes a message's record into the pending request, sealing it first when
 * the message would take it past max_bytes and after when it holds max_messages or
 * max_bytes; take() hands out the oldest request. Each call runs whole under the GIL, so
 * the queue needs no lock of its own; the producer's condition only wakes its threads
 * (the flags add() returns say when), and after close() add() adds nothing and says so. call_back() hands each message of an answered
 * request its MessageId, built from the reply's first id and the message's place, as it
 * calls the message's callback; call_back_ids does so from each wire id of a reply whose ids
 * do not run (a partitioned topic's). Both behave exactly as the pure twin does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

#include "_twin_stamp.h"

#define WAKE 1    /* a request has its first message, or one was sealed */
#define CROWDED 2 /* `crowded` messages are not called back yet */
#define CLOSED 4  /* closed: nothing was added */

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

typedef struct {
    PyObject_HEAD
    PyObject *head;      /* bytes: PublishRequest.topic, every request's start */
    PyObject *buf;       /* bytearray: the pending request */
    PyObject *callbacks; /* list: its messages' callbacks */
    PyObject *sealed;    /* list of (bytearray, list): full requests, oldest first */
    Py_ssize_t bytes;    /* the pending request's keys' and values' bytes */
    Py_ssize_t max_messages, max_bytes, crowded;
    Py_ssize_t added;      /* messages ever added */
    Py_ssize_t unanswered; /* added and not yet answered */
    int closed;            /* close() was called: add() adds nothing */
} Pending;

static int pending_traverse(Pending *p, visitproc visit, void *arg) {
    Py_VISIT(p->callbacks);
    Py_VISIT(p->sealed);
    return 0;
}

static int pending_clear(Pending *p) {
    Py_CLEAR(p->head);
    Py_CLEAR(p->buf);
    Py_CLEAR(p->callbacks);
    Py_CLEAR(p->sealed);
    return 0;
}

static void pending_dealloc(Pending *p) {
    PyObject_GC_UnTrack(p);
    pending_clear(p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* A fresh pending request (the head alone, no callbacks); 0, or -1 with an error. */
static int pending_fresh(Pending *p) {
    PyObject *buf = PyByteArray_FromObject(p->head);
    PyObject *callbacks = PyList_New(0);
    if (!buf || !callbacks) { Py_XDECREF(buf); Py_XDECREF(callbacks); return -1; }
    Py_XSETREF(p->buf, buf);
    Py_XSETREF(p->callbacks, callbacks);
    p->bytes = 0;
    return 0;
}

static int pending_init(Pending *p, PyObject *args, PyObject *kwds) {
    static char *names[] = {"head", "max_messages", "max_bytes", "crowded", NULL};
    PyObject *head;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Snnn", names, &head, &p->max_messages,
                                     &p->max_bytes, &p->crowded))
        return -1;
    Py_INCREF(head);
    Py_XSETREF(p->head, head);
    PyObject *sealed = PyList_New(0);
    if (!sealed) return -1;
    Py_XSETREF(p->sealed, sealed);
    p->added = p->unanswered = 0;
    p->closed = 0;
    return pending_fresh(p);
}

/* The pending request joins the sealed ones; a fresh one is pending. */
static int pending_seal(Pending *p) {
    PyObject *full = PyTuple_Pack(2, p->buf, p->callbacks);
    if (!full) return -1;
    int failed = PyList_Append(p->sealed, full);
    Py_DECREF(full);
    return failed ? -1 : pending_fresh(p);
}

/* One record (its body from key and value, or `encoded` already) of `size` key and value
 * bytes, with its callback; the flags (WAKE, CROWDED), or -1 with an error. */
static int pending_put(Pending *p, const char *key, Py_ssize_t klen, const char *value,
                       Py_ssize_t vlen, const char *encoded, Py_ssize_t elen, Py_ssize_t size,
                       PyObject *callback) {
    if (p->closed) return CLOSED;
    int flags = 0;
    if (PyList_GET_SIZE(p->callbacks) && p->bytes + size > p->max_bytes) {
        if (pending_seal(p) < 0) return -1;
        flags |= WAKE;
    }
    Py_ssize_t record = encoded ? elen
                                : (key ? 1 + varint_len((uint64_t)klen) + klen : 0) +
                                      (value ? 1 + varint_len((uint64_t)vlen) + vlen : 0);
    Py_ssize_t old = PyByteArray_GET_SIZE(p->buf);
    Py_ssize_t added = 1 + varint_len((uint64_t)record) + record;
    if (PyList_Append(p->callbacks, callback) < 0) return -1;
    if (PyByteArray_Resize(p->buf, old + added) < 0) {
        Py_ssize_t n = PyList_GET_SIZE(p->callbacks);
        PyList_SetSlice(p->callbacks, n - 1, n, NULL);
        return -1;
    }
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(p->buf) + old;
    *out++ = 0x12; /* PublishRequest.records, length-delimited */
    out = put_varint(out, (uint64_t)record);
    if (encoded) {
        memcpy(out, encoded, (size_t)elen);
    } else {
        out = put_field(out, 0x0a, key, klen); /* Record.key */
        put_field(out, 0x12, value, vlen);     /* Record.value */
    }
    p->bytes += size;
    p->added++;
    p->unanswered++;
    Py_ssize_t count = PyList_GET_SIZE(p->callbacks);
    if (count == 1) flags |= WAKE;
    if (count >= p->max_messages || p->bytes >= p->max_bytes) {
        if (pending_seal(p) < 0) return -1;
        flags |= WAKE;
    }
    if (p->unanswered >= p->crowded) flags |= CROWDED;
    return flags;
}

static PyObject *pending_add(Pending *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add(key, value, callback)");
        return NULL;
    }
    const char *key, *value;
    Py_ssize_t klen, vlen;
    if (bytes_or_none(args[0], &key, &klen, "a key") < 0 ||
        bytes_or_none(args[1], &value, &vlen, "a value") < 0)
        return NULL;
    int flags = pending_put(p, key, klen, value, vlen, NULL, 0, klen + vlen, args[2]);
    return flags < 0 ? NULL : PyLong_FromLong(flags);
}

static PyObject *pending_add_encoded(Pending *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "add_encoded(record: bytes, size, callback)");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred()) return NULL;
    int flags = pending_put(p, NULL, 0, NULL, 0, PyBytes_AS_STRING(args[0]),
                            PyBytes_GET_SIZE(args[0]), size, args[2]);
    return flags < 0 ? NULL : PyLong_FromLong(flags);
}

/* take() -> (bytes, callbacks) of the oldest request (sealed, else the pending one), or
 * None when nothing waits. */
static PyObject *pending_take(Pending *p, PyObject *unused) {
    PyObject *buf, *callbacks;
    if (PyList_GET_SIZE(p->sealed)) {
        PyObject *full = PyList_GET_ITEM(p->sealed, 0);
        buf = PyTuple_GET_ITEM(full, 0);
        callbacks = PyTuple_GET_ITEM(full, 1);
    } else if (PyList_GET_SIZE(p->callbacks)) {
        buf = p->buf;
        callbacks = p->callbacks;
    } else {
        Py_RETURN_NONE;
    }
    PyObject *data = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf),
                                               PyByteArray_GET_SIZE(buf));
    if (!data) return NULL;
    PyObject *out = PyTuple_Pack(2, data, callbacks);
    Py_DECREF(data);
    if (!out) return NULL;
    int failed = PyList_GET_SIZE(p->sealed) ? PyList_SetSlice(p->sealed, 0, 1, NULL)
                                            : pending_fresh(p);
    if (failed) { Py_DECREF(out); return NULL; }
    return out;
}

static PyObject *pending_answered(Pending *p, PyObject *count) {
    Py_ssize_t n = PyLong_AsSsize_t(count);
    if (n == -1 && PyErr_Occurred()) return NULL;
    p->unanswered -= n;
    Py_RETURN_NONE;
}

static PyObject *pending_close(Pending *p, PyObject *unused) {
    p->closed = 1;
    Py_RETURN_NONE;
}

static PyObject *pending_waiting(Pending *p, void *unused) {
    return PyBool_FromLong(PyList_GET_SIZE(p->sealed) || PyList_GET_SIZE(p->callbacks));
}

static PyObject *pending_full(Pending *p, void *unused) {
    return PyBool_FromLong(PyList_GET_SIZE(p->sealed) > 0);
}

static PyMethodDef pending_methods[] = {
    {"add", (PyCFunction)(void (*)(void))pending_add, METH_FASTCALL,
     "add(key, value, callback) -> flags (WAKE, CROWDED)"},
    {"add_encoded", (PyCFunction)(void (*)(void))pending_add_encoded, METH_FASTCALL,
     "add_encoded(record, size, callback) -> flags: a Record already serialized"},
    {"take", (PyCFunction)pending_take, METH_NOARGS,
     "take() -> (bytes, callbacks) of the oldest request, or None"},
    {"answered", (PyCFunction)pending_answered, METH_O, "answered(count): called back"},
    {"close", (PyCFunction)pending_close, METH_NOARGS, "close(): later adds add nothing"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef pending_members[] = {
    {"added", T_PYSSIZET, offsetof(Pending, added), READONLY, "messages ever added"},
    {"unanswered", T_PYSSIZET, offsetof(Pending, unanswered), READONLY,
     "messages added and not yet answered"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef pending_getset[] = {
    {"waiting", (getter)pending_waiting, NULL, "a request waits to be taken", NULL},
    {"full", (getter)pending_full, NULL, "a sealed request waits to be taken", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PendingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "compactlog.client._publish.Pending",
    .tp_basicsize = sizeof(Pending),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Pending(head, max_messages, max_bytes, crowded): queued messages as requests",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)pending_init,
    .tp_dealloc = (destructor)pending_dealloc,
    .tp_traverse = (traverseproc)pending_traverse,
    .tp_clear = (inquiry)pending_clear,
    .tp_methods = pending_methods,
    .tp_members = pending_members,
    .tp_getset = pending_getset,
};

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

/* callbacks[i](result, mid), taking mid. 0 when it returned; 1 when it raised an Exception,
 * which *error then holds (with its traceback) for the caller to log; -1 on anything else. */
static int call_one(PyObject *callbacks, Py_ssize_t i, PyObject *result, PyObject *mid,
                    PyObject **error) {
    PyObject *callback = PyList_GET_ITEM(callbacks, i);
    Py_INCREF(callback);
    PyObject *call_args[2] = {result, mid};
    PyObject *out = PyObject_Vectorcall(callback, call_args, 2, NULL);
    Py_DECREF(callback);
    Py_DECREF(mid);
    if (out) { Py_DECREF(out); return 0; }
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    *error = value;
    return 1;
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
    PyObject *callbacks = args[0], *result = args[2], *ledger = args[3], *error = NULL;
    PyTypeObject *cls = (PyTypeObject *)args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    long long first = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    for (Py_ssize_t i = start; i < PyList_GET_SIZE(callbacks); i++) {
        PyObject *mid = message_id(cls, ledger, first + i);
        if (!mid) return NULL;
        int called = call_one(callbacks, i, result, mid, &error);
        if (called < 0) return NULL;
        if (called) return Py_BuildValue("(nN)", i + 1, error);
    }
    return Py_BuildValue("(nO)", PyList_GET_SIZE(callbacks), Py_None);
}

static PyObject *str_ledger_id, *str_entry_id, *str_partition, *str__partition;

/* The MessageId of a wire id (ledger_id, entry_id, partition), as MessageId._of_wire makes
 * it: the pair, and _partition set on it when not 0. */
static PyObject *wire_message_id(PyTypeObject *cls, PyObject *wire) {
    PyObject *ledger = PyObject_GetAttr(wire, str_ledger_id);
    if (!ledger) return NULL;
    PyObject *entry = PyObject_GetAttr(wire, str_entry_id);
    PyObject *partition = entry ? PyObject_GetAttr(wire, str_partition) : NULL;
    PyObject *mid = partition ? cls->tp_alloc(cls, 2) : NULL;
    if (!mid) {
        Py_DECREF(ledger);
        Py_XDECREF(entry);
        Py_XDECREF(partition);
        return NULL;
    }
    PyTuple_SET_ITEM(mid, 0, ledger);
    PyTuple_SET_ITEM(mid, 1, entry);
    int is_set = PyObject_IsTrue(partition);
    if (is_set && (is_set < 0 || PyObject_SetAttr(mid, str__partition, partition) < 0)) {
        Py_DECREF(partition);
        Py_DECREF(mid);
        return NULL;
    }
    Py_DECREF(partition);
    return mid;
}

/* call_back_ids(callbacks, start, result, ids, cls) -> (next, error): call_back for a
 * reply whose ids do not run (a partitioned topic's): callbacks[i](result, the MessageId of
 * ids[i]), reading each wire id's ledger_id, entry_id and partition. */
static PyObject *call_back_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyList_CheckExact(args[0]) || !PyType_Check(args[4]) ||
        !PyType_IsSubtype((PyTypeObject *)args[4], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "call_back_ids(callbacks: list, start, result, ids, cls)");
        return NULL;
    }
    PyObject *callbacks = args[0], *result = args[2], *ids = args[3], *error = NULL;
    PyTypeObject *cls = (PyTypeObject *)args[4];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t count = PySequence_Size(ids);
    if (count < 0) return NULL;
    if (count != PyList_GET_SIZE(callbacks)) {
        PyErr_SetString(PyExc_ValueError, "call_back_ids: one id a callback");
        return NULL;
    }
    for (Py_ssize_t i = start; i < count; i++) {
        PyObject *wire = PySequence_GetItem(ids, i);
        if (!wire) return NULL;
        PyObject *mid = wire_message_id(cls, wire);
        Py_DECREF(wire);
        if (!mid) return NULL;
        int called = call_one(callbacks, i, result, mid, &error);
        if (called < 0) return NULL;
        if (called) return Py_BuildValue("(nN)", i + 1, error);
    }
    return Py_BuildValue("(nO)", count, Py_None);
}

static PyMethodDef methods[] = {
    {"call_back", (PyCFunction)(void (*)(void))call_back, METH_FASTCALL,
     "call_back(callbacks, start, result, ledger, first, cls) -> (next, error)"},
    {"call_back_ids", (PyCFunction)(void (*)(void))call_back_ids, METH_FASTCALL,
     "call_back_ids(callbacks, start, result, ids, cls) -> (next, error)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_publish", NULL, -1, methods};

PyMODINIT_FUNC PyInit__publish(void) {
    if (PyType_Ready(&PendingType) < 0) return NULL;
    if (!(str_ledger_id = PyUnicode_InternFromString("ledger_id")) ||
        !(str_entry_id = PyUnicode_InternFromString("entry_id")) ||
        !(str_partition = PyUnicode_InternFromString("partition")) ||
        !(str__partition = PyUnicode_InternFromString("_partition")))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Pending", (PyObject *)&PendingType) < 0 ||
        PyModule_AddIntConstant(m, "WAKE", WAKE) < 0 ||
        PyModule_AddIntConstant(m, "CROWDED", CROWDED) < 0 ||
        PyModule_AddIntConstant(m, "CLOSED", CLOSED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return twin_stamped(m);
}
