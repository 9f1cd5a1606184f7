/* Reading the protobuf wire format of a stored batch's records (the layout in
 * storage/batch.py): varints, skipping a field, and a MessageId's ledger and entry. One
 * reader for both compiled walks, storage/_batch.c and compactor/log_cleaner/_batch_walk.h.
 *
 * One record reader too (read_record): a record's framing, id, flags and key, with the
 * same checks and messages in both.
 *
 * They report a malformed record differently (the codec raises MalformedPayload at once;
 * the compactor's walk runs without the GIL and keeps the text for later), so the
 * includer defines, before including this header:
 *
 *     static int wire_error(const char *what);   -- records why; returns -1
 *
 * Static functions: each extension gets its own copy.
 */
#ifndef COMPACTLOG_WIRE_H
#define COMPACTLOG_WIRE_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HAS_KEY 1         /* the record has a key */
#define VALUE_NON_EMPTY 2 /* its value is present and not empty */
#define VALUE_PRESENT 4   /* its value is present (an absent one makes a tombstone) */

/* Reads a varint at *p (< end); returns 0 and advances *p, or -1 (wire_error). */
static inline int read_varint(const uint8_t *buf, Py_ssize_t *p, Py_ssize_t end,
                              uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t i = *p;
    if (i < end && buf[i] < 0x80) { /* one byte: tags, and most lengths and ids */
        *out = buf[i];
        *p = i + 1;
        return 0;
    }
    for (;;) {
        if (i >= end || shift > 63) return wire_error("truncated or overlong varint");
        uint8_t c = buf[i++];
        result |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) break;
        shift += 7;
    }
    *p = i;
    *out = result;
    return 0;
}

/* Position after a field's value of wire type ``wire`` at p, or -1 (wire_error). */
static Py_ssize_t skip_field(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, int wire) {
    uint64_t n;
    Py_ssize_t q;
    switch (wire) {
    case 0: { /* a varint: up to 10 bytes, the last without the continuation bit */
#if defined(__GNUC__)
        if (end - p >= 8) { /* its last byte among the next 8: the first with bit 7 clear */
            uint64_t w;
            memcpy(&w, buf + p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            w = __builtin_bswap64(w);
#endif
            uint64_t last = ~w & 0x8080808080808080ull;
            if (last) return p + (__builtin_ctzll(last) >> 3) + 1;
        }
#endif
        Py_ssize_t stop = end - p > 10 ? p + 10 : end;
        while (p < stop)
            if (buf[p++] < 0x80) return p;
        return wire_error("truncated or overlong varint");
    }
    case 1: q = p + 8; break;
    case 5: q = p + 4; break;
    case 2:
        if (read_varint(buf, &p, end, &n) < 0) return -1;
        if (n > (uint64_t)(end - p)) return wire_error("field runs past its message");
        return p + (Py_ssize_t)n;
    default: {
        char what[64];
        snprintf(what, sizeof what, "unsupported wire type %d", wire);
        return wire_error(what);
    }
    }
    return q > end ? wire_error("field runs past its message") : q;
}

/* One field of a message: its number, wire type and bytes. For a length-delimited field
 * (wire 2) [start, end) are its bytes and `at` is where its length begins (a copy of the
 * field keeps it); for any other, [at, end) is its value and start == at. */
typedef struct {
    uint64_t number;
    int wire;
    Py_ssize_t at, start, end;
} Field;

/* The field at *q (< end), its length read once; *q moves past it. -1 (wire_error) when
 * it does not parse or runs past `end`. */
static inline int read_field(const uint8_t *buf, Py_ssize_t *q, Py_ssize_t end, Field *f) {
    uint64_t tag, n;
    if (read_varint(buf, q, end, &tag) < 0) return -1;
    f->number = tag >> 3, f->wire = (int)(tag & 7), f->at = f->start = *q;
    if (f->wire != 2) {
        if ((f->end = skip_field(buf, *q, end, f->wire)) < 0) return -1;
    } else {
        if (read_varint(buf, q, end, &n) < 0) return -1;
        if (n > (uint64_t)(end - *q)) return wire_error("field runs past its message");
        f->start = *q, f->end = *q + (Py_ssize_t)n;
    }
    *q = f->end;
    return 0;
}

/* A MessageId's ledger (field 1) and entry (field 2) in [p, end); 0 when absent. */
static int parse_id(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, uint64_t *ledger,
                    uint64_t *entry) {
    *ledger = *entry = 0;
    while (p < end) {
        uint64_t tag;
        if (read_varint(buf, &p, end, &tag) < 0) return -1;
        if (tag == 0x08) {
            if (read_varint(buf, &p, end, ledger) < 0) return -1;
        } else if (tag == 0x10) {
            if (read_varint(buf, &p, end, entry) < 0) return -1;
        } else if ((p = skip_field(buf, p, end, (int)(tag & 7))) < 0) {
            return -1;
        }
    }
    return 0;
}

/* One message record of a payload: its bytes [start, end), its message [body, end), its
 * id, flags (HAS_KEY, VALUE_PRESENT, VALUE_NON_EMPTY) and key bytes [ks, ke) (-1: none). */
typedef struct {
    Py_ssize_t start, body, end, ks, ke;
    uint64_t ledger, entry;
    int flags;
} Record;

/* wire_error with a formatted text (the byte a record starts at). */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int record_error(const char *format, ...) {
    char text[96];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    return wire_error(text);
}

/* The framing of the record at p (< end), field 1 of the payload: its Message is
 * [*body, *me). -1 (wire_error) when there is no record there. */
static inline int read_frame(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, Py_ssize_t *body,
                             Py_ssize_t *me) {
    if (buf[p] != 0x0A) return record_error("expected a message record at byte %zd", p);
    Py_ssize_t ms = p + 1;
    uint64_t n;
    if (read_varint(buf, &ms, end, &n) < 0) return -1;
    if (n > (uint64_t)(end - ms))
        return record_error("message record at byte %zd runs past the payload", p);
    *body = ms, *me = ms + (Py_ssize_t)n;
    return 0;
}

/* The record at p (< end): its framing and the fields it holds (a later field wins, as in
 * protobuf); -1 (wire_error) when it is not one. */
static inline int read_record(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, Record *r) {
    Py_ssize_t ms = 0, me = 0;
    if (read_frame(buf, p, end, &ms, &me) < 0) return -1;
    Py_ssize_t q = ms;
    r->start = p, r->body = ms, r->end = me, r->ks = r->ke = -1;
    r->ledger = r->entry = 0, r->flags = 0;
    Field f;
    while (q < me) {
        if (read_field(buf, &q, me, &f) < 0) return -1;
        if (f.wire != 2) continue;
        if (f.number == 1) {
            if (parse_id(buf, f.start, f.end, &r->ledger, &r->entry) < 0) return -1;
        } else if (f.number == 2) {
            r->ks = f.start, r->ke = f.end, r->flags |= HAS_KEY;
        } else if (f.number == 3) {
            int non_empty = f.end > f.start ? VALUE_NON_EMPTY : 0;
            r->flags = (r->flags & HAS_KEY) | VALUE_PRESENT | non_empty;
        }
    }
    return 0;
}

#endif
