"""The directories of SEGMENTED topics under one root, and each topic's own config file.

Layout::

    <root>/
      ~server/                      the server's own files (``~`` is in no topic name)
        FORMAT                      "2\\n": segment files hold batches (see version.py)
        cleaner-offset-checkpoint   owned by the LogCleaner
      <topic>/                      one directory per topic
        topic.json                  {"overrides": {...}}  (checksummed: state_file.py)
        cursors.json                durable cursors (consumer_offsets.py)
        log-start-offset, recovery-point
        segments.manifest           the sealed segments' figures (manifest.py)
        00000000000000000000.log / .index / .timeindex   ...  (batches: segment.py)
      <topic>~new/  <topic>~del/    a create or delete a crash interrupted; removed at start-up

``~`` cannot occur in a topic name, so these never clash with a topic. A topic directory is
made whole under ``~new`` and renamed into place, and renamed to ``~del`` before it is
removed, so a crash leaves a topic either there or not (``SegmentedLogManager`` keeps the
topics these directories hold).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from compactlog.crash_points import reached
from compactlog.errors import CompactlogError, from_os_error
from compactlog.storage.config import validate_topic_overrides
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.files import fsync_dir, rename_durably
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.segmented.version import TOPIC_FILE
from compactlog.storage.types import TopicKind

log = logging.getLogger("compactlog.storage.segmented.manager")

_NEW, _DEL = "~new", "~del"


def topic_dirs(root: Path) -> list[Path]:
    """The topic directories under ``root``, sorted; what a create or delete cut short
    left (``~new``, ``~del``) is removed on the way."""
    found = []
    for entry in sorted(root.iterdir()):
        if not entry.is_dir():
            continue
        if entry.name.endswith((_NEW, _DEL)):  # a create or delete a crash cut short
            log.warning("removing %s, left by a topic create or delete cut short", entry)
            shutil.rmtree(entry, ignore_errors=True)
            continue
        found.append(entry)
    return found


def make_topic_dir(root: Path, name: str, overrides: Mapping[str, str]) -> Path:
    """``name``'s directory with its ``topic.json``, made under ``~new``, renamed into
    place and made durable; on any failure nothing is left that a restart would show."""
    staging = root / (name + _NEW)
    shutil.rmtree(staging, ignore_errors=True)
    final = root / name
    try:
        staging.mkdir()
        write_topic_file(staging / TOPIC_FILE, overrides)
        reached("segmented_create_before_rename")
        os.rename(staging, final)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)  # a start removes what is left
        raise from_os_error(exc, f"creating topic {name}", staging) from None
    except CompactlogError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        fsync_dir(root)
    except OSError as exc:  # not durable: undone, so a restart cannot show it
        shutil.rmtree(final, ignore_errors=True)
        raise from_os_error(exc, f"creating topic {name}", root) from None
    return final


def trash_topic_dir(root: Path, name: str, directory: Path) -> Path:
    """``directory`` renamed to ``name``'s ``~del`` durably (a failure changes nothing);
    the renamed path, for ``shutil.rmtree`` once nothing uses it."""
    trash = root / (name + _DEL)
    shutil.rmtree(trash, ignore_errors=True)
    rename_durably(directory, trash, f"deleting topic {name}")
    return trash


def read_topic_file(path: Path) -> dict[str, str]:
    """A topic's stored overrides, checked (``BadStateFile`` when they fail)."""
    body = state_file.read(path)
    if body is None:
        raise BadStateFile(path, "missing")
    try:
        obj = json.loads(body)
        if not isinstance(obj, dict) or set(obj) != {"overrides"}:
            raise ValueError("not an object of overrides")
        overrides = obj["overrides"]
        if not isinstance(overrides, dict):
            raise ValueError("overrides are not a map")
        checked = validate_topic_overrides(TopicKind.SEGMENTED, overrides)
        if checked != overrides:
            raise ValueError("overrides are not in the form they are stored in")
        return checked
    except (ValueError, CompactlogError) as exc:
        raise BadStateFile(path, f"malformed topic config ({exc})") from None


def write_topic_file(path: Path, overrides: Mapping[str, str]) -> None:
    state_file.write(path, json.dumps({"overrides": dict(overrides)}, sort_keys=True).encode())


def unreadable_reason(exc: BaseException) -> str:
    """Why a topic directory could not be opened, in one line (its offline reason)."""
    if isinstance(exc, OSError):
        return f"{exc.filename or 'a file'} cannot be read ({exc.strerror or exc})"
    return " ".join(str(exc).split())
