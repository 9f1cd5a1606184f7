package io.compactlog.spark;

import org.sparkproject.connect.grpc.Status;
import org.sparkproject.connect.grpc.StatusRuntimeException;

/**
 * Kafka source's failOnDataLoss in a task (compactlog/spark/source.py's read_range): a
 * SEGMENTED range whose start retention or DeleteRecords removed after the query was
 * planned. The server answers its Read with OUT_OF_RANGE; GetTopic's log start then says
 * whether offsets were lost. The JVM scan only takes failOnDataLoss=true, so a loss fails
 * the task with planning.py's data_loss message, as an IllegalStateException (the class
 * Spark's Kafka source raises its data-loss errors as); anything else keeps its error.
 */
final class DataLoss {
  private DataLoss() {}

  /**
   * What to throw for {@code error}, a Read of {@code range} from {@code position}
   * failing: the data-loss error where the log start moved past the position, else
   * {@code error} itself.
   */
  static RuntimeException of(
      StatusRuntimeException error, LogCalls calls, RangePartition range, Position position) {
    if (error.getStatus().getCode() != Status.Code.OUT_OF_RANGE) {
      return error;
    }
    long logStart;
    try {
      logStart = calls.topic(range.log()).earliest().entry();
    } catch (RuntimeException e) {
      error.addSuppressed(e);
      return error;
    }
    if (logStart <= position.entry()) {
      return error;
    }
    return new IllegalStateException(message(range, position.entry(), logStart), error);
  }

  /** planning.py's data_loss message, word for word (failOnDataLoss=true). */
  static String message(RangePartition range, long start, long logStart) {
    return "topic '"
        + range.topic()
        + "' partition "
        + range.partition()
        + ": offsets "
        + start
        + " to "
        + (logStart - 1)
        + " are gone (retention or DeleteRecords moved the log start to "
        + logStart
        + "); the query was to read from offset "
        + start
        + ". Some data may have been lost; to read from the log start instead, "
        + "set the source option failOnDataLoss to false";
  }
}
