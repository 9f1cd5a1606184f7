package io.compactlog.spark;

import java.io.Serializable;

/**
 * A message id (ledger, entry), ordered as compactlog.records.MessageId: a SEGMENTED
 * topic's offset is (0, offset). Ids stay below 2^63, so signed order is id order.
 */
record Position(long ledger, long entry) implements Comparable<Position>, Serializable {
  static final Position ZERO = new Position(0, 0);

  @Override
  public int compareTo(Position other) {
    int byLedger = Long.compare(ledger, other.ledger);
    return byLedger != 0 ? byLedger : Long.compare(entry, other.entry);
  }

  static Position max(Position a, Position b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  static Position min(Position a, Position b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  /** A MessageId message at [from, to) of buf. */
  static Position parse(byte[] buf, int from, int to) {
    long ledger = 0;
    long entry = 0;
    Wire.Reader id = new Wire.Reader(buf, from, to);
    while (id.next()) {
      if (id.number == 1 && id.wire == Wire.VARINT) {
        ledger = id.varint;
      } else if (id.number == 2 && id.wire == Wire.VARINT) {
        entry = id.varint;
      }
    }
    return new Position(ledger, entry);
  }
}
