"""Cursors of both kinds against one model: acked ranges, NOT_DELIVERED, the mark-delete
position, and what survives a reopen (RocksDB records for LEDGER topics, snapshot plus
journal for SEGMENTED ones)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.errors import NotDelivered
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import Cursor
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.segmented import SegmentedLogManager, consumer_offsets, state_file
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId, Record
from tests.storage.test_ack_ranges import ids_of

N = 12  # messages in the topic (LEDGER: three ledgers of four)


# ---- both stores -----------------------------------------------------------------------


class Kind(Protocol):
    def log(self) -> TopicLog: ...

    def reopen(self) -> None: ...

    def cursor(self) -> Cursor: ...

    def close(self) -> None: ...


class LedgerKind:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = LedgerStore(root, ServerSettings(publish_durability="wal"))
        self.store.create_topic("t", {"ledger.max.entries": "4"})
        for i in range(N):
            self.store.append("t", [Record(b"k%d" % i, b"v")])

    def log(self) -> TopicLog:
        return LedgerTopicLog(self.store, "t")

    def ids(self) -> list[MessageId]:
        return [MessageId(1 + i // 4, i % 4) for i in range(N)]

    def cursor(self) -> Cursor:
        return self.store.topic("t").cursors["s"]

    def reopen(self) -> None:
        self.store.close()
        self.store = LedgerStore(self.root, ServerSettings(publish_durability="wal"))

    def close(self) -> None:
        self.store.close()


class SegmentedKind:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.manager = SegmentedLogManager(root, ServerSettings(), start_threads=False)
        self.manager.create_topic("t", {})
        for i in range(N):
            self.manager.append("t", [Record(b"k%d" % i, b"v")])

    def log(self) -> TopicLog:
        return SegmentedTopicLog(self.manager, "t")

    def ids(self) -> list[MessageId]:
        return [MessageId(0, i) for i in range(N)]

    def cursor(self) -> Cursor:
        return self.manager.cursors("t").open("s", None)

    def reopen(self) -> None:
        self.manager.close()
        self.manager = SegmentedLogManager(self.root, ServerSettings(), start_threads=False)

    def close(self) -> None:
        self.manager.close()


KINDS: dict[str, Callable[[Path], LedgerKind | SegmentedKind]] = {
    "ledger": LedgerKind,
    "segmented": SegmentedKind,
}


@pytest.fixture(params=list(KINDS))
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerKind | SegmentedKind]:
    made = KINDS[request.param](tmp_path / "data")
    yield made
    made.close()


Op = tuple[int, bool]  # index of the id, cumulative


def run_model(
    kind: LedgerKind | SegmentedKind, delivered: int, ops: list[Op], reopen_every: int
) -> None:
    ids = kind.ids()
    log = kind.log()
    cursor = log.open_cursor("s", latest=False)
    if delivered:
        log.delivered(cursor, ids[delivered - 1])
    mark = -1  # index of the mark-delete position
    acked: set[int] = set()
    written = 0  # ``delivered`` as stored: it goes to disk with the next ack that writes
    for step, (index, cumulative) in enumerate(ops, 1):
        if index >= delivered and index > mark:
            with pytest.raises(NotDelivered) as refused:
                log.acknowledge("s", ids[index], cumulative)
            assert refused.value.metadata["subscription"] == "s"
            assert refused.value.metadata["topic"] == "t"
        else:
            log.acknowledge("s", ids[index], cumulative)
            if index > mark:
                written = delivered
            if cumulative:
                mark = max(mark, index)
            elif index > mark:
                acked.add(index)
            while mark + 1 in acked:
                mark += 1
            acked = {i for i in acked if i > mark}
        if step % reopen_every == 0:
            kind.reopen()
            log = kind.log()
            delivered = max(written, mark + 1)  # what went out since the last ack is lost
        cursor = kind.cursor()
        assert cursor.mark_delete == (ids[mark] if mark >= 0 else None)
        assert ids_of(cursor.acked) == {ids[i] for i in acked}
        assert cursor.delivered == (ids[delivered - 1] if delivered else None)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    delivered=st.integers(0, N),
    ops=st.lists(st.tuples(st.integers(0, N - 1), st.booleans()), max_size=25),
    reopen_every=st.integers(1, 30),
)
def test_acks_follow_the_model_and_survive_reopen(
    tmp_path_factory: pytest.TempPathFactory,
    delivered: int,
    ops: list[Op],
    reopen_every: int,
) -> None:
    for name, make in KINDS.items():
        made = make(tmp_path_factory.mktemp(name) / "data")
        try:
            run_model(made, delivered, ops, reopen_every)
        finally:
            made.close()


def test_an_id_that_does_not_exist_was_never_delivered(kind: LedgerKind | SegmentedKind) -> None:
    log = kind.log()
    cursor = log.open_cursor("s", latest=False)
    log.delivered(cursor, kind.ids()[-1])
    last = kind.ids()[-1]
    for ghost in (MessageId(last.ledger_id + 1, 0), MessageId(last.ledger_id, last.entry_id + 1)):
        with pytest.raises(NotDelivered):
            log.acknowledge("s", ghost, cumulative=True)
    if isinstance(kind, LedgerKind):  # inside the delivered range, in no ledger
        with pytest.raises(NotDelivered):
            log.acknowledge("s", MessageId(1, 9), cumulative=False)
    else:  # SEGMENTED ids have ledger 0
        with pytest.raises(NotDelivered):
            log.acknowledge("s", MessageId(5, 0), cumulative=False)
    assert kind.cursor().mark_delete is None and not kind.cursor().acked


def test_acks_below_the_mark_change_nothing(kind: LedgerKind | SegmentedKind) -> None:
    ids = kind.ids()
    log = kind.log()
    log.delivered(log.open_cursor("s", latest=False), ids[5])
    log.acknowledge("s", ids[4], cumulative=True)
    log.acknowledge("s", ids[2], cumulative=False)  # acked already: fine, nothing moves
    log.acknowledge("s", ids[0], cumulative=True)
    assert kind.cursor().mark_delete == ids[4]


def test_a_list_is_acked_whole_or_not_at_all_and_survives_reopen(
    kind: LedgerKind | SegmentedKind,
) -> None:
    ids = kind.ids()
    log = kind.log()
    log.delivered(log.open_cursor("s", latest=False), ids[7])
    with pytest.raises(NotDelivered) as refused:  # one never given: nothing is stored
        log.acknowledge_list("s", [ids[1], ids[3], ids[8], ids[0]])
    assert refused.value.metadata["message_id"] == f"{ids[8].ledger_id}:{ids[8].entry_id}"
    assert refused.value.metadata["topic"] == "t"
    assert kind.cursor().mark_delete is None and not kind.cursor().acked
    log.acknowledge_list("s", [ids[3], ids[1], ids[5], ids[0], ids[2], ids[5]])
    log.acknowledge_list("s", [ids[0], ids[6]])  # acked already, and one more
    kind.reopen()
    assert kind.cursor().mark_delete == ids[3]
    assert ids_of(kind.cursor().acked) == {ids[5], ids[6]}


def test_a_list_is_one_journal_line(tmp_path: Path) -> None:
    made = SegmentedKind(tmp_path / "data")
    log = made.log()
    log.delivered(log.open_cursor("s", latest=False), MessageId(0, N - 1))
    journal = tmp_path / "data" / "t" / "cursors.journal"
    before = len(journal.read_bytes().splitlines())
    log.acknowledge_list("s", [MessageId(0, i) for i in range(1, N, 2)])  # six ranges
    assert len(journal.read_bytes().splitlines()) == before + 1
    made.close()


# ---- the SEGMENTED journal -------------------------------------------------------------


def test_the_journal_is_snapshotted_once_it_outgrows_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer_offsets, "JOURNAL_MIN_LINES", 10)
    made = SegmentedKind(tmp_path / "data")
    log = made.log()
    log.delivered(log.open_cursor("s", latest=False), MessageId(0, N - 1))
    journal = tmp_path / "data" / "t" / "cursors.journal"
    for i in range(1, N, 2):  # holes: every odd id is a range of its own
        log.acknowledge("s", MessageId(0, i), cumulative=False)
    assert len(journal.read_bytes().splitlines()) == 1 + 6  # the header, then one line an ack
    for i in range(0, N, 2):
        log.acknowledge("s", MessageId(0, i), cumulative=False)
    snapshot = json.loads(state_file.read(tmp_path / "data" / "t" / "cursors.json") or b"")
    assert snapshot["generation"] >= 2  # rewritten at least once after the first
    assert len(journal.read_bytes().splitlines()) <= 10
    made.reopen()
    assert made.cursor().mark_delete == MessageId(0, N - 1) and not made.cursor().acked
    made.close()


def test_a_torn_last_journal_line_is_dropped_and_damage_before_it_refused(tmp_path: Path) -> None:
    made = SegmentedKind(tmp_path / "data")
    log = made.log()
    log.delivered(log.open_cursor("s", latest=False), MessageId(0, N - 1))
    log.acknowledge("s", MessageId(0, 3), cumulative=False)
    made.close()
    journal = tmp_path / "data" / "t" / "cursors.journal"
    whole = journal.read_bytes()
    journal.write_bytes(whole + whole.splitlines(keepends=True)[-1][:-5])  # a torn append
    dropped = consumer_offsets.SegmentCursors(journal.parent, repair=False).dropped
    assert dropped is not None and dropped.startswith("line 2, ")  # what `check` reports
    made.reopen()
    assert ids_of(made.cursor().acked) == {MessageId(0, 3)}
    made.close()
    lines = journal.read_bytes().splitlines(keepends=True)
    lines.insert(1, b'00000000 {"s":"s"}\n')  # a bad line before good ones
    journal.write_bytes(b"".join(lines) + lines[-1])
    with pytest.raises(BadStateFile, match=r"cursors\.journal: line 2 is damaged"):
        consumer_offsets.SegmentCursors(journal.parent)
    made.reopen()  # the topic is served no more: its cursors cannot be trusted
    assert "line 2 is damaged" in made.manager.offline_topics()["t"].reason


def test_cursors_of_the_json_only_layout_are_read_and_rewritten(tmp_path: Path) -> None:
    made = SegmentedKind(tmp_path / "data")
    made.close()
    folder = tmp_path / "data" / "t"
    old = {"g": {"mark_delete": [0, 1], "acked": [[0, 3], [0, 4]], "properties": {"a": "b"}}}
    (folder / "cursors.json").write_text(json.dumps(old))
    (folder / "cursors.journal").unlink(missing_ok=True)
    cursors = consumer_offsets.SegmentCursors(folder)
    cursor = cursors.open("g", None)
    assert cursor.mark_delete == MessageId(0, 1) and cursor.properties == {"a": "b"}
    assert list(cursor.acked) == [(MessageId(0, 3), MessageId(0, 4))]
    assert cursor.delivered == MessageId(0, 4)
    assert json.loads(state_file.read(folder / "cursors.json") or b"")["format"] == 2


def test_a_clean_stop_folds_the_journal_so_a_cut_one_is_never_fewer_acks(
    tmp_path: Path,
) -> None:
    """A journal cut at a line boundary reads as a shorter, valid history: acks lost without
    a word. A clean stop folds the journal into the checksummed snapshot, so what a cut can
    reach afterwards is the header line: the topic goes offline instead."""
    made = SegmentedKind(tmp_path / "data")
    log = made.log()
    log.delivered(log.open_cursor("s", latest=False), MessageId(0, N - 1))
    for i in (1, 3, 5):
        log.acknowledge("s", MessageId(0, i), cumulative=False)
    made.close()
    journal = tmp_path / "data" / "t" / "cursors.journal"
    assert len(journal.read_bytes().splitlines()) == 1  # the header only: acks are folded
    made.reopen()
    assert ids_of(made.cursor().acked) == {MessageId(0, 1), MessageId(0, 3), MessageId(0, 5)}
    made.close()
    journal.write_bytes(journal.read_bytes()[:7])  # cut short while stopped
    made.reopen()
    assert "t" in made.manager.offline_topics()
    assert "cursors.journal" in made.manager.offline_topics()["t"].reason
    made.close()
