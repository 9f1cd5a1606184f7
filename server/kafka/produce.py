"""Produce (key 0): each partition's record batches handed to its log's writer
(``server.log.writer``), the very path of a gRPC Publish: one stored batch per partition's
records, written in groups with the other requests waiting for the same log, answered
once the append is durable by the topic's own policy (``flush.messages`` / ``flush.ms``
for SEGMENTED topics). ``acks`` 1 and -1 are the same on a single broker; ``acks=0`` gets
no answer.

Every partition of a request is handed over before the handler first waits, so the
produces a connection pipelines (``connection``) reach each log's writer in the order they
came, and a writer keeps that order: librdkafka's small requests are written a group at a
time instead of one thread hop each.
"""

from __future__ import annotations

import asyncio
from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.records import produced_request
from compactlog.server.kafka.topics import KafkaContext
from compactlog.storage.topic_log import TopicLog
from compactlog.v1 import compactlog_pb2 as pb

PRODUCE = 0
Sent = tuple[TopicLog, "asyncio.Future[bytes]"] | Exception


def submit(ctx: KafkaContext, topic: str, index: int, records: bytes | None) -> Sent:
    """Decode a partition's Kafka batches (CRCs checked, decompressed) into a
    ``PublishRequest`` for its log and hand it to that log's writer: all or none."""
    try:
        log = ctx.log(topic, index)
        if not records:
            raise KafkaError(ErrorCode.invalid_record, "a produce with no records")
        head = pb.PublishRequest(topic=log.name).SerializeToString()
        return log, ctx.store_of(log.name).writers.submit(
            log.name, head + produced_request(records)
        )
    except Exception as exc:
        return exc


async def produce_partition(module: Any, index: int, sent: Sent) -> Any:
    try:
        if isinstance(sent, Exception):
            raise sent
        log, future = sent
        reply = pb.PublishResponse.FromString(await future)
        base = reply.ids[0].entry_id if reply.ids else -1
        log_start = log.earliest().entry_id
        code, message = ErrorCode.none, None
    except Exception as exc:
        base, log_start, code, message = -1, -1, code_of(exc), str(exc)
    return make(
        module.PartitionProduceResponse,
        index=index,
        error_code=code,
        base_offset=base,
        log_append_time=None,
        log_start_offset=log_start,
        record_errors=(),
        error_message=message,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(PRODUCE, version)
    sent = [
        [(part.index, submit(ctx, topic.name, part.index, part.records)) for part in parts]
        for topic, parts in ((t, t.partition_data) for t in request.topic_data)
    ]
    topics = []
    for topic, each in zip(request.topic_data, sent, strict=True):
        parts = [await produce_partition(module, index, one) for index, one in each]
        topics.append(
            make(module.TopicProduceResponse, name=topic.name, partition_responses=tuple(parts))
        )
    if request.acks == 0:
        return None  # Kafka sends nothing back to an acks=0 producer
    return make(module.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)
