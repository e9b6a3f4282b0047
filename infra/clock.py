"""SystemClock: wall-clock nanoseconds and asyncio sleeps."""
from __future__ import annotations

import asyncio
import time


class SystemClock:
    def now_ns(self) -> int:
        return time.time_ns()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
