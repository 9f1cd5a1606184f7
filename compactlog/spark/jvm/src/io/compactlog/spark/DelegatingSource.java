package io.compactlog.spark;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Experiment for the name question of issue 29: one JVM provider whose batch reads are the
 * prototype's columnar scan and whose streams and writes are the Python source registered
 * as {@code compactlog} in the session, reached through Spark's own wrapper of Python data
 * sources ({@code PythonDataSourceV2}, an internal class of Spark 4.3, not a public API).
 * Used by class name: {@code format("io.compactlog.spark.DelegatingSource")}.
 */
public final class DelegatingSource implements TableProvider {
  private final PythonDataSourceV2 python = new PythonDataSourceV2();
  private final CompactlogSource jvm = new CompactlogSource();

  public DelegatingSource() {
    python.setShortName("compactlog");
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return python.inferSchema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> props) {
    Table py = python.getTable(schema, partitioning, props);
    return new Both(py, (SupportsRead) jvm.getTable(schema, partitioning, props));
  }

  /** The Python source's table, but for the batch scan. */
  static final class Both implements SupportsRead, SupportsWrite {
    private final Table py;
    private final SupportsRead jvm;

    Both(Table py, SupportsRead jvm) {
      this.py = py;
      this.jvm = jvm;
    }

    @Override
    public String name() {
      return py.name();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return py.schema();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return py.capabilities();
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return ((SupportsWrite) py).newWriteBuilder(info);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      ScanBuilder pyScan = ((SupportsRead) py).newScanBuilder(options);
      ScanBuilder jvmScan = jvm.newScanBuilder(options);
      return new Builder(pyScan, jvmScan);
    }
  }

  /** Columns pruned for the batch scan; a stream is the Python scan's, every column. */
  static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
    private final ScanBuilder py;
    private final ScanBuilder jvm;

    Builder(ScanBuilder py, ScanBuilder jvm) {
      this.py = py;
      this.jvm = jvm;
    }

    @Override
    public void pruneColumns(StructType required) {
      ((SupportsPushDownRequiredColumns) jvm).pruneColumns(required);
    }

    @Override
    public Scan build() {
      Scan batch = jvm.build();
      return new Scan() {
        @Override
        public StructType readSchema() {
          return batch.readSchema();
        }

        @Override
        public Batch toBatch() {
          return batch.toBatch();
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
          return py.build().toMicroBatchStream(checkpointLocation);
        }
      };
    }
  }
}
