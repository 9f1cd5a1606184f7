package io.compactlog.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("compactlog")} where compactlog.spark.register added this jar to the
 * session: batch reads it can take go to the JVM scan (columnar, pruned columns), and
 * everything else (streams, writes, every other batch read) to the Python source, which
 * register() then names {@value #PYTHON_NAME}, reached through Spark's own wrapper of
 * Python data sources ({@code PythonDataSourceV2}, internal to Spark 4: where it is
 * missing or differs the jar does not compile, and register() keeps the Python source
 * as {@code compactlog}). The Python source is the one copy of the options' checks.
 */
public final class CompactlogProvider implements TableProvider, DataSourceRegister {
  /** The name register() gives the Python source when this provider is in the session. */
  static final String PYTHON_NAME = "compactlog-python";

  private final PythonDataSourceV2 python = new PythonDataSourceV2();

  public CompactlogProvider() {
    python.setShortName(PYTHON_NAME);
  }

  @Override
  public String shortName() {
    return "compactlog";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Columns.SCHEMA; // the Python source's fixed columns, without a Python worker
  }

  @Override
  public boolean supportsExternalMetadata() {
    return python.supportsExternalMetadata(); // a write hands its DataFrame's schema
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> props) {
    Table table = python.getTable(schema, partitioning, props);
    return new SourceTable(table, schema.equals(Columns.SCHEMA));
  }
}
