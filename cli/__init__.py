"""The ``compactlog`` command line: the application layer on top of every other.

It may import all of compactlog (the client library for the verbs that talk to a server,
the server for ``serve``, the Spark engine for ``--engine spark`` and ``export``, the
benchmark suite for ``bench``); nothing imports it but ``python -m compactlog``. The verbs
live in ``topics``, ``produce``, ``data`` (read), ``records``, ``admin``, ``export``,
``offline`` and ``completion``; ``app`` parses and dispatches, ``argv`` lets the global
options stand anywhere, ``output`` prints text or JSON for every verb.
"""

from compactlog._linked import only_as
from compactlog.cli.app import build_parser, main

only_as(__name__, "compactlog.cli")  # see compactlog/_linked.py

__all__ = ["build_parser", "main"]
