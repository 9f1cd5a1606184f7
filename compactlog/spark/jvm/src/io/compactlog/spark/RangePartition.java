package io.compactlog.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** Messages with ids in [start, end) of the topic; ids within a ledger are dense. */
record RangePartition(long startLedger, long startEntry, long endLedger, long endEntry)
    implements InputPartition {
  /** The most messages the range can hold where it stays in one ledger (0: not known). */
  long limit() {
    return startLedger == endLedger ? endEntry - startEntry : 0;
  }
}
