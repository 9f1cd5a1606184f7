/* The fetch half of the records twin (server/kafka/_records.c): one stored payload (the
 * layout in storage/batch.py) as one uncompressed RecordBatch v2, with no Python object
 * per record. Needs _wire.h, _buf.h and _kafka_wire.h included before it.
 *
 * Static functions: included once, by _records.c.
 */
#ifndef COMPACTLOG_RECORDS_FETCH_H
#define COMPACTLOG_RECORDS_FETCH_H

/* ---- fetch: a stored payload -> one RecordBatch v2 -------------------------------- */

typedef struct {
    Py_ssize_t ns, ne, vs, ve; /* a property's name and value */
} Prop;

typedef struct {
    uint64_t entry;
    Py_ssize_t ks, ke, vs, ve; /* -1: absent */
    int64_t publish, event;
    Py_ssize_t nprops;
} Stored;

/* A map entry's name (1) and value (2), empty when absent, a later field winning. */
static int read_prop(const unsigned char *buf, Py_ssize_t p, Py_ssize_t end, Prop *out) {
    out->ns = out->ne = out->vs = out->ve = p;
    Field f;
    while (p < end) {
        if (read_field(buf, &p, end, &f) < 0) return -1;
        if (f.wire == 2 && f.number == 1) out->ns = f.start, out->ne = f.end;
        if (f.wire == 2 && f.number == 2) out->vs = f.start, out->ve = f.end;
    }
    return 0;
}

/* The message of the record at p: its fields, and its properties into `props`. */
static int read_stored(const unsigned char *buf, Py_ssize_t p, Py_ssize_t end, Stored *m,
                       Buf *props, Py_ssize_t *next) {
    Py_ssize_t q = 0, me = 0;
    if (read_frame(buf, p, end, &q, &me) < 0) return -1;
    uint64_t ledger, v;
    m->entry = 0, m->ks = m->ke = m->vs = m->ve = -1, m->publish = m->event = 0, m->nprops = 0;
    props->len = 0;
    Field f;
    while (q < me) {
        if (read_field(buf, &q, me, &f) < 0) return -1;
        if (f.wire == 0 && (f.number == 5 || f.number == 6)) {
            Py_ssize_t s = f.at;
            if (read_varint(buf, &s, f.end, &v) < 0) return -1;
            *(f.number == 5 ? &m->publish : &m->event) = (int64_t)v;
        }
        if (f.wire != 2) continue;
        if (f.number == 1 && parse_id(buf, f.start, f.end, &ledger, &m->entry) < 0) return -1;
        if (f.number == 2) m->ks = f.start, m->ke = f.end;
        if (f.number == 3) m->vs = f.start, m->ve = f.end;
        if (f.number == 4) {
            if (buf_reserve(props, (Py_ssize_t)sizeof(Prop)) < 0) return -1;
            if (read_prop(buf, f.start, f.end, (Prop *)(props->data + props->len)) < 0) return -1;
            props->len += (Py_ssize_t)sizeof(Prop);
            m->nprops++;
        }
    }
    *next = me;
    return 0;
}

static int same_name(const unsigned char *buf, const Prop *a, const Prop *b) {
    return a->ne - a->ns == b->ne - b->ns && !memcmp(buf + a->ns, buf + b->ns, (size_t)(a->ne - a->ns));
}

static int put_kafka_bytes(Buf *b, const unsigned char *buf, Py_ssize_t s, Py_ssize_t e) {
    if (s < 0) return buf_zigzag(b, -1);
    return buf_zigzag(b, e - s) < 0 || buf_put(b, buf + s, e - s) < 0 ? -1 : 0;
}

