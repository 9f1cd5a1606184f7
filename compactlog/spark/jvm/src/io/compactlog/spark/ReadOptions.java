package io.compactlog.spark;

import java.io.Serializable;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The prototype's options, checked once on the driver; shipped to the tasks. */
record ReadOptions(String server, String topic, boolean compacted, String token, int partitions)
    implements Serializable {
  static ReadOptions of(CaseInsensitiveStringMap options) {
    String server = required(options, "server");
    String topic = required(options, "topic");
    int partitions =
        options.getInt(
            "partitions", SparkSession.active().sparkContext().defaultParallelism());
    return new ReadOptions(
        server,
        topic,
        options.getBoolean("readCompacted", false),
        options.get("token"),
        Math.max(1, partitions));
  }

  private static String required(CaseInsensitiveStringMap options, String name) {
    String v = options.get(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("option '" + name + "' is required");
    }
    return v;
  }
}
