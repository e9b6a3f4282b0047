"""Storage codec: orjson with raw bytes blobs, zstd for large blobs and manifests.

Frame: plain orjson JSON when an event has no bytes; otherwise
``b"B" + u32 header length + header JSON + blobs``, the header listing ``[key, len, z]``
for each top-level bytes field (``z`` = 1 when the blob is zstd-compressed).
The event timestamp is stored as integer microseconds (``__ts``), not an ISO string.

An output event, most of any journal, has a fixed frame with no JSON in it (for the replay rate: a
replay parsed a JSON header per event, a third of its cost)::

    b"O" + i64 time (µs) + u32 generation + u8 z + u8 len(stream) + u16 len(attempt id)
         + stream + attempt id (UTF-8) + the bytes (zstd-compressed when z = 1)

A store written before it (``B`` frames only) reads unchanged; a release before it cannot
read a store written since.
"""
from __future__ import annotations

import struct
import threading
from datetime import datetime

import orjson
import zstandard
from eventsourcing.persistence import Transcoder

from session_supervisor.domain.model.event_base import EPOCH, timestamp_of

COMPRESS_MIN = 1024
# A blob this large is compressed only if a sample of it compresses: random or already
# compressed output (a binary ``cat``, ``tar`` to stdout) would spend ~85 µs per 256 KiB
# for nothing, on the writer thread that sets the ingest rate. The sample costs ~5 µs.
PROBE_MIN = 64 * 1024
PROBE_SIZE = 4096
PROBE_RATIO = 0.95
_HEADER = struct.Struct(">I")
_OUTPUT = struct.Struct(">qIBBH")  # after b"O": time, generation, z, len(stream), len(attempt id)
OUTPUT_KEYS = frozenset(("timestamp", "generation", "attempt_id", "stream", "data"))
_local = threading.local()


def _zc() -> zstandard.ZstdCompressor:
    # zstandard contexts are not thread-safe: one per thread, reused (14 µs -> 6 µs per event).
    c = getattr(_local, "c", None)
    if c is None:
        c = _local.c = zstandard.ZstdCompressor(level=1)
    return c


def _zd() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "d", None)
    if d is None:
        d = _local.d = zstandard.ZstdDecompressor()
    return d


def _micros(value: datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _default(value):
    if isinstance(value, datetime):
        return {"__dt__": _micros(value)}
    raise TypeError(f"cannot encode {type(value).__name__}")


_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def _worth_compressing(blob: bytes) -> bool:
    if len(blob) < PROBE_MIN:
        return True
    middle = len(blob) // 2  # the middle: a header at the start says little about the rest
    sample = blob[middle:middle + PROBE_SIZE]
    return len(_zc().compress(sample)) < PROBE_RATIO * len(sample)


class OrjsonTranscoder(Transcoder):
    compress_blobs = True

    def encode(self, obj: dict) -> bytes:
        if obj.keys() == OUTPUT_KEYS:
            frame = self._output_frame(obj)
            if frame is not None:
                return frame
        return self.encode_generic(obj)

    def encode_generic(self, obj: dict) -> bytes:
        """The JSON or ``B`` frame (every event's before output frames existed, still read)."""
        header = {}
        blobs = []
        for key, value in obj.items():
            if key == "timestamp":
                header["__ts"] = _micros(value)
            elif isinstance(value, (bytes, bytearray, memoryview)):
                blobs.append((key, bytes(value)))
            else:
                header[key] = value
        if not blobs:
            return orjson.dumps(header, default=_default, option=_OPTS)
        index = []
        parts = []
        for key, blob in blobs:
            z = 0
            if self.compress_blobs and len(blob) >= COMPRESS_MIN and _worth_compressing(blob):
                packed = _zc().compress(blob)
                if len(packed) < len(blob):
                    blob, z = packed, 1
            index.append([key, len(blob), z])
            parts.append(blob)
        header["__blobs__"] = index
        head = orjson.dumps(header, default=_default, option=_OPTS)
        return b"B" + _HEADER.pack(len(head)) + head + b"".join(parts)

    def _output_frame(self, obj: dict) -> bytes | None:
        """The fixed frame of an output event; None for a value it cannot hold (the generic
        frame takes it)."""
        parts = self.output_frame_parts(obj)
        return None if parts is None else parts[0] + parts[1]

    def output_frame_parts(self, obj: dict) -> tuple[bytes, bytes] | None:
        """An output event's frame as (everything before the bytes, the bytes), whose join is
        the frame: a store that writes the frame out of line hands both to one ``pwritev`` and
        never copies the bytes into a joined frame (on this class of VM a copy of 256 MiB takes
        0.1-0.2 s). None for a value the fixed frame cannot hold."""
        if obj.keys() != OUTPUT_KEYS:
            return None
        generation, attempt_id, stream, data = obj["generation"], obj["attempt_id"], obj["stream"], obj["data"]
        if not (type(generation) is int and 0 <= generation < 1 << 32 and type(attempt_id) is str
                and type(stream) is str and isinstance(data, (bytes, bytearray, memoryview))
                and isinstance(obj["timestamp"], datetime)):
            return None
        attempt, name = attempt_id.encode(), stream.encode()
        if len(name) > 255 or len(attempt) > 65535:
            return None
        blob, z = bytes(data), 0
        if self.compress_blobs and len(blob) >= COMPRESS_MIN and _worth_compressing(blob):
            packed = _zc().compress(blob)
            if len(packed) < len(blob):
                blob, z = packed, 1
        head = _OUTPUT.pack(_micros(obj["timestamp"]), generation, z, len(name), len(attempt))
        return b"".join((b"O", head, name, attempt)), blob

    def decode(self, data: bytes) -> dict:
        obj = self.decode_record(data)
        micros = obj.pop("__ts", None)
        if micros is not None:
            obj["timestamp"] = timestamp_of(micros * 1000)
        state = obj.get("state")
        if isinstance(state, dict):  # snapshots carry the library's datetimes inside ``state``
            for key in ("_created_on", "_modified_on"):
                value = state.get(key)
                if isinstance(value, dict) and "__dt__" in value:
                    state[key] = timestamp_of(value["__dt__"] * 1000)
        return obj

    def decode_record(self, data: bytes) -> dict:
        """The stored fields with the time left as integer microseconds (``__ts``): journal
        pages render it straight to text, and a datetime per event would double their cost."""
        kind = data[:1]
        if kind == b"O":
            micros, generation, stream, attempt_id, blob = output_fields(data)
            return {"__ts": micros, "attempt_id": attempt_id.decode(), "generation": generation,
                    "stream": stream.decode(), "data": blob}
        if kind != b"B":
            return orjson.loads(data)
        (size,) = _HEADER.unpack_from(data, 1)
        start = 5 + size
        obj = orjson.loads(data[5:start])
        for key, length, z in obj.pop("__blobs__"):
            blob = data[start:start + length]
            obj[key] = _zd().decompress(blob) if z else blob
            start += length
        return obj


def output_fields(data: bytes) -> tuple[int, int, bytes, bytes, bytes]:
    """An output frame's time (µs), generation, stream and attempt id (UTF-8) and bytes."""
    micros, generation, z, name_len, attempt_len = _OUTPUT.unpack_from(data, 1)
    start = 1 + _OUTPUT.size
    name_end = start + name_len
    blob_start = name_end + attempt_len
    blob = data[blob_start:]
    return micros, generation, data[start:name_end], data[name_end:blob_start], _zd().decompress(blob) if z else blob


def compress(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def decompress(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompress(data)
