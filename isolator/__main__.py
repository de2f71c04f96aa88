from __future__ import annotations

from isolator.cli import main

raise SystemExit(main())
