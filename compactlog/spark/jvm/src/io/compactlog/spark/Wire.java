package io.compactlog.spark;

import java.io.ByteArrayOutputStream;

/**
 * The few protobuf encodings the reader needs (proto/compactlog/v1/compactlog.proto), by
 * hand: a ReadRequest and the one-name requests written, varints and fields read in
 * place from a response's bytes, so no message object is made per message.
 */
final class Wire {
  static final int VARINT = 0;
  static final int FIXED64 = 1;
  static final int LEN = 2;
  static final int FIXED32 = 5;

  private Wire() {}

  /** A cursor over one buffer: the field just read (number, wire type, value or span). */
  static final class Reader {
    final byte[] buf;
    int pos;
    final int end;
    int number;
    int wire;
    long varint;
    int start;
    int stop;

    Reader(byte[] buf, int from, int end) {
      this.buf = buf;
      this.pos = from;
      this.end = end;
    }

    boolean next() {
      if (pos >= end) {
        return false;
      }
      long tag = readVarint();
      number = (int) (tag >>> 3);
      wire = (int) (tag & 7);
      switch (wire) {
        case VARINT -> varint = readVarint();
        case FIXED64 -> skip(8);
        case FIXED32 -> skip(4);
        case LEN -> {
          long n = readVarint();
          if (n < 0 || n > end - pos) {
            throw new IllegalStateException("malformed Read response: field past its end");
          }
          start = pos;
          stop = pos + (int) n;
          pos = stop;
        }
        default -> throw new IllegalStateException("malformed Read response: wire type " + wire);
      }
      return true;
    }

    private void skip(int n) {
      if (n > end - pos) {
        throw new IllegalStateException("malformed Read response: field past its end");
      }
      pos += n;
    }

    private long readVarint() {
      long v = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= end) {
          throw new IllegalStateException("malformed Read response: varint past its end");
        }
        byte b = buf[pos++];
        v |= (long) (b & 0x7f) << shift;
        if (b >= 0) {
          return v;
        }
      }
      throw new IllegalStateException("malformed Read response: varint too long");
    }
  }

  /** ReadRequest{topic, message_id{ledger, entry}, read_compacted, max_messages}. */
  static byte[] readRequest(String topic, long ledger, long entry, boolean compacted, long limit) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    bytesField(out, 1, topic.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    ByteArrayOutputStream id = new ByteArrayOutputStream();
    varintField(id, 1, ledger);
    varintField(id, 2, entry);
    bytesField(out, 3, id.toByteArray());
    if (compacted) {
      varintField(out, 5, 1);
    }
    if (limit > 0 && limit <= 0xFFFFFFFFL) { // max_messages is a uint32
      varintField(out, 6, limit);
    }
    return out.toByteArray();
  }

  /** GetTopicRequest{name} and GetTopicLayoutRequest{topic}: the name is field 1 of both. */
  static byte[] nameRequest(String topic) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    bytesField(out, 1, topic.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    return out.toByteArray();
  }

  private static void varintField(ByteArrayOutputStream out, int number, long v) {
    varint(out, ((long) number << 3) | VARINT);
    varint(out, v);
  }

  private static void bytesField(ByteArrayOutputStream out, int number, byte[] b) {
    varint(out, ((long) number << 3) | LEN);
    varint(out, b.length);
    out.write(b, 0, b.length);
  }

  private static void varint(ByteArrayOutputStream out, long v) {
    while ((v & ~0x7fL) != 0) {
      out.write((int) ((v & 0x7f) | 0x80));
      v >>>= 7;
    }
    out.write((int) v);
  }
}
