package io.compactlog.spark;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One Read response's messages as a ColumnarBatch of the pruned columns only, filled
 * straight from the response bytes (the Java counterpart of compactlog/spark/_columns.c).
 * The vectors are reused response after response, as Spark's Parquet reader does.
 */
final class BatchBuilder {
  private final int[] columns;
  private final OnHeapColumnVector[] vectors;
  private final ColumnarBatch batch;
  private final byte[] topic;
  private final int partition;
  private final long endLedger;
  private final long endEntry;
  private int capacity = 4096;
  boolean stopped;
  long lastLedger = -1;
  long lastEntry = -1;

  BatchBuilder(StructType required, String topic, int partition, long endLedger, long endEntry) {
    this.columns = Columns.indexes(required);
    this.vectors = OnHeapColumnVector.allocateColumns(capacity, required);
    this.batch = new ColumnarBatch(vectors);
    this.topic = topic.getBytes(StandardCharsets.UTF_8);
    this.partition = partition;
    this.endLedger = endLedger;
    this.endEntry = endEntry;
  }

  ColumnarBatch batch() {
    return batch;
  }

  /** Fill the batch from one serialized ReadResponse; the rows taken. */
  int fill(byte[] response) {
    for (OnHeapColumnVector v : vectors) {
      v.reset();
    }
    int row = 0;
    Wire.Reader r = new Wire.Reader(response, 0, response.length);
    while (r.next()) {
      if (r.number != 1 || r.wire != Wire.LEN) {
        continue;
      }
      if (!message(response, r.start, r.stop, row)) {
        stopped = true;
        break;
      }
      row++;
    }
    batch.setNumRows(row);
    return row;
  }

  /** One Message at [from, to) as row `row`; false where it is at or past the end. */
  private boolean message(byte[] buf, int from, int to, int row) {
    long ledger = 0;
    long entry = 0;
    int keyAt = -1;
    int keyEnd = -1;
    int valueAt = -1;
    int valueEnd = -1;
    long publish = 0;
    long event = 0;
    Wire.Reader f = new Wire.Reader(buf, from, to);
    while (f.next()) {
      switch (f.number) {
        case 1 -> {
          if (f.wire == Wire.LEN) {
            Wire.Reader id = new Wire.Reader(buf, f.start, f.stop);
            while (id.next()) {
              if (id.number == 1 && id.wire == Wire.VARINT) {
                ledger = id.varint;
              } else if (id.number == 2 && id.wire == Wire.VARINT) {
                entry = id.varint;
              }
            }
          }
        }
        case 2 -> {
          keyAt = f.start;
          keyEnd = f.stop;
        }
        case 3 -> {
          valueAt = f.start;
          valueEnd = f.stop;
        }
        case 5 -> publish = f.varint;
        case 6 -> event = f.varint;
        default -> {}
      }
    }
    if (Long.compareUnsigned(ledger, endLedger) > 0
        || (ledger == endLedger && Long.compareUnsigned(entry, endEntry) >= 0)) {
      return false;
    }
    lastLedger = ledger;
    lastEntry = entry;
    if (row >= capacity) {
      capacity *= 2;
      for (OnHeapColumnVector v : vectors) {
        v.reserve(capacity);
      }
    }
    for (int i = 0; i < columns.length; i++) {
      WritableColumnVector v = vectors[i];
      switch (columns[i]) {
        case Columns.KEY -> binary(v, row, buf, keyAt, keyEnd);
        case Columns.VALUE -> binary(v, row, buf, valueAt, valueEnd);
        case Columns.TOPIC -> v.putByteArray(row, topic, 0, topic.length);
        case Columns.PARTITION -> v.putInt(row, partition);
        case Columns.LEDGER_ID -> v.putLong(row, ledger);
        case Columns.ENTRY_ID -> v.putLong(row, entry);
        case Columns.PUBLISH_TIME -> v.putLong(row, publish * 1000);
        case Columns.EVENT_TIME -> v.putLong(row, (event != 0 ? event : publish) * 1000);
        case Columns.PROPERTIES -> properties(v, row, buf, from, to);
        default -> throw new IllegalStateException("no column " + columns[i]);
      }
    }
    return true;
  }

  private static void binary(WritableColumnVector v, int row, byte[] buf, int at, int end) {
    if (at < 0) {
      v.putNull(row);
    } else {
      v.putByteArray(row, buf, at, end - at);
    }
  }

  /** The properties map entries (field 4) of one message, in wire order (as _columns.c). */
  private static void properties(WritableColumnVector v, int row, byte[] buf, int from, int to) {
    WritableColumnVector keys = v.getChild(0);
    WritableColumnVector values = v.getChild(1);
    int first = keys.getElementsAppended();
    Wire.Reader f = new Wire.Reader(buf, from, to);
    while (f.next()) {
      if (f.number != 4 || f.wire != Wire.LEN) {
        continue;
      }
      int ks = f.start;
      int ke = f.start;
      int vs = f.start;
      int ve = f.start;
      Wire.Reader e = new Wire.Reader(buf, f.start, f.stop);
      while (e.next()) {
        if (e.wire == Wire.LEN && e.number == 1) {
          ks = e.start;
          ke = e.stop;
        } else if (e.wire == Wire.LEN && e.number == 2) {
          vs = e.start;
          ve = e.stop;
        }
      }
      keys.appendByteArray(buf, ks, ke - ks);
      values.appendByteArray(buf, vs, ve - vs);
    }
    v.putArray(row, first, keys.getElementsAppended() - first);
  }
}
