/* A growing byte buffer and protobuf varints. One copy for the compiled twins that build
 * bytes: storage/_batch.c and server/kafka/_records.c.
 *
 * By default it is written with the GIL held (PyMem_Realloc; PyErr_NoMemory when that
 * fails). An includer that fills buffers without the GIL defines, before including it,
 * BUF_REALLOC (PyMem_RawRealloc, then freed with PyMem_RawFree) and BUF_NO_MEMORY(), which
 * records the failure for later and returns -1.
 *
 * Static functions: each extension gets its own copy.
 */
#ifndef COMPACTLOG_BUF_H
#define COMPACTLOG_BUF_H
#include <stdint.h>
#include <string.h>

#ifndef BUF_REALLOC
#define BUF_REALLOC PyMem_Realloc
#define BUF_NO_MEMORY() (PyErr_NoMemory(), -1)
#endif

typedef struct {
    unsigned char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    unsigned char *d = BUF_REALLOC(b->data, (size_t)cap);
    if (!d) return BUF_NO_MEMORY();
    b->data = d;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const unsigned char *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_byte(Buf *b, unsigned char c) { return buf_put(b, &c, 1); }

static Py_ssize_t varint_encode(unsigned char *out, uint64_t n) {
    Py_ssize_t i = 0;
    while (n >= 0x80) { out[i++] = (unsigned char)((n & 0x7F) | 0x80); n >>= 7; }
    out[i++] = (unsigned char)n;
    return i;
}

static inline int buf_varint(Buf *b, uint64_t n) {
    unsigned char tmp[10];
    return buf_put(b, tmp, varint_encode(tmp, n));
}

#endif
