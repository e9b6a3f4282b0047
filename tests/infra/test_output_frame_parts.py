"""A large output event's frame in two parts: joined, they are the frame the codec makes."""
from __future__ import annotations

import os
from datetime import datetime, timezone

from session_supervisor.infra.codec import OrjsonTranscoder


def output_state(data: bytes) -> dict:
    return {"timestamp": datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc), "generation": 3,
            "attempt_id": "att-0123", "stream": "stdout", "data": data}


def test_the_parts_of_an_output_frame_join_to_the_frame_the_codec_encodes():
    codec = OrjsonTranscoder()
    for data in (os.urandom(300_000), bytes(300_000), b"x" * 10):  # raw, compressed, small
        head, blob = codec.output_frame_parts(output_state(data))
        assert head + blob == codec.encode(output_state(data))
        assert codec.decode_record(head + blob)["data"] == data


def test_an_event_the_fixed_frame_cannot_hold_has_no_parts():
    codec = OrjsonTranscoder()
    assert codec.output_frame_parts({**output_state(b"x"), "generation": -1}) is None
    assert codec.output_frame_parts({"timestamp": output_state(b"")["timestamp"], "x": 1}) is None
