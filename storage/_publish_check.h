/* Compiled twin of storage/_publish_check_py.py: a PublishRequest's bytes checked once,
 * without building a protobuf message, and its topic handed back.
 *
 * It refuses what protobuf's parse refuses (truncated or overlong varints, fields running
 * past their message, field number 0, tags past 32 bits, text that is not UTF-8 in the
 * topic or a property's name or value) and groups (wire types 3 and 4), which the batch
 * codec cannot copy; same checks in the same order, same texts, as the pure twin.
 * Included by storage/_batch.c after _wire.h (read_varint, skip_field, wire_error).
 */
#ifndef COMPACTLOG_PUBLISH_CHECK_H
#define COMPACTLOG_PUBLISH_CHECK_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), as
 * Python's decoder and protobuf's check take it. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        while (n - i >= 8) { /* ASCII eight bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c < 0xC2 || c > 0xF4) return 0;
        Py_ssize_t len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (n - i < len) return 0;
        for (Py_ssize_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        uint8_t c1 = s[i + 1];
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) ||
            (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))
            return 0;
        i += len;
    }
    return 1;
}

/* The field at *p (< end): its number, wire type and value [*s, *q) (a length-delimited
 * value after its length); *p moves past it. -1 (wire_error) when it is refused. */
static int check_field(const uint8_t *buf, Py_ssize_t *p, Py_ssize_t end, uint64_t *number,
                       int *wire, Py_ssize_t *s, Py_ssize_t *q) {
    uint64_t tag, n;
    if (read_varint(buf, p, end, &tag) < 0) return -1;
    if (tag > 0xFFFFFFFFull) return wire_error("field tag beyond 32 bits");
    if ((tag >> 3) == 0) return wire_error("field number 0");
    *number = tag >> 3, *wire = (int)(tag & 7);
    if (*wire == 2) {
        if (read_varint(buf, p, end, &n) < 0) return -1;
        if (n > (uint64_t)(end - *p)) return wire_error("field runs past its message");
        *s = *p, *q = *p + (Py_ssize_t)n;
    } else {
        *s = *p;
        if ((*q = skip_field(buf, *p, end, *wire)) < 0) return -1;
    }
    *p = *q;
    return 0;
}

static int text_error(const char *what, Py_ssize_t record) {
    char text[80];
    if (record < 0)
        snprintf(text, sizeof text, "%s is not UTF-8", what);
    else
        snprintf(text, sizeof text, "record %zd: property %s is not UTF-8", record, what);
    return wire_error(text);
}

/* A Record (depth 1) or one of its property entries (depth 2) in [p, end). */
static int check_message(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, Py_ssize_t record,
                         int depth) {
    uint64_t number;
    int wire;
    Py_ssize_t s, q;
    while (p < end) {
        if (check_field(buf, &p, end, &number, &wire, &s, &q) < 0) return -1;
        if (wire != 2) continue;
        if (depth == 1 && number == 3) {
            if (check_message(buf, s, q, record, 2) < 0) return -1;
        } else if (depth == 2 && (number == 1 || number == 2)) {
            if (!utf8_valid(buf + s, q - s))
                return text_error(number == 1 ? "name" : "value", record);
        }
    }
    return 0;
}

/* check_publish(request) -> topic */
static PyObject *check_publish(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *buf = view.buf;
    Py_ssize_t end = view.len, p = 0, record = 0, ts = 0, te = 0, s, q;
    uint64_t number;
    int wire;
    PyObject *topic = NULL;
    while (p < end) {
        if (check_field(buf, &p, end, &number, &wire, &s, &q) < 0) goto done;
        if (wire != 2) continue;
        if (number == 1) {
            if (!utf8_valid(buf + s, q - s)) {
                text_error("topic", -1);
                goto done;
            }
            ts = s, te = q;
        } else if (number == 2) {
            if (check_message(buf, s, q, record, 1) < 0) goto done;
            record++;
        }
    }
    topic = PyUnicode_DecodeUTF8((const char *)buf + ts, te - ts, "strict");
done:
    PyBuffer_Release(&view);
    return topic;
}

#endif
