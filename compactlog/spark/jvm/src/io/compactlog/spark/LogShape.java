package io.compactlog.spark;

/**
 * What planning needs of one topic partition, from its GetTopic answer (TopicInfo): its
 * kind, its bounds now and its partition count; compactlog/spark/planning.py's LogShape.
 * LEDGER topics span [0:0, after the last confirmed id); SEGMENTED ones [log start
 * offset, log end offset), as (0, offset).
 */
record LogShape(boolean segmented, Position earliest, Position latest, int partitions) {
  private static final long SEGMENTED = 2;

  static LogShape parse(byte[] info) {
    long kind = 0;
    long partitions = 0;
    long logStart = 0;
    Position last = null;
    Wire.Reader r = new Wire.Reader(info, 0, info.length);
    while (r.next()) {
      if (r.number == 2 && r.wire == Wire.VARINT) {
        kind = r.varint;
      } else if (r.number == 22 && r.wire == Wire.VARINT) {
        partitions = r.varint;
      } else if (r.number == 4 && r.wire == Wire.LEN) {
        Wire.Reader stats = new Wire.Reader(info, r.start, r.stop);
        while (stats.next()) {
          if (stats.number == 9 && stats.wire == Wire.VARINT) {
            logStart = stats.varint;
          } else if (stats.number == 6 && stats.wire == Wire.LEN) {
            last = Position.parse(info, stats.start, stats.stop);
          }
        }
      }
    }
    int count = (int) Math.min(partitions, Integer.MAX_VALUE);
    if (kind == SEGMENTED) {
      Position start = new Position(0, logStart);
      Position end = last != null ? new Position(0, last.entry() + 1) : start;
      return new LogShape(true, start, Position.max(start, end), count);
    }
    Position end = last != null ? new Position(last.ledger(), last.entry() + 1) : Position.ZERO;
    return new LogShape(false, Position.ZERO, end, count);
  }
}
