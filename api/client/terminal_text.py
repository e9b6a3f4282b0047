"""A terminal's output as the lines of text it shows: ``sessionctl session log`` of a PTY session.

A PTY's bytes are for a terminal: colours, cursor moves, ``\\r`` redraws of a progress bar,
backspaces of a line editor, window titles. pyte (a VT100/VT220 parser, well kept) reads
every escape sequence; this listener keeps only what lands on each line: text drawn at the
cursor, carriage returns and backspaces moving it, erases cutting the line, and a line
feed ending it. Anything else (colours, titles, scrolling regions) draws nothing.
"""
from __future__ import annotations

import pyte

TAB = 8


class _Lines:
    """pyte's listener: the current line and where the cursor is on it."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.line: list[str] = []
        self.col = 0

    def draw(self, text: str) -> None:
        for char in text:
            if self.col < len(self.line):
                self.line[self.col] = char
            else:
                self.line.extend(" " * (self.col - len(self.line)))
                self.line.append(char)
            self.col += 1

    def linefeed(self) -> None:
        self.done.append("".join(self.line).rstrip())
        self.line, self.col = [], 0

    index = linefeed  # ESC D, and what a terminal does at its bottom line: the same for a log

    def carriage_return(self) -> None:
        self.col = 0

    def backspace(self) -> None:
        self.col = max(0, self.col - 1)

    def tab(self) -> None:
        self.col = (self.col // TAB + 1) * TAB

    def cursor_back(self, count: int | None = None) -> None:
        self.col = max(0, self.col - (count or 1))

    def cursor_forward(self, count: int | None = None) -> None:
        self.col += count or 1

    def cursor_to_column(self, column: int | None = None) -> None:
        self.col = max(0, (column or 1) - 1)

    def erase_in_line(self, how: int = 0, *args, **kwargs) -> None:
        if how == 0:
            del self.line[self.col:]
        elif how == 1:
            self.line[:self.col] = [" "] * min(self.col, len(self.line))
        else:
            self.line = []

    def __getattr__(self, name: str):
        return _ignore  # every other event (colours, titles, modes) puts no text on the line


def _ignore(*args, **kwargs) -> None:
    return None


class TerminalText:
    """Feed it a PTY's bytes; ``lines()`` hands on the lines completed so far."""

    def __init__(self) -> None:
        self._lines = _Lines()
        self._stream = pyte.ByteStream(self._lines)

    def feed(self, data: bytes) -> list[str]:
        self._stream.feed(data)
        return self.lines()

    def lines(self) -> list[str]:
        done, self._lines.done = self._lines.done, []
        return done

    def rest(self) -> str:
        """The line still open (no line feed yet), as it shows now."""
        return "".join(self._lines.line).rstrip()
