package io.compactlog.spark;

import java.io.Serializable;

/**
 * How many entries one Spark partition of a read covers: compactlog/spark/sizing.py's
 * rule, the same numbers (its docstring says why). {@code fixed} is entriesPerPartition,
 * {@code minPartitions} the option of that name; 0 where not given.
 */
record Sizing(int cores, long fixed, long minPartitions) implements Serializable {
  static final long MIN_ENTRIES = 100_000;
  static final long MAX_ENTRIES = 5_000_000;

  /** Entries a Spark partition reads when the ranges, over {@code logs} logs, hold total. */
  long entries(long total, int logs) {
    long size = byRule(total, logs);
    if (minPartitions > 0 && logs < minPartitions) {
      size = Math.min(size, Math.max(total / minPartitions, 1));
    }
    return size;
  }

  private long byRule(long total, int logs) {
    if (fixed > 0) {
      return fixed;
    }
    if (logs >= cores) {
      return MAX_ENTRIES;
    }
    long n = Math.max(cores, 1);
    long share = (total + n - 1) / n;
    return Math.min(Math.max(share, MIN_ENTRIES), MAX_ENTRIES);
  }
}
