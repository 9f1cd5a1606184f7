package io.compactlog.spark;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.types.StructType;

/**
 * The reader without Spark: a topic's ranges (as the scan cuts them) read on as many
 * threads, each response filled into a batch of the given columns. Prints the messages,
 * the wall seconds and this JVM's CPU seconds, so the reader's own cost can be told from
 * Spark's. {@code java -cp ... io.compactlog.spark.ReadAlone HOST:PORT TOPIC THREADS COLUMNS}
 * (COLUMNS: comma-separated names, or "none"; -Drounds=N reads it N times, default 5:
 * the JIT warms over the first few).
 */
public final class ReadAlone {
  private ReadAlone() {}

  public static void main(String[] args) throws Exception {
    String server = args[0];
    String topic = args[1];
    int threads = Integer.parseInt(args[2]);
    StructType required = new StructType();
    if (!args[3].equals("none")) {
      for (String name : args[3].split(",")) {
        required = required.add(Columns.SCHEMA.apply(name));
      }
    }
    ReadOptions options = new ReadOptions(server, topic, false, null, threads);
    for (int round = 0; round < Integer.getInteger("rounds", 5); round++) {
      List<long[]> ledgers;
      try (LogCalls calls = new LogCalls(server, null)) {
        ledgers = calls.rawLedgers(topic);
      }
      List<RangePartition> ranges = TopicScan.cut(ledgers, threads);
      AtomicLong rows = new AtomicLong();
      long cpu0 = cpu();
      long t0 = System.nanoTime();
      List<Thread> running = new ArrayList<>();
      for (RangePartition range : ranges) {
        StructType cols = required;
        Thread t = new Thread(() -> rows.addAndGet(readRange(options, cols, range)));
        t.start();
        running.add(t);
      }
      for (Thread t : running) {
        t.join();
      }
      double wall = (System.nanoTime() - t0) / 1e9;
      double cpu = (cpu() - cpu0) / 1e9;
      System.out.printf("%d messages, %.3f s wall, %.2f s JVM CPU%n", rows.get(), wall, cpu);
    }
  }

  private static long readRange(ReadOptions options, StructType cols, RangePartition range) {
    long n = 0;
    try (LogCalls calls = new LogCalls(options.server(), null)) {
      Iterator<byte[]> it =
          calls.read(options.topic(), range.startLedger(), range.startEntry(), false, range.limit());
      BatchBuilder b = new BatchBuilder(cols, options.topic(), -1, range.endLedger(), range.endEntry());
      while (!b.stopped && it.hasNext()) {
        n += b.fill(it.next());
      }
    }
    return n;
  }

  private static long cpu() {
    return ((com.sun.management.OperatingSystemMXBean)
            java.lang.management.ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }
}
