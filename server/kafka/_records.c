/* Compiled twin of server/kafka/_records_py.py: Kafka's RecordBatch v2 to and from our
 * stored batches, without a Python object per record.
 *
 * Same functions, same results (tests/kafka/test_records_twins.py gives every case to
 * both, byte for byte): produced_request turns a Produce partition's record batches into
 * a PublishRequest's records, fetched_batches turns stored payloads into uncompressed
 * RecordBatch v2, one per payload, up to a Fetch's byte limit. Layouts are drawn in server/kafka/records.py (Kafka's) and
 * storage/batch.py (ours). Built by the ordinary install as an optional extension;
 * records.py falls back to the Python twin when it is absent.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *MalformedPayload = NULL; /* storage._batch_py's: a stored payload is bad */
static PyObject *KafkaError = NULL;       /* server.kafka.errors' */
static PyObject *ErrorCode = NULL;

/* Why a conversion failed. With the GIL held a failure raises at once; the fetch's
 * conversion (fetched_batches) runs without the GIL and only records why, raised once the
 * GIL is back (raise_deferred). Buffers are raw-allocated so that both may grow them. */
static _Thread_local struct {
    int deferred, no_memory;
    char why[128];
} failure;

static int no_memory(void) {
    if (!failure.deferred) return PyErr_NoMemory(), -1;
    failure.no_memory = 1;
    return -1;
}

#define BUF_REALLOC PyMem_RawRealloc
#define BUF_NO_MEMORY() no_memory()
#include "../../storage/_buf.h"

static int wire_error(const char *what) {
    if (!failure.deferred) {
        PyErr_SetString(MalformedPayload, what);
        return -1;
    }
    snprintf(failure.why, sizeof failure.why, "%s", what);
    return -1;
}

/* Raises what the conversion without the GIL recorded; returns NULL. */
static PyObject *raise_deferred(void) {
    if (failure.no_memory) return PyErr_NoMemory();
    PyErr_SetString(MalformedPayload, failure.why);
    return NULL;
}
#include "../../storage/_wire.h"

#include "_kafka_wire.h"
#include "../../storage/_twin_stamp.h"

/* ---- produce: RecordBatch v2 -> PublishRequest records ---------------------------- */

/* Raises KafkaError(ErrorCode.<code>, text); returns -1. */
static int kafka_error(const char *code, PyObject *text) {
    PyObject *member = text ? PyObject_GetAttrString(ErrorCode, code) : NULL;
    PyObject *exc = member ? PyObject_CallFunctionObjArgs(KafkaError, member, text, NULL) : NULL;
    if (exc) PyErr_SetObject(KafkaError, exc);
    Py_XDECREF(exc);
    Py_XDECREF(member);
    Py_XDECREF(text);
    return -1;
}

#define KAFKA_ERROR(code, ...) kafka_error(code, PyUnicode_FromFormat(__VA_ARGS__))

/* A Kafka varint (zigzag) at *p, before end; -1 (corrupt) when it runs out. */
static int read_zigzag(const unsigned char *buf, Py_ssize_t *p, Py_ssize_t end, int64_t *out) {
    uint64_t n = 0;
    int shift = 0;
    for (;;) {
        if (*p >= end || shift > 63)
            return KAFKA_ERROR("corrupt_message", "a record runs past its batch");
        unsigned char c = buf[(*p)++];
        n |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) break;
        shift += 7;
    }
    *out = (int64_t)(n >> 1) ^ -(int64_t)(n & 1);
    return 0;
}

/* The bytes of a Kafka nullable field: *len -1 for null (any negative length). */
static int read_bytes(const unsigned char *buf, Py_ssize_t *p, Py_ssize_t end, int64_t *len) {
    if (read_zigzag(buf, p, end, len) < 0) return -1;
    if (*len < 0) return 0;
    if (*len > end - *p) return KAFKA_ERROR("corrupt_message", "a record runs past its batch");
    *p += (Py_ssize_t)*len;
    return 0;
}

static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        int more;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) more = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) more = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) more = 3, cp = c & 0x07, min = 0x10000;
        else return 0;
        if (i + more >= n) return 0;
        for (int k = 1; k <= more; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += more + 1;
    }
    return 1;
}

typedef struct {
    Py_ssize_t ks, kn, vs, vn; /* name, value (vn -1: null) */
} Header;

static uint64_t varint_size(uint64_t n) {
    uint64_t size = 1;
    while (n >= 0x80) n >>= 7, size++;
    return size;
}

static int header_error(const unsigned char *buf, Header *h) {
    PyObject *name = PyUnicode_DecodeUTF8((const char *)buf + h->ks, h->kn, "replace");
    if (!name) return -1;
    int rc = KAFKA_ERROR("invalid_record", "header %R: properties are UTF-8 text", name);
    Py_DECREF(name);
    return rc;
}

/* A record's headers as properties map entries: a name given twice keeps its last value
 * (a map), names and values UTF-8 (properties are text), a null value "". */
