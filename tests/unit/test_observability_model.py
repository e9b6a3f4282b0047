"""Logs and events as projections of journal rows (pure): lines, cursors, the merge of streams."""
from __future__ import annotations

import pytest

from session_supervisor.domain.model import observability as obs


def lines(stream, seq, text, at):
    return obs.log_items(stream, seq, {"data": text.encode(), "stream": "stdout", "attempt_id": "att-1"}, at, 0)


def test_an_output_event_is_split_into_lines_and_a_trailing_fragment_is_one_too():
    items = lines("ses-a", 3, "one\r\ntwo\nthr", 10)
    assert [i.body["message"] for i in items] == ["one", "two", "thr"]
    assert [i.line for i in items] == [1, 2, 3] and [i.last_line for i in items] == [False, False, True]


def test_a_cursor_round_trips_and_a_foreign_one_is_refused():
    positions = {"ses-a": (3, 1), "sb-x": (7, 0)}
    assert obs.decode_cursor(obs.encode_cursor(positions)) == positions
    for bad in ("nope", "c1.!!!", "c1." + "YQ"):
        with pytest.raises(obs.CursorError):
            obs.decode_cursor(bad)


def test_a_page_merges_streams_by_time_and_resumes_inside_an_event():
    streams = {"ses-a": (lines("ses-a", 1, "a1\na2\na3\n", 10), False),
               "ses-b": (lines("ses-b", 1, "b1\n", 15), False)}
    page, after, more = obs.merge_page(streams, {}, 2, lambda item: True)
    assert [i.body["message"] for i in page] == ["a1", "a2"] and more
    assert after == {"ses-a": (1, 2)}
    rest = {k: (obs.after_position(items, after.get(k)), cut) for k, (items, cut) in streams.items()}
    page, after, more = obs.merge_page(rest, after, 10, lambda item: True)
    assert [i.body["message"] for i in page] == ["a3", "b1"] and not more
    assert after == {"ses-a": (1, 0), "ses-b": (1, 0)}


def test_a_stream_cut_short_holds_the_page_at_its_last_read_item():
    streams = {"ses-a": (lines("ses-a", 1, "a1\n", 10), True), "ses-b": (lines("ses-b", 1, "b1\n", 20), False)}
    page, after, more = obs.merge_page(streams, {}, 10, lambda item: True)
    assert [i.body["message"] for i in page] == ["a1"] and more and "ses-b" not in after


def test_filtered_items_still_move_the_cursor():
    streams = {"ses-a": (lines("ses-a", 1, "x\ny\n", 10), False)}
    page, after, _ = obs.merge_page(streams, {}, 10, lambda item: item.body["message"] == "y")
    assert [i.body["message"] for i in page] == ["y"] and after == {"ses-a": (1, 0)}
