"""Model-based test: after any sequence of publishes, compactions (some crashing at a
random step) and restarts, the compacted view equals "latest value per key up to the
horizon, in id order, then the raw tail" computed from the raw history."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from compactlog.compactor.two_phase import FAULT_POINTS, TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import last_compacted_id, view_messages

Entry = tuple[MessageId, bytes | None, bytes | None]
KEYS = st.sampled_from([b"a", b"b", b"c", b"d", None])
VALUES = st.sampled_from([b"1", b"22", b"", None])


class Crash(BaseException):
    pass


def expected_view(history: list[Entry], horizon: MessageId | None, retain: bool) -> list[Entry]:
    covered = [e for e in history if horizon is not None and e[0] <= horizon]
    tail = [e for e in history if horizon is None or e[0] > horizon]
    if horizon is None:
        return tail
    last = {key: i for i, (_id, key, _v) in enumerate(covered) if key is not None}
    kept = [
        e
        for i, e in enumerate(covered)
        if (e[1] is None and retain) or (e[1] is not None and last[e[1]] == i and e[2])
    ]
    return kept + tail


class CompactionModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "ledgers"
        self.retain = False
        self.history: list[Entry] = []
        self.horizon: MessageId | None = None
        self._open()
        self.store.create_topic("t", {"ledger.max.entries": "3"})
        self.store.open_cursor("t", COMPACTION_SUBSCRIPTION)

    def _open(self) -> None:
        self.store = LedgerStore(self.path, ServerSettings(topic_defaults={}))

    @rule(batch=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=6))
    def publish(self, batch: list[tuple[bytes | None, bytes | None]]) -> None:
        ids = self.store.append("t", [Record(k, v) for k, v in batch])
        self.history += [(i, k, v) for i, (k, v) in zip(ids, batch, strict=True)]

    @rule(crash_at=st.sampled_from((None, *FAULT_POINTS)))
    def compact(self, crash_at: str | None) -> None:
        def fault(point: str) -> None:
            if point == crash_at:
                raise Crash(point)

        lac = self.store.topic("t").lac
        compactor = TwoPhaseCompactor(LedgerStoreCompactionStorage(self.store), 1 << 20, fault)
        try:
            compactor.compact("t")
        except Crash as crash:
            if FAULT_POINTS.index(str(crash)) >= FAULT_POINTS.index("after_commit"):
                self.horizon = lac
            self.restart()  # a crash is followed by a restart
            return
        if lac is not None:
            self.horizon = lac

    @precondition(lambda self: self.horizon is not None)
    @rule()
    def trim_raw_by_retention(self) -> None:
        self.store.update_config("t", {"ledger.max.entries": "3", "retention.bytes": "0"})
        self.store.enforce_retention("t")

    @rule()
    def restart(self) -> None:
        self.store.close()
        self._open()

    @invariant()
    def view_is_latest_per_key(self) -> None:
        lac = self.store.topic("t").lac
        got: list[Entry] = []
        if lac is not None:
            for m in view_messages(self.store, "t", MessageId(0, 0), lac, compacted=True):
                got.append((m.id, m.key, m.value))
        want = expected_view(self.history, self.horizon, self.retain)
        assert got == want
        assert last_compacted_id(self.store, "t") == (want[-1][0] if want else None)

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()


CompactionModel.TestCase.settings = settings(max_examples=20, stateful_step_count=20, deadline=None)
TestCompactionModel = pytest.mark.slow(CompactionModel.TestCase)
