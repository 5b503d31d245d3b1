"""A loopback load balancer in front of several `langflow run` servers, as machines behind one would run them.

`load_balancer(upstreams)` listens on 127.0.0.1 on a free port and hands each new TCP connection to the next upstream
in turn (round robin), in a thread of its own; it yields its base URL. A client that opens a connection per request
(no keep-alive) spreads its requests over every server.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit

CHUNK_BYTES = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(ConnectionError, OSError):
        while data := await reader.read(CHUNK_BYTES):
            writer.write(data)
            await writer.drain()
    with suppress(ConnectionError, OSError):
        writer.close()


async def _cancelled(tasks: set[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@contextmanager
def load_balancer(upstreams: list[str]) -> Iterator[str]:
    """Round robin over `upstreams` (base URLs such as http://127.0.0.1:7860); yields the balancer's base URL."""
    targets = itertools.cycle([(urlsplit(u).hostname or "127.0.0.1", urlsplit(u).port or 80) for u in upstreams])
    loop = asyncio.new_event_loop()

    async def forward(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*next(targets))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))

    server = loop.run_until_complete(asyncio.start_server(forward, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, name="load-balancer", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(_cancelled(asyncio.all_tasks(loop)))  # connections still open
        loop.close()
