package io.compactlog.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;

/**
 * Builder, scan and batch in one: the columns Spark asks for, and the topic's ledgers cut
 * into about equal ranges of entries (GetTopicLayout's raw view), one Spark partition each.
 */
final class TopicScan implements ScanBuilder, SupportsPushDownRequiredColumns, Scan, Batch {
  private final ReadOptions options;
  private StructType required = Columns.SCHEMA;

  TopicScan(ReadOptions options) {
    this.options = options;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    required = requiredSchema;
  }

  @Override
  public Scan build() {
    return this;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    return "compactlog(" + options.topic() + ", columns " + required.simpleString() + ")";
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    List<long[]> ledgers;
    try (LogCalls calls = new LogCalls(options.server(), options.token())) {
      ledgers = calls.rawLedgers(options.topic());
    }
    return cut(ledgers, options.partitions()).toArray(new InputPartition[0]);
  }

  /** [start, end) ranges of about total / n entries each, along the ledgers in order. */
  static List<RangePartition> cut(List<long[]> ledgers, int n) {
    long total = 0;
    for (long[] l : ledgers) {
      total += l[2] - l[1] + 1;
    }
    List<RangePartition> out = new ArrayList<>();
    if (total <= 0) {
      return out;
    }
    long size = (total + n - 1) / n;
    long[] start = {ledgers.get(0)[0], ledgers.get(0)[1]};
    long taken = 0;
    for (int i = 0; i < ledgers.size(); i++) {
      long[] l = ledgers.get(i);
      for (long e = l[1]; e <= l[2]; ) {
        long left = l[2] - e + 1;
        if (left < size - taken) {
          taken += left;
          break;
        }
        e += size - taken;
        long[] end = e <= l[2] ? new long[] {l[0], e} : firstAfter(ledgers, i);
        out.add(new RangePartition(start[0], start[1], end[0], end[1]));
        start = end;
        taken = 0;
      }
    }
    if (taken > 0) {
      long[] last = ledgers.get(ledgers.size() - 1);
      out.add(new RangePartition(start[0], start[1], last[0], last[2] + 1));
    }
    return out;
  }

  /** The id after ledger i's last entry: the next ledger's first, or past the end. */
  private static long[] firstAfter(List<long[]> ledgers, int i) {
    if (i + 1 < ledgers.size()) {
      return new long[] {ledgers.get(i + 1)[0], ledgers.get(i + 1)[1]};
    }
    long[] l = ledgers.get(i);
    return new long[] {l[0], l[2] + 1};
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new RangeReaderFactory(options, required);
  }
}
