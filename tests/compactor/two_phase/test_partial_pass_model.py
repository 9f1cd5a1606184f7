"""Model test of the map-full partial pass: with an offset map of a few entries, each run
compacts the input up to where its map filled; the view is always "latest value per key
up to the horizon, then the raw tail", and repeated runs reach the last id (latest per
key over the whole history) unless the live keys alone outgrow the map, which is then the
run's error and changes nothing."""

from __future__ import annotations

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from compactlog.compactor.two_phase import PhaseOneMemoryExceeded, TwoPhaseCompactor
from compactlog.compactor.two_phase.memory import InMemoryCompactionStorage
from compactlog.storage.types import MessageId, Record

from .test_two_phase_model import Entry, expected_view

KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", None])
VALUES = st.sampled_from([b"1", b"22", b"", None])
SLOTS = 5  # map budget in entries: 5 slots at 0.9 load hold 4 keys (2 if it had to grow)


class PartialPassModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mem = InMemoryCompactionStorage()
        self.retain = False
        self.mem.create_topic("t", ledger_max_entries=3)
        self.history: list[Entry] = []
        self.horizon: MessageId | None = None

    def _compact(self) -> bool:
        """One run; False when it had nothing to do or could not progress."""
        before = self.mem.compacted_view("t")
        try:
            result = TwoPhaseCompactor(self.mem, 24 * SLOTS).compact("t")
        except PhaseOneMemoryExceeded:
            assert self.mem.compacted_view("t") == before
            return False
        if result.committed:
            event("partial pass" if result.horizon != self.mem.lac("t") else "full pass")
            assert self.horizon is None or result.horizon is not None
            assert self.horizon is None or self.horizon < result.horizon  # type: ignore[operator]
            self.horizon = result.horizon
        return result.committed

    @rule(
        batch=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=8),
        retain=st.booleans(),
    )
    def publish(self, batch: list[tuple[bytes | None, bytes | None]], retain: bool) -> None:
        if not self.history:
            self.retain = retain
            self.mem.topics["t"].retain_null_key = retain
        ids = self.mem.publish("t", [Record(k, v) for k, v in batch])
        self.history += [(i, k, v) for i, (k, v) in zip(ids, batch, strict=True)]

    @rule()
    def compact(self) -> None:
        self._compact()

    @rule()
    def compact_until_done(self) -> None:
        for _ in range(len(self.history) + 2):
            if not self._compact():
                break
        lac = self.mem.lac("t")
        if self.horizon != lac:  # stuck: the live keys alone fill the map
            live = {k for _i, k, v in expected_view(self.history, self.horizon, False) if k}
            assert live  # an empty compacted ledger leaves room for a raw key
            event("stuck: live keys fill the map")

    @invariant()
    def view_is_latest_per_key_up_to_the_horizon(self) -> None:
        got = [
            (
                MessageId(m.id.ledger_id, m.id.entry_id),
                m.key if m.HasField("key") else None,
                m.value if m.HasField("value") else None,
            )
            for m in self.mem.compacted_view("t")
        ]
        assert got == expected_view(self.history, self.horizon, self.retain)


PartialPassModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
TestPartialPassModel = PartialPassModel.TestCase
