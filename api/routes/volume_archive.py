"""``PUT /api/v1/sandboxvolumes/{id}/files/archive?path=DIR``: a tar body unpacked under ``DIR``.

The body is spooled to a temporary file in the data dir first (at most the API's request size,
256 MiB; never in memory), then unpacked on the file threads through the volume's confined view
(``infra.volume_archive``). 200 ``{files, directories, symlinks, bytes}``; 400 for what is not a
tar archive, or an entry that climbs out with ``..``; 507 when the disk or the server's reserve is full.
"""
from __future__ import annotations

import tempfile

from sanic import Request

from ..schemas import ok
from .file_serving import path_arg


async def import_archive(request: Request, key: str, fs):
    container = request.app.ctx.container
    calls = container.file_calls
    base = path_arg(request)
    stream = request.stream
    if stream is not None:  # Sanic lifts the size limit for streamed bodies: the API's stays
        stream.request_max_size = request.app.config.REQUEST_MAX_SIZE
    length = request.headers.get("content-length", "")
    if length.isdigit():
        await calls.run(key, fs.admit, int(length), "this archive")
    with tempfile.TemporaryFile(dir=container.spool_dir()) as spool:
        while stream is not None and (chunk := await stream.read()) is not None:
            if chunk:
                await calls.run(key, spool.write, chunk)
        await calls.run(key, spool.seek, 0)
        counts = await calls.run(key, container.import_archive, fs, spool, base)
    return ok(counts)
