package io.compactlog.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.sparkproject.connect.grpc.CallOptions;
import org.sparkproject.connect.grpc.ClientInterceptors;
import org.sparkproject.connect.grpc.Channel;
import org.sparkproject.connect.grpc.Context;
import org.sparkproject.connect.grpc.KnownLength;
import org.sparkproject.connect.grpc.ManagedChannel;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.MethodDescriptor;
import org.sparkproject.connect.grpc.Status;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.netty.NettyChannelBuilder;
import org.sparkproject.connect.grpc.stub.ClientCalls;
import org.sparkproject.connect.grpc.stub.MetadataUtils;

/**
 * One channel to a compactlog server and the calls the reader makes: GetTopic and
 * GetTopicLayout (planning, on the driver) and Read (a task's range). The calls use
 * gRPC-java shaded inside Spark Connect's jar, with byte[] marshallers: no generated
 * stubs, responses stay bytes.
 */
final class LogCalls implements AutoCloseable {
  private static final MethodDescriptor.Marshaller<byte[]> BYTES =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
          return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
          try {
            if (stream instanceof KnownLength) { // one copy out of gRPC's buffers
              byte[] out = new byte[stream.available()];
              if (stream.readNBytes(out, 0, out.length) == out.length) {
                return out;
              }
              throw new IOException("a Read response ended early");
            }
            return stream.readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };
  private static final MethodDescriptor<byte[], byte[]> READ =
      method("compactlog.v1.Log/Read", MethodDescriptor.MethodType.SERVER_STREAMING);
  private static final MethodDescriptor<byte[], byte[]> TOPIC =
      method("compactlog.v1.TopicAdmin/GetTopic", MethodDescriptor.MethodType.UNARY);
  private static final MethodDescriptor<byte[], byte[]> LAYOUT =
      method("compactlog.v1.CompactionEngine/GetTopicLayout", MethodDescriptor.MethodType.UNARY);

  // codes under which the layout is not ours to see (connection.py's _NOT_PERMITTED)
  private static final Set<Status.Code> NOT_PERMITTED =
      Set.of(Status.Code.PERMISSION_DENIED, Status.Code.UNAUTHENTICATED, Status.Code.UNIMPLEMENTED);

  private final ManagedChannel managed;
  private final Channel channel;
  private Context.CancellableContext reading;

  LogCalls(String server, String token) {
    managed =
        NettyChannelBuilder.forTarget(server)
            .usePlaintext()
            .maxInboundMessageSize(Integer.MAX_VALUE)
            .build();
    if (token == null) {
      channel = managed;
    } else {
      Metadata headers = new Metadata();
      headers.put(
          Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + token);
      channel =
          ClientInterceptors.intercept(managed, MetadataUtils.newAttachHeadersInterceptor(headers));
    }
  }

  private static MethodDescriptor<byte[], byte[]> method(
      String name, MethodDescriptor.MethodType type) {
    return MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(type)
        .setFullMethodName(name)
        .setRequestMarshaller(BYTES)
        .setResponseMarshaller(BYTES)
        .build();
  }

  /** GetTopic: the topic's shape; a StatusRuntimeException where it fails. */
  LogShape topic(String name) {
    return LogShape.parse(
        ClientCalls.blockingUnaryCall(
            channel, TOPIC, CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS),
            Wire.nameRequest(name)));
  }

  /**
   * The raw ledgers of a LEDGER topic: {ledger, first entry, last entry} each; null where
   * this token may not see the layout (it only guides where ranges are cut).
   */
  List<long[]> rawLedgers(String topic) {
    byte[] layout;
    try {
      layout =
          ClientCalls.blockingUnaryCall(
              channel,
              LAYOUT,
              CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS),
              Wire.nameRequest(topic));
    } catch (StatusRuntimeException e) {
      if (NOT_PERMITTED.contains(e.getStatus().getCode())) {
        return null;
      }
      throw e;
    }
    List<long[]> out = new ArrayList<>();
    Wire.Reader r = new Wire.Reader(layout, 0, layout.length);
    while (r.next()) {
      if (r.number == 3 && r.wire == Wire.LEN) {
        long[] span = new long[3];
        Wire.Reader f = new Wire.Reader(layout, r.start, r.stop);
        while (f.next()) {
          if (f.wire == Wire.VARINT && f.number >= 1 && f.number <= 3) {
            span[f.number - 1] = f.varint;
          }
        }
        out.add(span);
      }
    }
    return out;
  }

  /** The serialized ReadResponses from (ledger, entry); cancelled by close(). */
  Iterator<byte[]> read(String topic, Position start, boolean compacted, long limit) {
    byte[] req = Wire.readRequest(topic, start.ledger(), start.entry(), compacted, limit);
    reading = Context.current().withCancellation();
    Context previous = reading.attach();
    try {
      return ClientCalls.blockingServerStreamingCall(channel, READ, CallOptions.DEFAULT, req);
    } finally {
      reading.detach(previous);
    }
  }

  @Override
  public void close() {
    if (reading != null) {
      reading.cancel(null);
    }
    managed.shutdownNow();
  }
}
