"""One page of a directory listing of the file API: its names held, its entries rendered in batches."""
from __future__ import annotations

import os
from dataclasses import dataclass

LIST_PAGE = 100_000  # entries one listing answers at most (``after`` pages on)


@dataclass
class Listing:
    """An open directory and one page of its names, rendered in batches off the event loop."""

    fs: object  # the ConfinedFS that opened it (renders each entry)
    fd: int
    view: str
    names: list[str]
    more: bool  # entries after this page exist

    def render(self, start: int, stop: int) -> list[dict]:
        out = []
        for name in self.names[start:stop]:
            try:
                out.append(self.fs.entry_info(self.fd, name, f"{self.view}/{name}", None))
            except FileNotFoundError:
                continue  # removed since the names were read
        return out

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


