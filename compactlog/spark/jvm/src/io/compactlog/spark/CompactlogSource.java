package io.compactlog.spark;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Prototype: a JVM DataSource V2 for batch reads of one LEDGER topic, used with its class
 * name in {@code spark.read.format("io.compactlog.spark.CompactlogSource")}. Options:
 * {@code server}, {@code topic}, {@code readCompacted}, {@code token}, {@code partitions}
 * (default: the session's default parallelism). It measures what a reader that hands
 * Spark ColumnarBatches of the pruned columns reaches (issue 29); it is not the source.
 */
public final class CompactlogSource implements TableProvider {
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Columns.SCHEMA;
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new TopicTable();
  }

  /** The topic as a table that can only be read in batch. */
  static final class TopicTable implements SupportsRead {
    @Override
    public String name() {
      return "compactlog";
    }

    @Override
    public StructType schema() {
      return Columns.SCHEMA;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new TopicScan(ReadOptions.of(options));
    }
  }
}
