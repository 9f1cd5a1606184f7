/* The offset map's table and its hash, shared by the compiled twins of the offset map
 * (_offset_map.c: one key a call) and of its per-batch scans (_batch_scan.c: every record
 * of a stored batch in one call). Static functions: each extension gets its own copy.
 *
 *   hashes   bytearray, 16 bytes (the key's digest: SipHash-2-4-128, below) a slot
 *   offsets  array('q'), offset + 1 a slot, 0 an empty slot
 * Open addressing with double hashing over a prime number of slots: slot = the first 8
 * digest bytes (little-endian) scaled into [0, slots), step = 1 + the next 8 scaled into
 * [0, slots - 1) (scale: below).
 */
#ifndef COMPACTLOG_OFFSET_TABLE_H
#define COMPACTLOG_OFFSET_TABLE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NEW (-1)
#define FULL (-2)

/* ---- the key digest: SipHash-2-4, 128-bit output ------------------------------------
 *
 * Aumasson and Bernstein's SipHash with 2 compression and 4 finalization rounds and its
 * 128-bit output (v1 ^= 0xee at the start, v2 ^= 0xee before the first 4 finalization
 * rounds, v1 ^= 0xdd before the second 4), under the fixed 16-byte key DIGEST_KEY. It
 * replaced MD5: for the short keys of a keyed log it costs about a fifth of an MD5 block,
 * and no practical collision attack on it is known (MD5 collisions are made in seconds).
 * Output: the two 64-bit halves, little-endian, first half first.
 */

static const uint8_t DIGEST_KEY[16] = {'c', 'o', 'm', 'p', 'a', 'c', 't', 'l',
                                       'o', 'g', ' ', 'o', 'f', 'f', 's', 'm'};

static inline uint64_t le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void put_le64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline uint64_t rotl64(uint64_t x, unsigned c) { return (x << c) | (x >> (64 - c)); }

#define SIPROUND(v0, v1, v2, v3)                                                           \
    do {                                                                                   \
        v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);                      \
        v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                                           \
        v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                                           \
        v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);                      \
    } while (0)

/* SipHash-2-4-128 of data[0, len) under `key` into `out`; returns its first half (as a
 * register: the caller's slot needs no reload of the bytes just stored). */
static inline uint64_t siphash128(const uint8_t key[16], const uint8_t *data, size_t len,
                                  uint8_t out[16]) {
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull ^ 0xee;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t m = le64(data + i);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t j = 0; i + j < len; j++) b |= (uint64_t)data[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xee;
    for (int r = 0; r < 4; r++) SIPROUND(v0, v1, v2, v3);
    uint64_t first = v0 ^ v1 ^ v2 ^ v3;
    put_le64(out, first);
    v1 ^= 0xdd;
    for (int r = 0; r < 4; r++) SIPROUND(v0, v1, v2, v3);
    put_le64(out + 8, v0 ^ v1 ^ v2 ^ v3);
    return first;
}

/* The digest the map takes as a key's identity; returns its first 8 bytes as a number. */
static inline uint64_t digest_key(const uint8_t *data, size_t len, uint8_t out[16]) {
    return siphash128(DIGEST_KEY, data, len, out);
}

/* ---- the table ------------------------------------------------------------------- */

/* h scaled into [0, n): the high 64 bits of h * n (Lemire's multiply-shift), which maps a
 * uniform h uniformly onto the slots without a 64-bit division (tens of cycles each). */
static inline uint64_t scale(uint64_t h, uint64_t n) {
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)h * n) >> 64);
#else
    uint64_t hl = h & 0xffffffffu, hh = h >> 32, nl = n & 0xffffffffu, nh = n >> 32;
    uint64_t mid = (hl * nl >> 32) + (hh * nl & 0xffffffffu) + (hl * nh & 0xffffffffu);
    return hh * nh + (hh * nl >> 32) + (hl * nh >> 32) + (mid >> 32);
#endif
}

/* The first slot of a digest's probe sequence. */
static inline uint64_t first_slot(const uint8_t *digest, uint64_t n) { return scale(le64(digest), n); }

/* The slot holding `digest`, or the first free one on its probe sequence; -1 if none.
 * Double hashing: slot = scale(first 8 bytes, n), step = 1 + scale(next 8, n - 1); n is
 * prime, so every step is coprime with it and the sequence visits every slot. */
static Py_ssize_t find(const uint8_t *hashes, const int64_t *offsets, Py_ssize_t slots,
                       const uint8_t *digest) {
    uint64_t n = (uint64_t)slots;
    uint64_t slot = first_slot(digest, n);
#if defined(__GNUC__)
    __builtin_prefetch(hashes + (slot << 4)); /* its two cache misses overlap */
#endif
    if (!offsets[slot] || memcmp(hashes + (slot << 4), digest, 16) == 0) return (Py_ssize_t)slot;
    uint64_t step = 1 + scale(le64(digest + 8), n - 1);
    for (uint64_t i = 0; i + 1 < n; i++) {
        slot += step;
        if (slot >= n) slot -= n;
        if (!offsets[slot] || memcmp(hashes + (slot << 4), digest, 16) == 0)
            return (Py_ssize_t)slot;
    }
    return -1;
}

/* The two buffers of a table, checked: 16 bytes of hash and one int64 per slot. */
typedef struct {
    Py_buffer hashes, offsets;
    Py_ssize_t slots;
} Table;

static int table_open(Table *t, PyObject *hashes, PyObject *offsets) {
    if (PyObject_GetBuffer(hashes, &t->hashes, PyBUF_WRITABLE) < 0) return -1;
    if (PyObject_GetBuffer(offsets, &t->offsets, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&t->hashes);
        return -1;
    }
    t->slots = t->offsets.len / 8;
    if (t->offsets.itemsize != 8 || t->slots < 1 || t->hashes.len != t->slots * 16) {
        PyBuffer_Release(&t->hashes);
        PyBuffer_Release(&t->offsets);
        PyErr_SetString(PyExc_ValueError, "offset map: 16 hash bytes and 8 offset bytes a slot");
        return -1;
    }
    return 0;
}

static void table_close(Table *t) {
    PyBuffer_Release(&t->hashes);
    PyBuffer_Release(&t->offsets);
}

/* Map `digest` to `value` (the map's exchange); FULL and no change when it is new and
 * `can_add` is false or no slot is free. */
static inline long long table_exchange(uint8_t *hashes, int64_t *offsets, Py_ssize_t slots,
                                       const uint8_t *digest, long long value, int can_add) {
    Py_ssize_t slot = find(hashes, offsets, slots, digest);
    if (slot < 0) return FULL;
    int64_t stored = offsets[slot];
    if (!stored) {
        if (!can_add) return FULL;
        memcpy(hashes + ((size_t)slot << 4), digest, 16);
    }
    offsets[slot] = value + 1;
    return stored ? stored - 1 : NEW;
}

/* The value mapped to `digest`, or -1. */
static inline long long table_get(const uint8_t *hashes, const int64_t *offsets,
                                  Py_ssize_t slots, const uint8_t *digest) {
    Py_ssize_t slot = find(hashes, offsets, slots, digest);
    return slot >= 0 ? offsets[slot] - 1 : -1;
}

#endif
