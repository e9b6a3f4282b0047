"""Argument types shared by ``sessiond serve``'s flag groups: a clear argparse error, never a traceback."""
from __future__ import annotations

import argparse
from typing import Callable


def whole_number(low: int, high: int, noun: str = "a whole number") -> Callable[[str], int]:
    """An int flag within ``low..high`` (both included)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}")
        return value
    return parse
