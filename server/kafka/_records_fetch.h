/* The fetch half of the records twin (server/kafka/_records.c): a Fetch partition's stored
 * payloads (the layout in storage/batch.py) as uncompressed RecordBatch v2, one batch a
 * payload, in one call that holds the GIL only to pin its inputs and make its answer: the
 * byte work (parsing, copying, CRC-32C) runs beside the event loop and other fetches.
 * No Python object per record. Needs _wire.h, _buf.h and _kafka_wire.h included before it.
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

static Py_ssize_t zigzag_size(int64_t v) {
    uint64_t n = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t size = 1;
    while (n >= 0x80) n >>= 7, size++;
    return size;
}

static Py_ssize_t kafka_bytes_size(Py_ssize_t s, Py_ssize_t e) {
    return s < 0 ? 1 : zigzag_size(e - s) + (e - s);
}

/* Writers into room already reserved (put_record reserves a record's whole size once):
 * a zigzag varint, Kafka's varbytes (-1: null). Each answers the byte after it. */
static inline unsigned char *zigzag_raw(unsigned char *p, int64_t v) {
    return p + varint_encode(p, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static inline unsigned char *kafka_bytes_raw(unsigned char *p, const unsigned char *buf,
                                             Py_ssize_t s, Py_ssize_t e) {
    if (s < 0) return zigzag_raw(p, -1);
    p = zigzag_raw(p, e - s);
    memcpy(p, buf + s, (size_t)(e - s));
    return p + (e - s);
}

/* One stored message as a Kafka record at the end of `out`, its key and value copied
 * once: the headers are made first (in `headers`), so the record's length is known
 * before it is written, and its room reserved once. */
static int put_record(Buf *out, Buf *headers, const unsigned char *buf, const Stored *m,
                      const Prop *props, Built *b) {
    int64_t stamp = m->event ? m->event : m->publish;
    if (b->count == 0) b->base = m->entry, b->first_ts = b->max_ts = stamp;
    if (stamp > b->max_ts) b->max_ts = stamp;
    headers->len = 0;
    if (put_props(headers, buf, props, m->nprops) < 0) return -1;
    int64_t delta = stamp - b->first_ts, offset = (int64_t)(m->entry - b->base);
    Py_ssize_t size = 1 + zigzag_size(delta) + zigzag_size(offset) +
                      kafka_bytes_size(m->ks, m->ke) + kafka_bytes_size(m->vs, m->ve) +
                      headers->len;
    if (buf_reserve(out, 5 + size) < 0) return -1; /* then written unchecked: it fits */
    unsigned char *p = out->data + out->len;
    p = zigzag_raw(p, size);
    *p++ = 0; /* record attributes */
    p = zigzag_raw(p, delta);
    p = zigzag_raw(p, offset);
    p = kafka_bytes_raw(p, buf, m->ks, m->ke);
    p = kafka_bytes_raw(p, buf, m->vs, m->ve);
    memcpy(p, headers->data, (size_t)headers->len);
    out->len = p + headers->len - out->data;
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

typedef struct {
    Buf headers, props; /* one record's headers, one message's properties */
} Scratch;

/* One stored payload's records at offsets >= from as one RecordBatch v2 at the end of
 * `out`; nothing added (b->count == 0) when none are left. 1 as soon as `out` passes
 * `cap` bytes (the batch half made: the caller drops it), so a batch that cannot fit is
 * not converted whole only to be dropped (with ~1 MiB stored batches, every 1 MiB Fetch
 * met one: 40% of its conversion time). */
static int put_batch(Buf *out, Scratch *s, const unsigned char *buf, Py_ssize_t end,
                     uint64_t from, Py_ssize_t cap, Built *b) {
    Py_ssize_t at = out->len, p = 0;
    *b = (Built){0};
    if (buf_reserve(out, BATCH_HEADER + end) < 0) return -1;
    out->len += BATCH_HEADER;
    while (p < end) {
        Stored m;
        if (read_stored(buf, p, end, &m, &s->props, &p) < 0) return -1;
        if (m.entry < from) continue;
        if (put_record(out, &s->headers, buf, &m, (Prop *)s->props.data, b) < 0) return -1;
        if (out->len > cap) return 1;
    }
    if (b->count == 0)
        out->len = at;
    else
        put_batch_header(out->data + at, out->len - at, b);
    return 0;
}

typedef struct {
    Py_buffer *views; /* the payloads, pinned */
    Py_ssize_t n, limit, used;
    uint64_t from;
    int first;
    long long last;
    Buf out;
} Fetch;

/* The payloads' batches into f->out, in order, while they fit f->limit: the first one
 * always when f->first (Kafka's rule), so a batch larger than the limit is still read.
 * f->used: the payloads done (converted, or with no record left at f->from). Touches no
 * Python object: runs without the GIL. */
static int convert_all(Fetch *f) {
    Scratch s = {{0}};
    Py_ssize_t stored = 0; /* the answer's likely size: one allocation, no regrowth */
    for (Py_ssize_t i = 0; i < f->n; i++) stored += BATCH_HEADER + f->views[i].len;
    int rc = buf_reserve(&f->out, stored < f->limit ? stored : f->limit);
    for (; rc == 0 && f->used < f->n; f->used++) {
        Py_ssize_t at = f->out.len;
        Built b;
        const Py_buffer *v = &f->views[f->used];
        Py_ssize_t cap = f->first && at == 0 ? PY_SSIZE_T_MAX : f->limit;
        if ((rc = put_batch(&f->out, &s, v->buf, v->len, f->from, cap, &b)) < 0) break;
        if (rc == 1) { /* it does not fit: dropped */
            f->out.len = at;
            rc = 0;
            break;
        }
        if (b.count == 0) continue;
        f->last = (long long)b.last;
    }
    PyMem_RawFree(s.headers.data);
    PyMem_RawFree(s.props.data);
    return rc;
}

/* ---- the answer: the converted bytes, handed over without a copy ------------------ */

/* The block a conversion wrote, owned by a Python object that lends it as a read-only
 * buffer: fetched_batches answers a memoryview of it, so a 1 MiB Fetch's records are not
 * copied into a bytes object (the connection hands them to the socket as they are). */
typedef struct {
    PyObject_HEAD
    Buf out; /* PyMem_Raw: the conversion grew it without the GIL */
} Converted;

/* Blocks of answers gone, kept (with the GIL) for the next conversions: a ~1 MiB block
 * freed and allocated again a Fetch went back to the kernel each time (madvise) and was
 * faulted in again page by page as the next conversion wrote it. */
#define SPARE_BLOCKS 4
#define SPARE_MAX_BYTES (8 << 20) /* a larger block (a huge Fetch limit) is freed */
static Buf spare_blocks[SPARE_BLOCKS];
static int spare_count = 0;

/* A block for a conversion's answer: a spare one when there is one (GIL held). */
static Buf spare_take(void) {
    Buf b = {0};
    if (spare_count > 0) b = spare_blocks[--spare_count];
    b.len = 0;
    return b;
}

/* Keeps `b`'s block for a later conversion, or frees it (GIL held). */
static void spare_keep(Buf *b) {
    if (b->data && spare_count < SPARE_BLOCKS && b->cap <= SPARE_MAX_BYTES)
        spare_blocks[spare_count++] = *b;
    else
        PyMem_RawFree(b->data);
    *b = (Buf){0};
}

static int converted_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Converted *c = (Converted *)self;
    return PyBuffer_FillInfo(view, self, c->out.data, c->out.len, 1, flags); /* holds self */
}

static void converted_dealloc(PyObject *self) {
    spare_keep(&((Converted *)self)->out);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs converted_buffer = {converted_getbuffer, NULL};

static PyTypeObject ConvertedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "compactlog.server.kafka._records.Converted",
    .tp_basicsize = sizeof(Converted),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordBatch v2 bytes a Fetch's conversion wrote, lent as a read-only buffer",
    .tp_dealloc = converted_dealloc,
    .tp_as_buffer = &converted_buffer,
};

/* A memoryview of `out`'s bytes, whose block it takes over (out is empty after). */
static PyObject *converted_view(Buf *out) {
    PyObject *owner;
    if (out->len == 0) {
        owner = PyBytes_FromStringAndSize("", 0);
    } else if ((owner = (PyObject *)PyObject_New(Converted, &ConvertedType))) {
        ((Converted *)owner)->out = *out;
        *out = (Buf){0};
    }
    PyObject *view = owner ? PyMemoryView_FromObject(owner) : NULL;
    Py_XDECREF(owner);
    return view;
}

/* fetched_batches(payloads, start, limit, first) -> (memoryview, payloads used, last offset)
 * The payloads are pinned (their buffers held), then converted without the GIL. */
static PyObject *fetched_batches(PyObject *self, PyObject *args) {
    PyObject *payloads, *seq, *data, *result = NULL;
    long long start;
    Py_ssize_t limit, pinned = 0;
    int first, rc;
    if (!PyArg_ParseTuple(args, "OLnp", &payloads, &start, &limit, &first)) return NULL;
    if (!(seq = PySequence_Fast(payloads, "payloads must be a sequence"))) return NULL;
    Fetch f = {.limit = limit, .first = first, .last = -1, .out = spare_take()};
    f.from = start > 0 ? (uint64_t)start : 0;
    f.n = PySequence_Fast_GET_SIZE(seq);
    if (!(f.views = PyMem_Calloc((size_t)(f.n ? f.n : 1), sizeof(Py_buffer)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (; pinned < f.n; pinned++)
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, pinned), &f.views[pinned],
                               PyBUF_SIMPLE) < 0)
            goto done;
    Py_BEGIN_ALLOW_THREADS
    failure.deferred = 1, failure.no_memory = 0, failure.why[0] = 0;
    rc = convert_all(&f);
    failure.deferred = 0;
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_deferred();
        goto done;
    }
    if ((data = converted_view(&f.out)))
        result = Py_BuildValue("(NnL)", data, f.used, f.last);
done:
    for (Py_ssize_t i = 0; i < pinned; i++) PyBuffer_Release(&f.views[i]);
    PyMem_Free(f.views);
    spare_keep(&f.out); /* what the answer did not take: a failure's, or an empty one */
    Py_DECREF(seq);
    return result;
}

#endif
