"""Signal names and numbers as the public contract spells them.

Pure on purpose: the API layer validates a signal before any lookup, and the
journal records Go's descriptive names, so neither may depend on ``os`` or
``signal``. Numbers are hardcoded for Linux (the only platform we run on).
"""
from __future__ import annotations

# The names a client may send to ``…/signals``, in Linux numbering.
_NUMBER_BY_NAME: dict[str, int] = {
    "HUP": 1,
    "INT": 2,
    "QUIT": 3,
    "KILL": 9,
    "USR1": 10,
    "USR2": 12,
    "TERM": 15,
    "CONT": 18,
    "STOP": 19,
    "WINCH": 28,
}
# Short names for reporting how a process died (SEGV, PIPE, ...): wider than
# the accepted set, because a process can die by any signal.
_NAME_BY_NUMBER: dict[int, str] = {
    1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS",
    8: "FPE", 9: "KILL", 10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE",
    14: "ALRM", 15: "TERM", 16: "STKFLT", 17: "CHLD", 18: "CONT", 19: "STOP",
    20: "TSTP", 21: "TTIN", 22: "TTOU", 23: "URG", 24: "XCPU", 25: "XFSZ",
    26: "VTALRM", 27: "PROF", 28: "WINCH", 29: "IO", 30: "PWR", 31: "SYS",
}

# Go's syscall.Signal.String() table for linux/amd64; the Go service writes
# these into `signal.sent` and AeroLVM's `exit_signal`, so they must match.
# Go prints "signal N" for anything past 31 (real-time signals).
_DESCRIPTION_BY_NUMBER: dict[int, str] = {
    1: "hangup",
    2: "interrupt",
    3: "quit",
    4: "illegal instruction",
    5: "trace/breakpoint trap",
    6: "aborted",
    7: "bus error",
    8: "floating point exception",
    9: "killed",
    10: "user defined signal 1",
    11: "segmentation fault",
    12: "user defined signal 2",
    13: "broken pipe",
    14: "alarm clock",
    15: "terminated",
    16: "stack fault",
    17: "child exited",
    18: "continued",
    19: "stopped (signal)",
    20: "stopped",
    21: "stopped (tty input)",
    22: "stopped (tty output)",
    23: "urgent I/O condition",
    24: "CPU time limit exceeded",
    25: "file size limit exceeded",
    26: "virtual timer expired",
    27: "profiling timer expired",
    28: "window changed",
    29: "I/O possible",
    30: "power failure",
    31: "bad system call",
}

MAX_SIGNAL = 64  # SIGRTMAX on Linux


def parse_signal(text: str) -> int:
    """Parse ``TERM``, ``sigterm``, `` SIGTERM `` or ``15`` into a signal number.

    Raises ``ValueError("unsupported signal")`` for anything else, including
    numbers outside 1-64 and non-ASCII digits (``int()`` would accept those).
    """
    name = text.strip().upper()
    if name.startswith("SIG"):
        name = name[3:]
    number = _NUMBER_BY_NAME.get(name)
    if number is not None:
        return number
    if name.isascii() and name.isdigit():
        number = int(name)
        if 1 <= number <= MAX_SIGNAL:
            return number
    raise ValueError("unsupported signal")


def signal_short_name(number: int) -> str:
    """``15`` -> ``"TERM"``, ``11`` -> ``"SEGV"``; unknown (real-time) -> ``str(number)``."""
    return _NAME_BY_NUMBER.get(number, str(number))


def signal_description(number: int) -> str:
    """Go's descriptive name: ``15`` -> ``"terminated"``, unknown -> ``"signal N"``."""
    return _DESCRIPTION_BY_NUMBER.get(number, f"signal {number}")
