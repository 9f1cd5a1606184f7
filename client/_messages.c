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
 * message, read from its slots (_wire, else, while that holds the marker, _batch[_at]);
 * an item that is not a message (a wire id already) is passed through.
 *
 * id_lists(items, limit) writes the same ids as AcknowledgeListRequest's `repeated MessageId
 * ids = 3` bytes, at most `limit` ids a chunk. Messages of one response queued one after the
 * other (indexes a, a+1, ..., b) are a run: when their first and last ids share ledger and
 * partition and their entries span exactly b - a, every id between is one entry more (a
 * response's messages of one log are in strictly rising id order), so only two ids are read
 * and the rest written from them; any other run, message or wire id is read one by one.
 * The bytes are canonical (fields in order, zeros left out), as the pure twin's
 * SerializeToString writes them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_buf.h"
#include "_twin_stamp.h"

#define MAX_LAZY 8

static PyTypeObject *message_type; /* bound class, NULL until bind() */
static PyObject *unset;            /* the marker of a field not converted yet */
static Py_ssize_t off_batch, off_at, off_topic, off_wire, off_lazy[MAX_LAZY], n_lazy;
static PyObject *str_id, *str_ledger, *str_entry, *str_partition; /* interned names */

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

typedef struct {
    unsigned long long ledger, entry;
    long long partition;
} Id;

/* The fields of a wire id (a pb MessageId); -1 with an exception set. */
static int id_fields(PyObject *wire, Id *out) {
    PyObject *l = PyObject_GetAttr(wire, str_ledger), *e = l ? PyObject_GetAttr(wire, str_entry) : NULL,
             *p = e ? PyObject_GetAttr(wire, str_partition) : NULL;
    int ok = p != NULL;
    if (ok) {
        out->ledger = PyLong_AsUnsignedLongLong(l);
        out->entry = PyLong_AsUnsignedLongLong(e);
        out->partition = PyLong_AsLongLong(p);
        ok = !PyErr_Occurred();
    }
    Py_XDECREF(l), Py_XDECREF(e), Py_XDECREF(p);
    return ok ? 0 : -1;
}

/* The fields of an item's id: a message's wire id, or the item as a wire id. */
static int item_id(PyObject *item, Id *out) {
    PyObject *wire = Py_TYPE(item) == message_type ? wire_id_of(item) : Py_NewRef(item);
    if (!wire) return -1;
    int rc = id_fields(wire, out);
    Py_DECREF(wire);
    return rc;
}

typedef struct {
    PyObject *chunks; /* list of bytes */
    Buf buf;
    Py_ssize_t count, limit;
} Lists;

static int flush_chunk(Lists *ls) {
    PyObject *chunk = PyBytes_FromStringAndSize(ls->buf.data ? (char *)ls->buf.data : "", ls->buf.len);
    int rc = chunk ? PyList_Append(ls->chunks, chunk) : -1;
    Py_XDECREF(chunk);
    ls->buf.len = 0, ls->count = 0;
    return rc;
}

/* One id as a `repeated MessageId ids = 3` entry; a full chunk goes to the list. */
static int put_id(Lists *ls, const Id *id) {
    unsigned char inner[40];
    Py_ssize_t n = 0;
    if (id->ledger) inner[n++] = 0x08, n += varint_encode(inner + n, id->ledger);
    if (id->entry) inner[n++] = 0x10, n += varint_encode(inner + n, id->entry);
    if (id->partition) inner[n++] = 0x18, n += varint_encode(inner + n, (uint64_t)id->partition);
    if (buf_reserve(&ls->buf, n + 2) < 0) return -1;
    ls->buf.data[ls->buf.len++] = 0x1a;
    ls->buf.data[ls->buf.len++] = (unsigned char)n; /* under 128: one byte */
    memcpy(ls->buf.data + ls->buf.len, inner, (size_t)n);
    ls->buf.len += n;
    return ++ls->count >= ls->limit ? flush_chunk(ls) : 0;
}

/* The index of a message of a response (its _at), or -1 for anything else. */
static Py_ssize_t index_in(PyObject *item, PyObject *batch) {
    if (Py_TYPE(item) != message_type) return -1;
    PyObject *b = SLOT(item, off_batch), *at = SLOT(item, off_at);
    if (!b || b == Py_None || (batch && b != batch) || !at || !PyLong_CheckExact(at)) return -1;
    return PyLong_AsSsize_t(at);
}

/* items[i..] from i: the run of messages of one response at consecutive indexes; its
 * length (1 for anything else). */
static Py_ssize_t run_length(PyObject *seq, Py_ssize_t i, Py_ssize_t n) {
    PyObject *first = PySequence_Fast_GET_ITEM(seq, i);
    Py_ssize_t at = index_in(first, NULL);
    if (at < 0) return 1;
    PyObject *batch = SLOT(first, off_batch);
    Py_ssize_t len = 1;
    while (i + len < n && index_in(PySequence_Fast_GET_ITEM(seq, i + len), batch) == at + len) len++;
    return len;
}

static int put_run(Lists *ls, PyObject *seq, Py_ssize_t i, Py_ssize_t len) {
    Id first, last;
    if (item_id(PySequence_Fast_GET_ITEM(seq, i), &first) < 0) return -1;
    if (len == 1) return put_id(ls, &first);
    if (item_id(PySequence_Fast_GET_ITEM(seq, i + len - 1), &last) < 0) return -1;
    if (first.ledger == last.ledger && first.partition == last.partition &&
        last.entry >= first.entry && last.entry - first.entry == (unsigned long long)(len - 1)) {
        for (Py_ssize_t k = 0; k < len; k++) {
            Id id = {first.ledger, first.entry + (unsigned long long)k, first.partition};
            if (put_id(ls, &id) < 0) return -1;
        }
        return 0;
    }
    for (Py_ssize_t k = 0; k < len; k++) {
        Id id;
        if (item_id(PySequence_Fast_GET_ITEM(seq, i + k), &id) < 0 || put_id(ls, &id) < 0) return -1;
    }
    return 0;
}

static PyObject *id_lists(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "id_lists(items, limit)");
        return NULL;
    }
    if (!message_type) {
        PyErr_SetString(PyExc_RuntimeError, "id_lists before bind");
        return NULL;
    }
    Lists ls = {PyList_New(0), {0}, 0, PyLong_AsSsize_t(args[1])};
    if (!ls.chunks) return NULL;
    if (ls.limit < 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "id_lists: limit >= 1");
        Py_DECREF(ls.chunks);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "id_lists takes an iterable");
    int rc = seq ? 0 : -1;
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    for (Py_ssize_t i = 0; rc == 0 && i < n;) {
        Py_ssize_t len = run_length(seq, i, n);
        rc = put_run(&ls, seq, i, len);
        i += len;
    }
    if (rc == 0 && ls.count) rc = flush_chunk(&ls);
    Py_XDECREF(seq);
    PyMem_Free(ls.buf.data);
    if (rc < 0) Py_CLEAR(ls.chunks);
    return ls.chunks;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(cls, unset, lazy): the class messages_of builds, its marker and lazy slots"},
    {"messages_of", (PyCFunction)(void (*)(void))messages_of, METH_FASTCALL,
     "messages_of(batch, topic) -> [Message]"},
    {"wire_ids", wire_ids, METH_O, "wire_ids(items) -> [pb MessageId]: each message's wire id"},
    {"id_lists", (PyCFunction)(void (*)(void))id_lists, METH_FASTCALL,
     "id_lists(items, limit) -> [bytes]: their ids as repeated MessageId ids = 3, in chunks"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_messages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__messages(void) {
    str_id = PyUnicode_InternFromString("id");
    str_ledger = PyUnicode_InternFromString("ledger_id");
    str_entry = PyUnicode_InternFromString("entry_id");
    str_partition = PyUnicode_InternFromString("partition");
    if (!str_id || !str_ledger || !str_entry || !str_partition) return NULL;
    return twin_stamped(PyModule_Create(&module));
}
