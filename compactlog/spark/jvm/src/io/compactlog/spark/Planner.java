package io.compactlog.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A batch read's ranges from earliest to latest, cut as compactlog/spark/planning.py cuts
 * them (discover, plan, ledger_spans, cut_many): every topic partition of the topics,
 * cut every {@code sizing.entries(total)} entries, counted by arithmetic on SEGMENTED
 * and single-ledger ranges and by the raw ledger layout over several ledgers (without
 * it, one range a topic partition). Same ranges as the Python source for the same read.
 */
final class Planner {
  /** One topic partition: the option's name, the partition (-1: none), the stored log. */
  record Log(String topic, int partition, String log, LogShape shape) {}

  private Planner() {}

  /** Every topic partition of {@code topics} with its shape, in the options' order. */
  static List<Log> discover(LogCalls calls, List<String> topics) {
    List<Log> out = new ArrayList<>();
    for (String topic : topics) {
      LogShape shape = calls.topic(topic);
      if (shape.partitions() <= 1) {
        out.add(new Log(topic, -1, topic, shape));
        continue;
      }
      for (int i = 0; i < shape.partitions(); i++) {
        String log = topic + "-partition-" + i;
        out.add(new Log(topic, i, log, calls.topic(log)));
      }
    }
    return out;
  }

  /** The ranges of {@code logs} from earliest to latest. */
  static List<RangePartition> plan(
      LogCalls calls, List<Log> logs, boolean compacted, Sizing sizing) {
    List<Log> todo = new ArrayList<>();
    List<List<long[]>> spans = new ArrayList<>();
    long total = 0;
    for (Log l : logs) {
      Position start = l.shape().earliest();
      Position end = l.shape().latest();
      if (start.compareTo(end) < 0) {
        List<long[]> s = spans(calls, l, start, end);
        todo.add(l);
        spans.add(s);
        total += s == null ? 0 : entriesIn(s, start, end);
      }
    }
    long size = sizing.entries(total, todo.size());
    List<RangePartition> out = new ArrayList<>();
    for (int i = 0; i < todo.size(); i++) {
      Log l = todo.get(i);
      Position end = l.shape().latest();
      Position lo = l.shape().earliest();
      List<Position> cuts = spans.get(i) == null ? List.of() : cut(spans.get(i), lo, end, size);
      for (Position hi : cuts) {
        out.add(range(l, lo, hi, compacted));
        lo = hi;
      }
      out.add(range(l, lo, end, compacted));
    }
    return out;
  }

  private static RangePartition range(Log l, Position lo, Position hi, boolean compacted) {
    boolean counted = l.shape().segmented() || lo.ledger() == hi.ledger();
    long limit = counted ? hi.entry() - lo.entry() : 0;
    return new RangePartition(l.topic(), l.partition(), l.log(), lo, hi, compacted, limit);
  }

  /** {ledger, first, last} entries [start, end) may hold, in id order; null: no layout. */
  private static List<long[]> spans(LogCalls calls, Log l, Position start, Position end) {
    if (l.shape().segmented() || start.ledger() == end.ledger()) {
      return List.of(new long[] {start.ledger(), start.entry(), end.entry() - 1});
    }
    List<long[]> ledgers = calls.rawLedgers(l.log());
    if (ledgers == null) {
      return null;
    }
    List<long[]> sorted = new ArrayList<>(ledgers);
    sorted.sort(
        Comparator.<long[]>comparingLong(s -> s[0])
            .thenComparingLong(s -> s[1])
            .thenComparingLong(s -> s[2]));
    return sorted;
  }

  /** {ledger, lo, hi}: the entries [lo, hi) of each span inside [start, end). */
  private static List<long[]> clipped(List<long[]> spans, Position start, Position end) {
    List<long[]> out = new ArrayList<>();
    for (long[] s : spans) {
      Position lo = Position.max(new Position(s[0], s[1]), start);
      Position hi = Position.min(new Position(s[0], s[2] + 1), end);
      if (lo.compareTo(hi) < 0) {
        out.add(new long[] {s[0], lo.entry(), hi.entry()});
      }
    }
    return out;
  }

  private static long entriesIn(List<long[]> spans, Position start, Position end) {
    long n = 0;
    for (long[] c : clipped(spans, start, end)) {
      n += c[2] - c[1];
    }
    return n;
  }

  /** Split points after every {@code size} entries inside [start, end), never on start. */
  static List<Position> cut(List<long[]> spans, Position start, Position end, long size) {
    List<Position> points = new ArrayList<>();
    long filled = 0;
    for (long[] c : clipped(spans, start, end)) {
      long entry = c[1];
      while (entry < c[2]) {
        if (filled == size) {
          points.add(new Position(c[0], entry));
          filled = 0;
        }
        long step = Math.min(size - filled, c[2] - entry);
        entry += step;
        filled += step;
      }
    }
    return points;
  }
}
