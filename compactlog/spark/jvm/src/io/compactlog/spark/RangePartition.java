package io.compactlog.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Spark partition: messages of one topic partition with ids in [start, end).
 * {@code topic} and {@code partition} are the columns' values (the name the option gave,
 * -1 where not partitioned), {@code log} the topic the server stores it as; {@code limit}
 * (0: none) bounds the count where the ids tell it (planning.py's ReadRange).
 */
record RangePartition(
    String topic,
    int partition,
    String log,
    Position start,
    Position end,
    boolean compacted,
    long limit)
    implements InputPartition {}
