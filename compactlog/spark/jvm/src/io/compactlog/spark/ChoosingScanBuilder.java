package io.compactlog.spark;

import java.util.List;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Chooses, when Spark builds a read's scan, which scan serves it. The JVM scan takes a
 * batch read whose options {@link ReadOptions#taken} accepts, once its first calls to
 * the server (the topics, their layout) have answered. A stream's scan is built in its
 * query's thread, which carries the query's id as a local property: streams, and batch
 * reads inside a stream's foreachBatch with them, go to the Python source. Everything
 * else, and any error of those calls (an unknown topic, a server down, a token
 * refused), is the Python source's scan, which then does what it does today, errors and
 * their messages included.
 */
final class ChoosingScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns {
  private final SourceTable table;
  private final SupportsRead python;
  private final CaseInsensitiveStringMap options;
  private final boolean fixedColumns;
  // StreamExecution.QUERY_ID_KEY: set in a streaming query's threads
  private static final String QUERY_ID_KEY = "sql.streaming.queryId";

  private StructType required = Columns.SCHEMA;

  ChoosingScanBuilder(
      SourceTable table, SupportsRead python, CaseInsensitiveStringMap options, boolean fixed) {
    this.table = table;
    this.python = python;
    this.options = options;
    this.fixedColumns = fixed;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    required = requiredSchema;
  }

  @Override
  public Scan build() {
    SparkContext context = SparkSession.active().sparkContext();
    boolean batch = context.getLocalProperty(QUERY_ID_KEY) == null;
    ReadOptions taken = batch && fixedColumns ? ReadOptions.taken(options) : null;
    RangePartition[] ranges = taken == null ? null : table.ranges(() -> planned(taken, context));
    if (ranges == null) {
      return python.newScanBuilder(options).build();
    }
    return new TopicScan(taken, required, ranges);
  }

  /** The read's ranges; null where a call failed (the Python source will say why). */
  private static RangePartition[] planned(ReadOptions options, SparkContext context) {
    int cores = context.defaultParallelism();
    try (LogCalls calls = new LogCalls(options.server(), options.token())) {
      List<Planner.Log> logs = Planner.discover(calls, options.topics());
      return Planner.plan(calls, logs, options.compacted(), options.sizing(cores))
          .toArray(new RangePartition[0]);
    } catch (RuntimeException e) {
      return null;
    }
  }
}
