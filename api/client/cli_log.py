"""How ``sessionctl session log`` writes output: raw bytes, or a terminal's text; all or a tail.

The retained output is read first (``catch_up``): with ``--tail N`` only its last N lines
are kept, and ``caught_up`` writes them. ``--follow`` then writes each live chunk as it
comes (``live``). A PTY session's output is rendered as the lines a terminal shows
(``TerminalText``) unless ``--raw``; a pipes session's bytes are its text already.
"""
from __future__ import annotations

from collections import deque
from typing import BinaryIO


class LogWriter:
    def __init__(self, out: BinaryIO, *, as_text: bool, tail: int | None) -> None:
        self.out = out
        self.tail = tail
        self.text = None
        if as_text:
            from .terminal_text import TerminalText
            self.text = TerminalText()
        self.kept: deque[bytes] | None = deque(maxlen=tail) if tail is not None else None
        self.partial = b""  # raw mode with a tail: the bytes after the last newline

    def _lines(self, data: bytes) -> list[bytes]:
        """Complete lines (each ending in a newline) out of ``data``."""
        if self.text is not None:
            return [line.encode() + b"\n" for line in self.text.feed(data)]
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        return [line + b"\n" for line in lines]

    def catch_up(self, data: bytes) -> None:
        if self.kept is None and self.text is None:
            self.out.write(data)  # the bytes as they are: the common case, nothing parsed
            return
        lines = self._lines(data)
        if self.kept is not None:
            self.kept.extend(lines)
        else:
            self.out.writelines(lines)

    def caught_up(self, *, final: bool) -> None:
        if self.kept is not None:
            kept = list(self.kept)
            open_line = self.text.rest() if self.text is not None else self.partial
            if final and open_line and self.tail is not None:  # the last line, unfinished, counts
                kept = kept[len(kept) - self.tail + 1:] if self.tail > 0 else []
                if self.tail == 0:
                    self._drop_open_line()
            self.out.writelines(kept)
            self.kept = None
        if final:
            self.end()
        self.out.flush()

    def live(self, data: bytes) -> None:
        if self.text is None:
            self.out.write(self.partial + data)
            self.partial = b""
        else:
            self.out.writelines(self._lines(data))
        self.out.flush()

    def _drop_open_line(self) -> None:
        if self.text is not None:
            self.text.lines()
            self.text = None
        self.partial = b""

    def end(self) -> None:
        """What is left of the last line, with no newline added for raw bytes."""
        if self.text is not None:
            rest = self.text.rest()
            if rest:
                self.out.write(rest.encode() + b"\n")
        elif self.partial:
            self.out.write(self.partial)
            self.partial = b""
        self.out.flush()
