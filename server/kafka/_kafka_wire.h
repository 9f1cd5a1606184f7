/* Kafka's side of the records twin (server/kafka/_records.c): CRC-32C, the batch
 * header's big-endian fields and zigzag varints, for both directions.
 *
 * Static functions: included once, by _records.c.
 */
#ifndef COMPACTLOG_KAFKA_WIRE_H
#define COMPACTLOG_KAFKA_WIRE_H
#include <stdint.h>
#include <string.h>

#define BATCH_HEADER 61 /* base offset .. record count */
#define LOG_OVERHEAD 12 /* base offset, length */

/* ---- CRC-32C (Castagnoli), reflected: the CPU's instruction, else slicing by 8 ------ */

static uint32_t crc_table[8][256];

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define CRC_HW 1
static int crc_hw = 0; /* SSE 4.2's crc32 instruction: ~5x the tables' rate */

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const unsigned char *p,
                                                             Py_ssize_t n) {
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#ifdef CRC_HW
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_tables(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8, n -= 8;
    }
    while (n-- > 0) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t crc32c(const unsigned char *p, Py_ssize_t n) {
#ifdef CRC_HW
    if (crc_hw) return crc32c_hw(p, n);
#endif
    return crc32c_tables(p, n);
}

/* ---- Kafka's fixed-width big-endian fields and zigzag varints --------------------- */

static uint64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

static void put_be(unsigned char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

static int buf_zigzag(Buf *b, int64_t v) {
    return buf_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

#endif
