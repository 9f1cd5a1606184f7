"""Run ``compactlog ARGS`` with its SIGINT delivered at an exact point inside gRPC's Read
stream, after the first messages are printed: ``python tests/cli/interrupt_at.py WINDOW
ARGS...``. A profile hook raises the signal when the main thread reaches WINDOW, so the
race that an interrupt under load only hits by chance is hit every time:

- ``wait-release``: inside ``threading.Condition.wait`` as grpcio's stream wait loop
  (``grpc._common._wait_once``, every 0.1 s while a follow read waits) has released the
  stream's lock and not yet entered the ``try`` that takes it back. A
  ``KeyboardInterrupt`` there makes the ``with`` around the wait release the lock a
  second time: ``RuntimeError``, exit 1. (Other windows, e.g. the channel's lock inside
  ``operate``, kill the channel's spin thread only now and then, so they are not here.)

It writes ``injected at WINDOW`` to stderr once the signal went out (the test checks that
it did, so a grpcio that no longer has the window fails loudly instead of passing).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

from compactlog import cli
from compactlog.cli import data as cli_data

WINDOW = sys.argv[1]
printed = threading.Event()
fired: list[str] = []
_lines = cli_data.message_lines


def _spy(*args: Any, **kwargs: Any) -> str:
    lines = _lines(*args, **kwargs)
    printed.set()  # the lines are written next, before the stream's next wait
    return lines


def _caller_is(frame: FrameType | None, filename: str, name: str) -> bool:
    return frame is not None and (
        frame.f_code.co_filename.endswith(filename) and frame.f_code.co_name == name
    )


def _at_window(frame: FrameType, event: str, arg: Any) -> bool:
    if WINDOW == "wait-release":
        return (
            event == "c_return"
            and getattr(arg, "__name__", "") == "_release_save"
            and _caller_is(frame.f_back, "grpc/_common.py", "_wait_once")
        )
    raise SystemExit(f"unknown window {WINDOW}")


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    if printed.is_set() and not fired and _at_window(frame, event, arg):
        fired.append(WINDOW)
        sys.stderr.write(f"injected at {WINDOW}\n")
        signal.raise_signal(signal.SIGINT)


cli_data.message_lines = _spy
sys.setprofile(_profile)
try:
    code = cli.main(sys.argv[2:])
finally:
    sys.setprofile(None)
raise SystemExit(code)
