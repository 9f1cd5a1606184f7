/* The offset map's table and its hash, shared by the compiled twins of the offset map
 * (_offset_map.c: one key a call) and of its per-batch scans (_batch_scan.c: every record
 * of a stored batch in one call). Static functions: each extension gets its own copy.
 *
 *   hashes   bytearray, 16 bytes (the key's MD5) a slot
 *   offsets  array('q'), offset + 1 a slot, 0 an empty slot
 * Open addressing with double hashing: slot = first 8 digest bytes (little-endian) mod
 * slots, step = 1 + next 8 mod (slots - 1). MD5 is RFC 1321.
 */
#ifndef COMPACTLOG_OFFSET_TABLE_H
#define COMPACTLOG_OFFSET_TABLE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NEW (-1)
#define FULL (-2)

/* ---- MD5 (RFC 1321) --------------------------------------------------------------- */

static const uint32_t K[64] = {
    0xd76aa478u, 0xe8c7b756u, 0x242070dbu, 0xc1bdceeeu,
    0xf57c0fafu, 0x4787c62au, 0xa8304613u, 0xfd469501u,
    0x698098d8u, 0x8b44f7afu, 0xffff5bb1u, 0x895cd7beu,
    0x6b901122u, 0xfd987193u, 0xa679438eu, 0x49b40821u,
    0xf61e2562u, 0xc040b340u, 0x265e5a51u, 0xe9b6c7aau,
    0xd62f105du, 0x02441453u, 0xd8a1e681u, 0xe7d3fbc8u,
    0x21e1cde6u, 0xc33707d6u, 0xf4d50d87u, 0x455a14edu,
    0xa9e3e905u, 0xfcefa3f8u, 0x676f02d9u, 0x8d2a4c8au,
    0xfffa3942u, 0x8771f681u, 0x6d9d6122u, 0xfde5380cu,
    0xa4beea44u, 0x4bdecfa9u, 0xf6bb4b60u, 0xbebfbc70u,
    0x289b7ec6u, 0xeaa127fau, 0xd4ef3085u, 0x04881d05u,
    0xd9d4d039u, 0xe6db99e5u, 0x1fa27cf8u, 0xc4ac5665u,
    0xf4292244u, 0x432aff97u, 0xab9423a7u, 0xfc93a039u,
    0x655b59c3u, 0x8f0ccc92u, 0xffeff47du, 0x85845dd1u,
    0x6fa87e4fu, 0xfe2ce6e0u, 0xa3014314u, 0x4e0811a1u,
    0xf7537e82u, 0xbd3af235u, 0x2ad7d2bbu, 0xeb86d391u,
};


static inline uint32_t rol(uint32_t x, unsigned c) { return (x << c) | (x >> (32 - c)); }

#define F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define H(x, y, z) ((x) ^ (y) ^ (z))
#define I(x, y, z) ((y) ^ ((x) | ~(z)))
#define STEP(f, a, b, c, d, x, t, s) \
    (a) += f((b), (c), (d)) + (x) + (t);  \
    (a) = rol((a), (s)) + (b)

