package io.compactlog.spark;

import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.sparkproject.connect.grpc.StatusRuntimeException;

/**
 * Columnar readers only: a task reads its range with one Read stream over a channel of
 * its own, and hands Spark one ColumnarBatch per Read response (BatchBuilder).
 */
final class RangeReaderFactory implements PartitionReaderFactory {
  private final ReadOptions options;
  private final StructType required;

  RangeReaderFactory(ReadOptions options, StructType required) {
    this.options = options;
    this.required = required;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("compactlog reads are columnar");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new RangeReader(options, required, (RangePartition) partition);
  }

  /**
   * One task's Read stream, over a channel of its own; a start that retention removed
   * since planning fails it as data loss ({@link DataLoss}).
   */
  static final class RangeReader implements PartitionReader<ColumnarBatch> {
    private final RangePartition range;
    private final LogCalls calls;
    private final Iterator<byte[]> responses;
    private final BatchBuilder builder;

    RangeReader(ReadOptions options, StructType required, RangePartition range) {
      this.range = range;
      calls = new LogCalls(options.server(), options.token());
      responses = calls.read(range.log(), range.start(), range.compacted(), range.limit());
      Position end = range.end();
      builder =
          new BatchBuilder(required, range.topic(), range.partition(), end.ledger(), end.entry());
    }

    @Override
    public boolean next() {
      try {
        while (!builder.stopped && responses.hasNext()) {
          if (builder.fill(responses.next()) > 0) {
            return true;
          }
        }
        return false;
      } catch (StatusRuntimeException e) {
        throw DataLoss.of(e, calls, range, position());
      }
    }

    /** Where the stream is: after the last message read, else the range's start. */
    private Position position() {
      return builder.lastEntry < 0
          ? range.start()
          : new Position(builder.lastLedger, builder.lastEntry + 1);
    }

    @Override
    public ColumnarBatch get() {
      return builder.batch();
    }

    @Override
    public void close() {
      calls.close();
    }
  }
}
