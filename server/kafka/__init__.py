"""The Kafka wire protocol listener: a second door to the same house (CONTRACT section 15).

``compactlog serve --kafka-listen HOST:PORT`` serves Kafka clients over the same
``Broker``, ``TopicLog`` appends, read path and topic signals as the gRPC Log service:
``listener`` and ``connection`` take the frames, ``protocol`` holds ``kio``'s types, one
module per API family answers them, ``records`` converts RecordBatch v2, ``sasl`` and
``access`` log a connection in and check its roles (with ``--auth-tokens``: the security
room's checks, handed in by the wiring). Nothing imports this room but the wiring. The
modules and what they may import are listed in docs/kafka.md ("Inside the listener").
"""
