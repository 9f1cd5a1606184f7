"""Joined groups: a pass writes groups whose survivors fit one segment into one ``.cleaned``
segment (one swap), on compacted-only logs; the view is the one separate groups give."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlog.storage.segmented import SegmentedLogManager
from tests.compactor.log_cleaner.test_log_cleaner import COMPACT, Clock, open_all, publish

KEYS = [b"k%d" % (i % 3) for i in range(40)]  # 3 keys over 40 records: most superseded


def bases(m: SegmentedLogManager, topic: str) -> list[int]:
    return [s.base_offset for s in m.get_log(topic).segments]


def view(m: SegmentedLogManager, topic: str) -> list[tuple[int, bytes | None]]:
    return [(x.id.entry_id, x.key) for x in m.read(topic, m.log_start_offset(topic), 0)]


@pytest.mark.parametrize(
    ("policy", "joins"), [("compact", True), ("compact,delete", False)], ids=["compact", "both"]
)
def test_groups_whose_survivors_fit_share_one_cleaned_segment(
    tmp_path: Path, policy: str, joins: bool
) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", {**COMPACT, "segment.bytes": "400", "cleanup.policy": policy})
    publish(m, "t", KEYS)
    before = bases(m, "t")
    assert len(before) >= 8  # each segment near segment.bytes: groups of one segment
    result = c.clean_now("t")
    assert view(m, "t") == [(37, b"k1"), (38, b"k2"), (39, b"k0")]
    assert result.kept == 3 and result.read == len(KEYS)
    after = bases(m, "t")
    # joined: one .cleaned segment (named after the first) and the active one; else
    # each group its own (an emptied one removed)
    assert after == [0, before[-1]] if joins else len(after) > 2
    m.close()


def test_a_group_whose_survivors_do_not_fit_starts_the_next_segment(tmp_path: Path) -> None:
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", {**COMPACT, "segment.bytes": "400"})
    publish(m, "t", [b"a%d" % i for i in range(12)] + KEYS)  # distinct keys first: kept
    before = bases(m, "t")
    c.clean_now("t")
    after = bases(m, "t")
    assert len(after) > 2 and set(after) <= set(before)
    kept = view(m, "t")
    assert kept[:12] == [(i, b"a%d" % i) for i in range(12)]
    assert kept[12:] == [(49, b"k1"), (50, b"k2"), (51, b"k0")]
    for seg in m.get_log("t").segments:
        assert seg.size <= 400
    m.close()