/* The properties as headers, a map's way: a name at its first place, with its last value. */
static int put_props(Buf *b, const unsigned char *buf, const Prop *ps, Py_ssize_t n) {
    Py_ssize_t distinct = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int seen = 0;
        for (Py_ssize_t i = 0; i < j && !seen; i++) seen = same_name(buf, &ps[i], &ps[j]);
        distinct += !seen;
    }
    if (buf_zigzag(b, distinct) < 0) return -1;
    for (Py_ssize_t j = 0; j < n; j++) {
        int seen = 0;
        for (Py_ssize_t i = 0; i < j && !seen; i++) seen = same_name(buf, &ps[i], &ps[j]);
        if (seen) continue;
        const Prop *last = &ps[j];
        for (Py_ssize_t k = j + 1; k < n; k++)
            if (same_name(buf, &ps[k], &ps[j])) last = &ps[k];
        if (put_kafka_bytes(b, buf, ps[j].ns, ps[j].ne) < 0 ||
            put_kafka_bytes(b, buf, last->vs, last->ve) < 0)
            return -1;
    }
    return 0;
}

typedef struct {
    int64_t count, first_ts, max_ts;
    uint64_t base, last;
} Built;

/* One stored message as a Kafka record at the end of `out`. */
static int put_record(Buf *out, Buf *rec, const unsigned char *buf, const Stored *m,
                      const Prop *props, Built *b) {
    int64_t stamp = m->event ? m->event : m->publish;
    if (b->count == 0) b->base = m->entry, b->first_ts = b->max_ts = stamp;
    if (stamp > b->max_ts) b->max_ts = stamp;
    rec->len = 0;
    if (buf_byte(rec, 0) < 0 || buf_zigzag(rec, stamp - b->first_ts) < 0 ||
        buf_zigzag(rec, (int64_t)(m->entry - b->base)) < 0 ||
        put_kafka_bytes(rec, buf, m->ks, m->ke) < 0 || put_kafka_bytes(rec, buf, m->vs, m->ve) < 0 ||
        put_props(rec, buf, props, m->nprops) < 0)
        return -1;
    if (buf_zigzag(out, rec->len) < 0 || buf_put(out, rec->data, rec->len) < 0) return -1;
    b->count++, b->last = m->entry;
    return 0;
}

static void put_batch_header(unsigned char *h, Py_ssize_t size, const Built *b) {
    put_be(h, b->base, 8);
    put_be(h + 8, (uint64_t)(size - LOG_OVERHEAD), 4);
    put_be(h + 12, (uint64_t)-1, 4); /* partition leader epoch: none */
    h[16] = 2;
    put_be(h + 21, 0, 2); /* attributes: uncompressed, CreateTime */
    put_be(h + 23, b->last - b->base, 4);
    put_be(h + 27, (uint64_t)b->first_ts, 8);
    put_be(h + 35, (uint64_t)b->max_ts, 8);
    put_be(h + 43, (uint64_t)-1, 8); /* producer id, epoch, base sequence: none */
    put_be(h + 51, (uint64_t)-1, 2);
    put_be(h + 53, (uint64_t)-1, 4);
    put_be(h + 57, (uint64_t)b->count, 4);
    put_be(h + 17, crc32c(h + 21, size - 21), 4);
}

/* fetched_batch(payload, start) -> (RecordBatch v2 bytes, last offset) | None */
static PyObject *fetched_batch(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long start;
    if (!PyArg_ParseTuple(args, "y*L", &view, &start)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t p = 0, end = view.len;
    Buf out = {0}, rec = {0}, props = {0};
    Built b = {0};
    PyObject *result = NULL;
    uint64_t from = start > 0 ? (uint64_t)start : 0;
    if (buf_reserve(&out, BATCH_HEADER + end) < 0) goto done;
    out.len = BATCH_HEADER;
    while (p < end) {
        Stored m;
        if (read_stored(buf, p, end, &m, &props, &p) < 0) goto done;
        if (m.entry >= from && put_record(&out, &rec, buf, &m, (Prop *)props.data, &b) < 0)
            goto done;
    }
    if (b.count == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    put_batch_header(out.data, out.len, &b);
    result = Py_BuildValue("y#K", out.data, out.len, (unsigned long long)b.last);
done:
    PyMem_Free(out.data);
    PyMem_Free(rec.data);
    PyMem_Free(props.data);
    PyBuffer_Release(&view);
    return result;
}

#endif
