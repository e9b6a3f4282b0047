"""A thread that reads one PTY master and hands batches to the event loop.

A PTY master yields at most ~4 KiB per read. Read on the loop, every 4 KiB waits for the
loop's next turn, and the loop also serves HTTP and the commit pipeline: the measured
ingest was 0.5-0.9x a plain blocking reader. This thread blocks in ``poll`` and ``read``
(both release the GIL), drains what is ready into one batch of up to ``BATCH`` bytes and
hands it over with ``call_soon_threadsafe``, so the terminal keeps draining while the
loop is busy and the loop pays one callback per batch.

The master is closed by whichever side lets go of it last: ``stop`` (the loop gives it
up) closes it at once if the thread has already left at EOF, and otherwise wakes the
thread, which closes it on its way out. So neither a read nor a loop-side write can land
on a reused fd number. Batches reach the loop in order; ``on_eof`` comes after the last.
"""
from __future__ import annotations

import asyncio
import os
import select
import threading
from typing import Callable

BATCH = 256 * 1024
_READ_SIZE = 65536


class PtyReader:
    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, close_fd: Callable[[], None],
                 deliver: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._loop = loop
        self._fd = fd
        self._close_fd = close_fd
        self._deliver = deliver
        self._on_eof = on_eof
        self._running = threading.Event()  # cleared while paused (back-pressure)
        self._running.set()
        self._stopping = False  # the loop let go of the fd
        self._left = False  # the thread let go of it
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._run, name=f"pty-reader-{fd}", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        """Give up the master: closed now if the thread has left, else by the thread soon."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            if self._left:
                self._release()
                return
            self._running.set()
            os.write(self._wake_w, b"x")  # a fresh pipe with room: never blocks

    def _release(self) -> None:
        self._close_fd()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        eof = False
        try:
            while not eof:
                self._running.wait()
                if self._stopping:
                    return
                poller.poll()
                if self._stopping:
                    return
                eof = self._read_batch()
        finally:
            with self._lock:
                self._left = True
                if self._stopping:
                    self._release()
            if eof:
                self._post(self._on_eof)

    def _read_batch(self) -> bool:
        chunks = []
        size = 0
        eof = False
        while size < BATCH:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                # EIO is how Linux reports that every slave fd is closed; any other
                # read error ends the stream too, there is nothing to retry.
                data = b""
            if not data:
                eof = True
                break
            chunks.append(data)
            size += len(data)
        if chunks:
            self._post(self._deliver, chunks[0] if len(chunks) == 1 else b"".join(chunks))
        return eof

    def _post(self, fn, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the process is going down
            pass
