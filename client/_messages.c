/* The compiled twin of client/_messages_py.py: the read side's per-message loop in C.
 *
 * messages_of(batch, topic) makes one Message per entry of a response's repeated field,
 * holding the field, the entry's index and the topic in the class's slots (_batch, _at,
 * _topic), as the pure twin does with attribute stores; every other slot stays unset, so
 * Message converts each field on first use. bind(cls) names the class and finds its slots'
 * offsets from their member descriptors (a slotted class's layout), once.
 *
 * The messages are not tracked by the garbage collector: a response's thousand messages
 * would otherwise set off a collection per response and, as they outlive it in the
 * consumer's buffer, push them into the older generations until a full collection walks
 * the whole heap (half the main thread's time in a batch_receive loop). A message cannot
 * be part of a cycle: its slots hold the response's field, the topic, its index and the
 * fields it converts (bytes, a MessageId, a dict of strings), none of which refers back.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_twin_stamp.h"

static PyTypeObject *message_type; /* bound class, NULL until bind() */
static Py_ssize_t off_batch, off_at, off_topic;

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

static PyObject *bind(PyObject *module, PyObject *cls) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes a class");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t batch = slot_offset(type, "_batch"), at = slot_offset(type, "_at"),
               topic = slot_offset(type, "_topic");
    if (batch < 0 || at < 0 || topic < 0) return NULL;
    Py_XSETREF(message_type, (PyTypeObject *)Py_NewRef(cls));
    off_batch = batch, off_at = at, off_topic = topic;
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
        if (PyObject_IS_GC(msg)) PyObject_GC_UnTrack(msg);
        PyList_SET_ITEM(out, i, msg);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "bind(cls): the class messages_of builds"},
    {"messages_of", (PyCFunction)(void (*)(void))messages_of, METH_FASTCALL,
     "messages_of(batch, topic) -> [Message]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_messages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__messages(void) { return twin_stamped(PyModule_Create(&module)); }
