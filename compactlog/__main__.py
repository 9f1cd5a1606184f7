"""``python -m compactlog`` is the ``compactlog`` console script."""

from compactlog.cli import main

raise SystemExit(main())
