"""Pure decisions: restart, backoff, Go-style duration strings. Time comes in as ``now_ns``."""
from __future__ import annotations

from dataclasses import dataclass

from .phases import RestartPolicy

RESTART_LIMIT_EXCEEDED = "restart_limit_exceeded"


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    delay_ms: int = 0
    reason: str = ""  # "restart_limit_exceeded" when the window is full
    window_ns: tuple[int, ...] = ()  # restart times kept in the window (including this one)


def wants_restart(policy: str, exit_code: int) -> bool:
    if policy == RestartPolicy.ALWAYS:
        return True
    if policy == RestartPolicy.ON_FAILURE:
        return exit_code != 0
    return False


def backoff_ms(restart: dict, restarts_in_window: int) -> int:
    delay = restart["initial_backoff_ms"] * (2 ** max(restarts_in_window - 1, 0))
    return min(delay, restart["max_backoff_ms"])


def decide_restart(restart: dict, exit_code: int, recent_ns: list[int], now_ns: int) -> RestartDecision:
    """The restart policy: sliding window of restarts, exponential backoff, limit -> failed."""
    if not wants_restart(restart["policy"], exit_code):
        return RestartDecision(restart=False)
    horizon = now_ns - restart["window_seconds"] * 1_000_000_000
    kept = [t for t in recent_ns if t >= horizon]  # only restarts *older* than the window go
    if len(kept) >= restart["max_restarts"]:
        return RestartDecision(restart=False, reason=RESTART_LIMIT_EXCEEDED, window_ns=tuple(kept))
    kept.append(now_ns)
    return RestartDecision(restart=True, delay_ms=backoff_ms(restart, len(kept)), window_ns=tuple(kept))


def expiry_due(lifecycle: dict, created_ns: int, last_activity_ns: int, now_ns: int) -> bool:
    """Session expiry: max lifetime from creation, idle timeout from the last activity (0 = off)."""
    lifetime_s = lifecycle.get("max_lifetime_seconds", 0)
    idle_s = lifecycle.get("idle_timeout_seconds", 0)
    if lifetime_s > 0 and now_ns - created_ns >= lifetime_s * 1_000_000_000:
        return True
    return idle_s > 0 and now_ns - last_activity_ns >= idle_s * 1_000_000_000


def go_duration(ms: int) -> str:
    """Format milliseconds like Go's time.Duration.String(): 250ms, 1s, 1.5s, 1m30s."""
    if ms < 1000:
        return f"{ms}ms"
    hours, rest_ms = divmod(ms, 3_600_000)
    minutes, rest_ms = divmod(rest_ms, 60_000)
    seconds = f"{rest_ms / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"
