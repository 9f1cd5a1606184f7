/* The compiled twin of client/_messages_py.py: the read side's per-message loop in C.
 *
 * messages_of(batch, topic) makes one Message per entry of a response's repeated field,
 * holding the field, the entry's index and the topic in the class's slots (_batch, _at,
 * _topic), as the pure twin does with attribute stores; every other slot stays unset, so
 * Message converts each field on first use. bind(cls) names the class and finds its slots'
 * offsets from their member descriptors (a slotted class's layout), once.
 *
 * Receiver is a consumer's receive() while its buffer holds more than `low_water`
 * messages and no ack failure waits to be raised: the next message popped from the buffer
 * with no Python frame; in every other case it calls the consumer's own receive.
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

typedef struct {
    PyObject_HEAD
    PyObject *buffer;     /* collections.deque: the consumer's buffer */
    PyObject *popleft;    /* its popleft */
    PyObject *acks;       /* the AckQueue: its `failure` is None while none waits */
    PyObject *slow;       /* the consumer's receive, for everything else */
    Py_ssize_t low_water; /* more than this buffered: pop */
    vectorcallfunc vectorcall;
} Receiver;

static PyObject *str_failure;

static PyObject *receiver_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
    Receiver *r = (Receiver *)self;
    PyObject *failure = PyObject_GetAttr(r->acks, str_failure);
    if (!failure) return NULL;
    int none = failure == Py_None;
    Py_DECREF(failure);
    if (none) {
        Py_ssize_t len = PyObject_Length(r->buffer);
        if (len < 0) return NULL;
        if (len > r->low_water) return PyObject_CallNoArgs(r->popleft);
    }
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

static PyObject *receiver_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *buffer, *acks, *slow;
    Py_ssize_t low_water;
    static char *names[] = {"buffer", "acks", "slow", "low_water", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOn:Receiver", names, &buffer, &acks,
                                     &slow, &low_water))
        return NULL;
    PyObject *popleft = PyObject_GetAttrString(buffer, "popleft");
    if (!popleft) return NULL;
    Receiver *r = (Receiver *)type->tp_alloc(type, 0);
    if (!r) {
        Py_DECREF(popleft);
        return NULL;
    }
    r->buffer = Py_NewRef(buffer);
    r->popleft = popleft;
    r->acks = Py_NewRef(acks);
    r->slow = Py_NewRef(slow);
    r->low_water = low_water;
    r->vectorcall = receiver_vectorcall;
    return (PyObject *)r;
}

static int receiver_traverse(Receiver *r, visitproc visit, void *arg) {
    Py_VISIT(r->buffer);
    Py_VISIT(r->popleft);
    Py_VISIT(r->acks);
    Py_VISIT(r->slow);
    return 0;
}

static int receiver_clear(Receiver *r) {
    Py_CLEAR(r->buffer);
    Py_CLEAR(r->popleft);
    Py_CLEAR(r->acks);
    Py_CLEAR(r->slow);
    return 0;
}

static void receiver_dealloc(Receiver *r) {
    PyObject_GC_UnTrack(r);
    receiver_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyMemberDef receiver_members[] = {
    {"low_water", T_PYSSIZET, offsetof(Receiver, low_water), 0,
     "more than this many buffered: the next is popped here"},
    {NULL},
};

static PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "compactlog.client._messages.Receiver",
    .tp_basicsize = sizeof(Receiver),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Receiver(buffer, acks, slow, low_water): a consumer's receive, its usual case",
    .tp_new = receiver_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Receiver, vectorcall),
    .tp_traverse = (traverseproc)receiver_traverse,
    .tp_clear = (inquiry)receiver_clear,
    .tp_dealloc = (destructor)receiver_dealloc,
    .tp_members = receiver_members,
};

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "bind(cls): the class messages_of builds"},
    {"messages_of", (PyCFunction)(void (*)(void))messages_of, METH_FASTCALL,
     "messages_of(batch, topic) -> [Message]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_messages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__messages(void) {
    if (PyType_Ready(&ReceiverType) < 0) return NULL;
    if (!(str_failure = PyUnicode_InternFromString("failure"))) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Receiver", (PyObject *)&ReceiverType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return twin_stamped(m);
}
