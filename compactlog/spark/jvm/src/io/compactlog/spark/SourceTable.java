package io.compactlog.spark;

import java.util.Set;
import java.util.function.Supplier;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python source's table (PythonDataSourceV2's), but for its name and the choice of a
 * read's scan: its schema, capabilities and writes (batch and streaming) are the Python
 * source's, so a write or a stream behaves exactly as it does without the JVM reader.
 * The table is one {@code load()}'s: the JVM scan's ranges, planned at its first query,
 * serve its later ones, as the Python source's ranges do (a DataFrame read twice reads
 * the same messages, not those published in between).
 */
final class SourceTable implements SupportsRead, SupportsWrite {
  private final Table python;
  private final boolean fixedColumns;
  private RangePartition[] ranges;

  /** {@code fixedColumns}: the table has the source's nine columns (no user schema). */
  SourceTable(Table python, boolean fixedColumns) {
    this.python = python;
    this.fixedColumns = fixedColumns;
  }

  /** The name the user gave (Spark's messages name the table: "... does not support"). */
  @Override
  public String name() {
    return "compactlog";
  }

  @Override
  @SuppressWarnings("deprecation")
  public org.apache.spark.sql.types.StructType schema() {
    return python.schema();
  }

  @Override
  public Set<TableCapability> capabilities() {
    return python.capabilities();
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new ChoosingScanBuilder(this, (SupportsRead) python, options, fixedColumns);
  }

  /** The ranges planned at the first query ({@code plan}'s), null while none could be. */
  synchronized RangePartition[] ranges(Supplier<RangePartition[]> plan) {
    if (ranges == null) {
      ranges = plan.get();
    }
    return ranges;
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) python).newWriteBuilder(info);
  }
}
