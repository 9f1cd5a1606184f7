/* The compiled twin of client/_messages_py.py: the read side's per-message loop in C.
 *
 * messages_of(batch, topic) makes one Message per entry of a response's repeated field,
 * holding the field, the entry's index and the topic in the class's slots (_batch, _at,
 * _topic), as the pure twin does with attribute stores, and the marker `unset` in each slot
 * named in `lazy`, so Message converts each field on first use (a test of identity, where
 * an empty slot's AttributeError cost a microsecond a field). bind(cls, unset, lazy) names
 * the class, the marker and those slots, and finds the slots' offsets from their member
 * descriptors (a slotted class's layout), once.
 *
 * The messages are not tracked by the garbage collector: a response's thousand messages
 * would otherwise set off a collection per response and, as they outlive it in the
 * consumer's buffer, push them into the older generations until a full collection walks
 * the whole heap (half the main thread's time in a batch_receive loop). A message cannot
 * be part of a cycle: its slots hold the response's field, the topic, its index and the
 * fields it converts (bytes, a MessageId, a dict of strings), none of which refers back.
 *
 * wire_ids(items) is the acknowledge side's loop: the wire id (pb MessageId) of each queued
 * message, read from its slots (_wire, else, while that holds the marker, _batch[_at]); an item that is not a message (a wire id already) is passed through.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_twin_stamp.h"

#define MAX_LAZY 8

static PyTypeObject *message_type; /* bound class, NULL until bind() */
static PyObject *unset;            /* the marker of a field not converted yet */
static Py_ssize_t off_batch, off_at, off_topic, off_wire, off_lazy[MAX_LAZY], n_lazy;
static PyObject *str_id; /* "id", interned */

/* The offset of cls's object slot `name`; -1 with TypeError when it has none. */
static Py_ssize_t slot_offset(PyTypeObject *cls, const char *name) {
    PyObject *descr = PyDict_GetItemString(cls->tp_dict, name); /* borrowed */
    if (!descr || !PyObject_TypeCheck(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%.100s has no slot %s", cls->tp_name, name);
        return -1;
    }
    return ((PyMemberDescrObject *)descr)->d_member->offset;
}

static PyObject *bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_Check(args[2]) ||
        PyTuple_GET_SIZE(args[2]) > MAX_LAZY) {
        PyErr_SetString(PyExc_TypeError, "bind(cls, unset, lazy): a class, a marker, a tuple "
                                         "of at most 8 slot names");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t batch = slot_offset(type, "_batch"), at = slot_offset(type, "_at"),
               topic = slot_offset(type, "_topic"), wire = slot_offset(type, "_wire"),
               lazy[MAX_LAZY];
    if (batch < 0 || at < 0 || topic < 0 || wire < 0) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args[2]);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(args[2], i));
        if (!name || (lazy[i] = slot_offset(type, name)) < 0) return NULL;
    }
    Py_XSETREF(message_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(unset, Py_NewRef(args[1]));
    off_batch = batch, off_at = at, off_topic = topic, off_wire = wire, n_lazy = n;
    memcpy(off_lazy, lazy, sizeof(Py_ssize_t) * (size_t)n);
    Py_RETURN_NONE;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static PyObject *messages_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "messages_of(batch, topic)");
        return NULL;
    }
    if (!message_type) {
        PyErr_SetString(PyExc_RuntimeError, "messages_of before bind");
        return NULL;
    }
    PyObject *batch = args[0], *topic = args[1];
    Py_ssize_t count = PyObject_Length(batch);
    if (count < 0) return NULL;
    PyObject *out = PyList_New(count);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *at = PyLong_FromSsize_t(i);
        PyObject *msg = at ? message_type->tp_alloc(message_type, 0) : NULL;
        if (!msg) {
            Py_XDECREF(at);
            Py_DECREF(out);
            return NULL;
        }
        SLOT(msg, off_batch) = Py_NewRef(batch); /* tp_alloc zeroed every slot */
        SLOT(msg, off_at) = at;
        SLOT(msg, off_topic) = Py_NewRef(topic);
        for (Py_ssize_t j = 0; j < n_lazy; j++) SLOT(msg, off_lazy[j]) = Py_NewRef(unset);
        if (PyObject_IS_GC(msg)) PyObject_GC_UnTrack(msg);
        PyList_SET_ITEM(out, i, msg);
    }
    return out;
}

/* The wire id of one message: its _wire's id, else its response's entry's. */
static PyObject *wire_id_of(PyObject *msg) {
    PyObject *wire = SLOT(msg, off_wire), *batch = SLOT(msg, off_batch), *at = SLOT(msg, off_at);
    if (wire && wire != unset) return PyObject_GetAttr(wire, str_id);
    if (!batch || batch == Py_None || !at) {
        PyErr_SetString(PyExc_ValueError, "a message built from its fields has no wire id");
        return NULL;
    }
    PyObject *entry = PyObject_GetItem(batch, at);
    if (!entry) return NULL;
    PyObject *id = PyObject_GetAttr(entry, str_id);
    Py_DECREF(entry);
    return id;
}

static PyObject *wire_ids(PyObject *module, PyObject *items) {
    if (!message_type) {
        PyErr_SetString(PyExc_RuntimeError, "wire_ids before bind");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(items, "wire_ids takes an iterable");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out && i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *id = Py_TYPE(item) == message_type ? wire_id_of(item) : Py_NewRef(item);
        if (!id) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, id);
    }
    Py_DECREF(seq);
    return out;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(cls, unset, lazy): the class messages_of builds, its marker and lazy slots"},
    {"messages_of", (PyCFunction)(void (*)(void))messages_of, METH_FASTCALL,
     "messages_of(batch, topic) -> [Message]"},
    {"wire_ids", wire_ids, METH_O, "wire_ids(items) -> [pb MessageId]: each message's wire id"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_messages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__messages(void) {
    str_id = PyUnicode_InternFromString("id");
    if (!str_id) return NULL;
    return twin_stamped(PyModule_Create(&module));
}