static int put_headers(Buf *body, const unsigned char *buf, Header *hs, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        Header *h = &hs[j];
        int later = 0;
        for (int64_t k = j + 1; k < n && !later; k++)
            later = hs[k].kn == h->kn && !memcmp(buf + hs[k].ks, buf + h->ks, (size_t)h->kn);
        if (later) continue;
        if (!utf8_ok(buf + h->ks, h->kn) || (h->vn > 0 && !utf8_ok(buf + h->vs, h->vn)))
            return header_error(buf, h);
        Py_ssize_t vn = h->vn > 0 ? h->vn : 0;
        uint64_t entry = 2 + varint_size((uint64_t)h->kn) + (uint64_t)h->kn +
                         varint_size((uint64_t)vn) + (uint64_t)vn;
        if (buf_byte(body, 0x1A) < 0 || buf_varint(body, entry) < 0 || buf_byte(body, 0x0A) < 0 ||
            buf_varint(body, (uint64_t)h->kn) < 0 || buf_put(body, buf + h->ks, h->kn) < 0 ||
            buf_byte(body, 0x12) < 0 || buf_varint(body, (uint64_t)vn) < 0 ||
            buf_put(body, buf + h->vs, vn) < 0)
            return -1;
    }
    return 0;
}

/* One Kafka record at *p (its length first) as a Record field of `out`. */
static int convert_record(Buf *out, Buf *body, Buf *headers, const unsigned char *buf,
                          Py_ssize_t *p, Py_ssize_t end, int64_t base_ts, int log_append) {
    int64_t length = 0, ts_delta = 0, offset_delta = 0, key_len = 0, value_len = 0, count = 0;
    if (read_zigzag(buf, p, end, &length) < 0) return -1;
    Py_ssize_t rs = *p;
    if (length < 1 || length > end - rs)
        return KAFKA_ERROR("corrupt_message", "a record runs past its batch");
    Py_ssize_t re = rs + (Py_ssize_t)length, q = rs + 1; /* attributes: unused */
    if (read_zigzag(buf, &q, re, &ts_delta) < 0 || read_zigzag(buf, &q, re, &offset_delta) < 0)
        return -1;
    if (read_bytes(buf, &q, re, &key_len) < 0) return -1;
    Py_ssize_t ks = q - (key_len > 0 ? (Py_ssize_t)key_len : 0);
    if (read_bytes(buf, &q, re, &value_len) < 0) return -1;
    Py_ssize_t vs = q - (value_len > 0 ? (Py_ssize_t)value_len : 0);
    if (read_zigzag(buf, &q, re, &count) < 0) return -1;
    if (count < 0 || count > re - q)
        return KAFKA_ERROR("corrupt_message", "Found invalid number of record headers %lld",
                           (long long)count);
    headers->len = 0;
    if (buf_reserve(headers, (Py_ssize_t)(count * (int64_t)sizeof(Header))) < 0) return -1;
    Header *hs = (Header *)headers->data;
    for (int64_t i = 0; i < count; i++) {
        int64_t kn = 0, vn = 0;
        if (read_zigzag(buf, &q, re, &kn) < 0) return -1;
        if (kn < 0 || kn > re - q)
            return KAFKA_ERROR("corrupt_message", "Invalid header key size %lld", (long long)kn);
        hs[i].ks = q, hs[i].kn = (Py_ssize_t)kn;
        q += (Py_ssize_t)kn;
        if (read_bytes(buf, &q, re, &vn) < 0) return -1;
        hs[i].vn = (Py_ssize_t)vn, hs[i].vs = q - (vn > 0 ? (Py_ssize_t)vn : 0);
    }
    if (q != re)
        return KAFKA_ERROR("corrupt_message", "Invalid record size: expected to read %lld bytes "
                           "in record payload, but instead read %zd", (long long)length, q - rs);
    *p = re;
    body->len = 0;
    if (key_len >= 0 && (buf_byte(body, 0x0A) < 0 || buf_varint(body, (uint64_t)key_len) < 0 ||
                         buf_put(body, buf + ks, (Py_ssize_t)key_len) < 0))
        return -1;
    if (value_len >= 0 && (buf_byte(body, 0x12) < 0 || buf_varint(body, (uint64_t)value_len) < 0 ||
                           buf_put(body, buf + vs, (Py_ssize_t)value_len) < 0))
        return -1;
    if (put_headers(body, buf, hs, count) < 0) return -1;
    int64_t stamp = log_append ? base_ts : base_ts + ts_delta;
    if (stamp > 0 && (buf_byte(body, 0x20) < 0 || buf_varint(body, (uint64_t)stamp) < 0))
        return -1;
    return buf_byte(out, 0x12) < 0 || buf_varint(out, (uint64_t)body->len) < 0 ||
                   buf_put(out, body->data, body->len) < 0
               ? -1
               : 0;
}


