"""``python -m compactlog`` is the ``compactlog`` console script."""

from compactlog.client.cli import main

raise SystemExit(main())
