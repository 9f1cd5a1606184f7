"""Read over every partition of a partitioned topic: a merge, not a reader.

Each partition is read by the one read path (``server.log.reading``): a merged Read is one
``ReadSession`` a partition, stepped in turn; responses concatenate (a merged Consume
steps each partition's own subscription in turn: ``server.log.consuming``). How starts
apply to the partitions and which partitions a store slot merges are in
docs/partitions.md ("Inside the server").
"""

from __future__ import annotations

from collections.abc import Sequence

from compactlog.errors import InvalidArgument
from compactlog.server.log.reading import STEP_BYTES, ReadSession, Response
from compactlog.storage.topic_log import ReadableLog
from compactlog.v1 import compactlog_pb2 as pb


def check_partition(topic: str, partition: int, partitions: int) -> int:
    if not 0 <= partition < partitions:
        raise InvalidArgument(
            f"topic {topic!r} has partitions 0..{partitions - 1}, not {partition}",
            topic=topic,
            field="partition",
        )
    return partition


def partition_request(req: pb.ReadRequest, index: int) -> pb.ReadRequest:
    """The request partition ``index`` is read with (see the module docstring)."""
    if req.WhichOneof("start") != "message_id" or req.message_id.partition == index:
        return req
    own = pb.ReadRequest()
    own.CopyFrom(req)
    own.position = pb.EARLIEST
    return own


class MergedReadSession:
    """One Read call over every partition (the ``ReadSession`` interface)."""

    def __init__(
        self,
        name: str,
        parts: Sequence[tuple[int, ReadableLog]],
        partitions: int,
        req: pb.ReadRequest,
        per_response: int,
    ) -> None:
        if req.WhichOneof("start") == "message_id":
            check_partition(name, req.message_id.partition, partitions)
        self.remaining = req.max_messages or -1
        self.sessions = [
            ReadSession(log, partition_request(req, i), per_response) for i, log in parts
        ]
        self._turn = 0
        self._failed: Exception | None = None

    @property
    def done(self) -> bool:
        return self.remaining == 0

    def steps(self, max_bytes: int = STEP_BYTES) -> list[Response]:
        """The next responses, one partition after another; empty once every partition
        is read up to what is visible now (``ReadSession.steps``' contract)."""
        if self._failed is not None:
            raise self._failed
        out: list[Response] = []
        size = 0
        idle = 0
        while size < max_bytes and idle < len(self.sessions) and not self.done:
            session = self.sessions[self._turn]
            self._turn = (self._turn + 1) % len(self.sessions)
            if self.remaining > 0:
                session.cap(self.remaining)
            try:
                response = None if session.done else session.step()
            except Exception as exc:
                if not out:
                    raise
                self._failed = exc
                break
            if response is None:
                idle += 1
                continue
            idle = 0
            out.append(response)
            size += len(response[0])
            if self.remaining > 0:
                self.remaining -= response[1]
        return out