/* The `count` records of one uncompressed batch's [p, end) appended to `out`. */
static int convert_records(Buf *out, const unsigned char *buf, Py_ssize_t p, Py_ssize_t end,
                           int64_t count, int64_t base_ts, int log_append) {
    Buf body = {0}, headers = {0};
    int rc = 0;
    for (int64_t i = 0; i < count && rc == 0; i++) {
        if (p >= end)
            rc = KAFKA_ERROR("corrupt_message", "a batch holds fewer records than it counts");
        else
            rc = convert_record(out, &body, &headers, buf, &p, end, base_ts, log_append);
    }
    if (rc == 0 && p != end)
        rc = KAFKA_ERROR("corrupt_message", "%zd unconsumed bytes after all records consumed",
                         end - p);
    PyMem_RawFree(body.data);
    PyMem_RawFree(headers.data);
    return rc;
}

/* One batch at p: checked, decompressed through `decompress` (codec, bytes) when it is,
 * its records appended to `out`; *count gains them. */
static int convert_batch(Buf *out, const unsigned char *buf, Py_ssize_t p, Py_ssize_t size,
                         PyObject *decompress, int64_t *count) {
    if (size > 16 && buf[p + 16] != 2)
        return kafka_error("unsupported_version", PyUnicode_FromString("record batches before v2"));
    if (size < BATCH_HEADER)
        return KAFKA_ERROR("corrupt_message", "a record batch of %zd bytes is shorter than its "
                           "header", size);
    if (crc32c(buf + p + 21, size - 21) != (uint32_t)be(buf + p + 17, 4))
        return kafka_error("corrupt_message", PyUnicode_FromString("record batch CRC-32C mismatch"));
    unsigned attrs = (unsigned)be(buf + p + 21, 2);
    if (attrs & 0x30)
        return kafka_error("invalid_record",
                           PyUnicode_FromString("transactional batches are not supported"));
    int log_append = (attrs & 0x08) != 0;
    int64_t base_ts = (int64_t)be(buf + p + (log_append ? 35 : 27), 8);
    int64_t n = (int32_t)be(buf + p + 57, 4);
    if (n < 0) return KAFKA_ERROR("corrupt_message", "a batch of %lld records", (long long)n);
    if (!(attrs & 0x07)) {
        *count += n;
        return convert_records(out, buf, p + BATCH_HEADER, p + size, n, base_ts, log_append);
    }
    PyObject *plain = PyObject_CallFunction(decompress, "iy#", (int)(attrs & 0x07),
                                            buf + p + BATCH_HEADER, size - BATCH_HEADER);
    if (!plain) return -1;
    int rc;
    if (!PyBytes_Check(plain)) {
        PyErr_SetString(PyExc_TypeError, "decompress must return bytes");
        rc = -1;
    } else {
        const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(plain);
        rc = convert_records(out, d, 0, PyBytes_GET_SIZE(plain), n, base_ts, log_append);
    }
    Py_DECREF(plain);
    *count += n;
    return rc;
}

/* produced_request(data, decompress) -> PublishRequest bytes (records only) */
static PyObject *produced_request(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *decompress, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*O", &view, &decompress)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t p = 0, n = view.len;
    int64_t count = 0;
    Buf out = {0};
    while (n - p >= LOG_OVERHEAD) {
        int64_t size = (int64_t)(int32_t)be(buf + p + 8, 4) + LOG_OVERHEAD;
        if (size > n - p) break; /* a partial batch at the end: not sent whole, not read */
        if (convert_batch(&out, buf, p, (Py_ssize_t)size, decompress, &count) < 0) goto done;
        p += (Py_ssize_t)size;
    }
    if (count == 0)
        kafka_error("invalid_record", PyUnicode_FromString("a produce with no records"));
    else
        result = PyBytes_FromStringAndSize((const char *)out.data, out.len);
done:
    PyMem_RawFree(out.data);
    PyBuffer_Release(&view);
    return result;
}

#include "_records_fetch.h"

static PyMethodDef methods[] = {
    {"produced_request", produced_request, METH_VARARGS,
     "produced_request(data, decompress) -> PublishRequest records bytes"},
    {"fetched_batches", fetched_batches, METH_VARARGS,
     "fetched_batches(payloads, start, limit, first) -> (RecordBatch v2 bytes as a "
     "read-only memoryview, payloads used, last offset)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

static PyObject *import_attr(const char *module_name, const char *name) {
    PyObject *mod = PyImport_ImportModule(module_name);
    if (!mod) return NULL;
    PyObject *attr = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    return attr;
}

PyMODINIT_FUNC PyInit__records(void) {
    crc_init();
    MalformedPayload = import_attr("compactlog.storage._batch_py", "MalformedPayload");
    KafkaError = MalformedPayload ? import_attr("compactlog.server.kafka.errors", "KafkaError")
                                  : NULL;
    ErrorCode = KafkaError ? import_attr("compactlog.server.kafka.errors", "ErrorCode") : NULL;
    if (!ErrorCode || PyType_Ready(&ConvertedType) < 0) return NULL;
    return twin_stamped(PyModule_Create(&module));
}