/* One 64-byte block, the 64 steps unrolled (round r uses function F, G, H, I). */
static void md5_block(uint32_t h[4], const uint8_t *p) {
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    STEP(F, a, b, c, d, w[0], K[0], 7);
    STEP(F, d, a, b, c, w[1], K[1], 12);
    STEP(F, c, d, a, b, w[2], K[2], 17);
    STEP(F, b, c, d, a, w[3], K[3], 22);
    STEP(F, a, b, c, d, w[4], K[4], 7);
    STEP(F, d, a, b, c, w[5], K[5], 12);
    STEP(F, c, d, a, b, w[6], K[6], 17);
    STEP(F, b, c, d, a, w[7], K[7], 22);
    STEP(F, a, b, c, d, w[8], K[8], 7);
    STEP(F, d, a, b, c, w[9], K[9], 12);
    STEP(F, c, d, a, b, w[10], K[10], 17);
    STEP(F, b, c, d, a, w[11], K[11], 22);
    STEP(F, a, b, c, d, w[12], K[12], 7);
    STEP(F, d, a, b, c, w[13], K[13], 12);
    STEP(F, c, d, a, b, w[14], K[14], 17);
    STEP(F, b, c, d, a, w[15], K[15], 22);
    STEP(G, a, b, c, d, w[1], K[16], 5);
    STEP(G, d, a, b, c, w[6], K[17], 9);
    STEP(G, c, d, a, b, w[11], K[18], 14);
    STEP(G, b, c, d, a, w[0], K[19], 20);
    STEP(G, a, b, c, d, w[5], K[20], 5);
    STEP(G, d, a, b, c, w[10], K[21], 9);
    STEP(G, c, d, a, b, w[15], K[22], 14);
    STEP(G, b, c, d, a, w[4], K[23], 20);
    STEP(G, a, b, c, d, w[9], K[24], 5);
    STEP(G, d, a, b, c, w[14], K[25], 9);
    STEP(G, c, d, a, b, w[3], K[26], 14);
    STEP(G, b, c, d, a, w[8], K[27], 20);
    STEP(G, a, b, c, d, w[13], K[28], 5);
    STEP(G, d, a, b, c, w[2], K[29], 9);
    STEP(G, c, d, a, b, w[7], K[30], 14);
    STEP(G, b, c, d, a, w[12], K[31], 20);
    STEP(H, a, b, c, d, w[5], K[32], 4);
    STEP(H, d, a, b, c, w[8], K[33], 11);
    STEP(H, c, d, a, b, w[11], K[34], 16);
    STEP(H, b, c, d, a, w[14], K[35], 23);
    STEP(H, a, b, c, d, w[1], K[36], 4);
    STEP(H, d, a, b, c, w[4], K[37], 11);
    STEP(H, c, d, a, b, w[7], K[38], 16);
    STEP(H, b, c, d, a, w[10], K[39], 23);
    STEP(H, a, b, c, d, w[13], K[40], 4);
    STEP(H, d, a, b, c, w[0], K[41], 11);
    STEP(H, c, d, a, b, w[3], K[42], 16);
    STEP(H, b, c, d, a, w[6], K[43], 23);
    STEP(H, a, b, c, d, w[9], K[44], 4);
    STEP(H, d, a, b, c, w[12], K[45], 11);
    STEP(H, c, d, a, b, w[15], K[46], 16);
    STEP(H, b, c, d, a, w[2], K[47], 23);
    STEP(I, a, b, c, d, w[0], K[48], 6);
    STEP(I, d, a, b, c, w[7], K[49], 10);
    STEP(I, c, d, a, b, w[14], K[50], 15);
    STEP(I, b, c, d, a, w[5], K[51], 21);
    STEP(I, a, b, c, d, w[12], K[52], 6);
    STEP(I, d, a, b, c, w[3], K[53], 10);
    STEP(I, c, d, a, b, w[10], K[54], 15);
    STEP(I, b, c, d, a, w[1], K[55], 21);
    STEP(I, a, b, c, d, w[8], K[56], 6);
    STEP(I, d, a, b, c, w[15], K[57], 10);
    STEP(I, c, d, a, b, w[6], K[58], 15);
    STEP(I, b, c, d, a, w[13], K[59], 21);
    STEP(I, a, b, c, d, w[4], K[60], 6);
    STEP(I, d, a, b, c, w[11], K[61], 10);
    STEP(I, c, d, a, b, w[2], K[62], 15);
    STEP(I, b, c, d, a, w[9], K[63], 21);
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

static void md5(const uint8_t *data, size_t len, uint8_t out[16]) {
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    size_t i = 0;
    for (; i + 64 <= len; i += 64) md5_block(h, data + i);
    uint8_t tail[128];
    size_t rest = len - i;
    size_t total = rest + 9 <= 64 ? 64 : 128;
    memcpy(tail, data + i, rest);
    tail[rest] = 0x80;
    memset(tail + rest + 1, 0, total - rest - 9);
    uint64_t bits = (uint64_t)len * 8;
    for (int j = 0; j < 8; j++) tail[total - 8 + j] = (uint8_t)(bits >> (8 * j));
    md5_block(h, tail);
    if (total == 128) md5_block(h, tail + 64);
    for (int j = 0; j < 4; j++) {
        out[4 * j] = (uint8_t)h[j];
        out[4 * j + 1] = (uint8_t)(h[j] >> 8);
        out[4 * j + 2] = (uint8_t)(h[j] >> 16);
        out[4 * j + 3] = (uint8_t)(h[j] >> 24);
    }
}

/* ---- the table ------------------------------------------------------------------- */

static inline uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The slot holding `digest`, or the first free one on its probe sequence; -1 if none. */
static Py_ssize_t find(const uint8_t *hashes, const int64_t *offsets, Py_ssize_t slots,
                       const uint8_t *digest) {
    uint64_t n = (uint64_t)slots;
    uint64_t slot = le64(digest) % n;
#if defined(__GNUC__)
    __builtin_prefetch(hashes + (slot << 4)); /* its two cache misses overlap */
#endif
    if (!offsets[slot] || memcmp(hashes + (slot << 4), digest, 16) == 0) return (Py_ssize_t)slot;
    uint64_t step = 1 + le64(digest + 8) % (n > 1 ? n - 1 : 1);
    for (uint64_t i = 0; i + 1 < n; i++) {
        slot = (slot + step) % n;
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
