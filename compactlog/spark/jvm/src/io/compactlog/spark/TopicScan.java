package io.compactlog.spark;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.StructType;

/**
 * The JVM scan of one batch read: the columns Spark asked for and the ranges planned
 * when the scan was built (a batch query reads what existed then), one Spark partition
 * each, read columnar by {@link RangeReaderFactory}.
 */
final class TopicScan implements Scan, Batch {
  private final ReadOptions options;
  private final StructType required;
  private final RangePartition[] ranges;

  TopicScan(ReadOptions options, StructType required, RangePartition[] ranges) {
    this.options = options;
    this.required = required;
    this.ranges = ranges;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    return "compactlog JVM scan(" + String.join(",", options.topics()) + ")";
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    return ranges.clone();
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new RangeReaderFactory(options, required);
  }
}
