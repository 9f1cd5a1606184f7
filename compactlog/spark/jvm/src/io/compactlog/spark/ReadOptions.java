package io.compactlog.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The batch reads the JVM scan takes, and their options. It takes only what needs no
 * check: server, topic (names separated by commas), readCompacted true/false, token,
 * startingOffsets earliest, endingOffsets latest, failOnDataLoss true, whole numbers for
 * entriesPerPartition and minPartitions, and an empty tlsCa (no TLS, as the Python source
 * reads it; the Spark engine's export passes one). {@link #taken} answers null for any other
 * read (JSON or bare offsets, failOnDataLoss false, tlsCa, an unknown option, a value it
 * would have to check), which then goes to the Python source: its checks and messages
 * (compactlog/spark/options.py) stay the only copy.
 */
record ReadOptions(
    String server,
    String token,
    List<String> topics,
    boolean compacted,
    long fixed,
    long minPartitions)
    implements Serializable {
  private static final Set<String> TAKEN =
      Set.of(
          "server",
          "topic",
          "readcompacted",
          "token",
          "startingoffsets",
          "endingoffsets",
          "failondataloss",
          "entriesperpartition",
          "minpartitions");

  /** The options of a read the JVM scan takes; null where the Python source reads it. */
  static ReadOptions taken(CaseInsensitiveStringMap options) {
    for (Map.Entry<String, String> e : options.entrySet()) {
      String name = e.getKey().toLowerCase(Locale.ROOT);
      boolean noCa = name.equals("tlsca") && "".equals(e.getValue()); // as if not given
      if (!noCa && (!TAKEN.contains(name) || e.getValue() == null)) {
        return null;
      }
    }
    String server = options.getOrDefault("server", "").strip();
    List<String> topics = topicNames(options.getOrDefault("topic", ""));
    Boolean compacted = bool(options.getOrDefault("readCompacted", "false"));
    long fixed = whole(options.get("entriesPerPartition"));
    long least = whole(options.get("minPartitions"));
    if (server.isEmpty()
        || topics.isEmpty()
        || compacted == null
        || fixed < 0
        || least < 0
        || !is(options, "startingOffsets", "earliest")
        || !is(options, "endingOffsets", "latest")
        || !is(options, "failOnDataLoss", "true")) {
      return null;
    }
    String token = options.getOrDefault("token", "").strip();
    return new ReadOptions(
        server, token.isEmpty() ? null : token, topics, compacted, fixed, least);
  }

  /** The sizing rule of a session of {@code cores} task slots. */
  Sizing sizing(int cores) {
    return new Sizing(cores, fixed, minPartitions);
  }

  private static boolean is(CaseInsensitiveStringMap options, String name, String only) {
    String value = options.get(name);
    return value == null || value.strip().equalsIgnoreCase(only);
  }

  private static Boolean bool(String value) {
    String v = value.strip().toLowerCase(Locale.ROOT);
    return v.equals("true") ? Boolean.TRUE : v.equals("false") ? Boolean.FALSE : null;
  }

  /** A whole number >= 1; 0 where not given; -1 where it is something else. */
  private static long whole(String value) {
    if (value == null) {
      return 0;
    }
    try {
      long v = Long.parseLong(value.strip());
      return v >= 1 ? v : -1;
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** "a, b,a" -> [a, b]: comma-separated, blanks dropped, first order kept. */
  private static List<String> topicNames(String text) {
    Set<String> names = new LinkedHashSet<>();
    for (String name : text.split(",", -1)) {
      if (!name.strip().isEmpty()) {
        names.add(name.strip());
      }
    }
    return new ArrayList<>(names);
  }
}
