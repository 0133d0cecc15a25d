"""The wall clock, behind the Clock port."""

from __future__ import annotations

import time


class WallClock:
    """Unix seconds from the system clock."""

    def now_s(self) -> float:
        return time.time()
