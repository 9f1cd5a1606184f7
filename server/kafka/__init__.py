"""The Kafka wire protocol listener: a second door to the same house (CONTRACT section 15).

``compactlog serve --kafka-listen HOST:PORT`` serves Kafka clients (librdkafka,
kafka-python, aiokafka, kcat) over the same ``Broker``, ``TopicLog`` appends and read
path, and topic signals as the gRPC Log service. A SEGMENTED topic is a Kafka topic;
partition ``i`` of a partitioned topic ``NAME`` (the topic ``NAME-partition-i``) is Kafka
partition ``i`` of ``NAME``; offsets are the same offsets.

- ``listener`` accepts connections on the server's event loop; ``connection`` frames
  requests (4-byte size, request header, correlation id) and answers them in order;
- ``protocol`` is the one place that touches ``kio``'s request and response types and the
  version table this listener advertises;
- one module per API family, as Redpanda's ``kafka/server/handlers/``: ``api_versions``,
  ``metadata``, ``produce``, ``fetch``, ``list_offsets``, ``create_topics``, ``groups``
  (group coordination on the wire; the state machine of a group is
  ``group_coordinator``) and ``offsets`` (a group's committed offsets are SEGMENTED
  subscriptions named after it);
- ``records`` converts Kafka's RecordBatch v2 (aiokafka's compiled codec) to and from our
  stored batches; ``topics`` finds the ``TopicLog`` of a Kafka topic-partition;
  ``errors`` maps ``compactlog.errors`` classes to Kafka error codes.

May import ``server.log`` (waiting, thread futures), ``server.admin`` (partitioned
topics), ``server.rpc`` pieces and the broker; nothing imports it but the wiring
(``server.serving`` and ``server.app``).
"""
