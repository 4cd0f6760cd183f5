"""Inside the agent's sandbox, which has a network of its own with nothing on it: the ports its
context names (the MCP server's, the model endpoint's) are served on its own loopback and each
connection is carried over a Unix socket the worker put in the sandbox to that one endpoint. The
agent reaches those two endpoints, and no other address of the worker's or the world's."""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlsplit

CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def _handler(socket_path: str):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def start() -> asyncio.AbstractEventLoop:
    """The event loop the forwarders run on, in a daemon thread (started before the session is
    known, so serving its ports costs only the binds)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="loopback", daemon=True).start()
            _loop = loop
        return _loop


def serve(routes: dict[str, str]) -> None:
    """Serve each URL's loopback port (routes: url -> Unix socket path); returns once all listen."""

    async def bind() -> None:
        for url, path in routes.items():
            port = urlsplit(url).port
            if port is None:
                raise ValueError(f"no port in {url}")
            await asyncio.start_server(_handler(path), "127.0.0.1", port)

    asyncio.run_coroutine_threadsafe(bind(), start()).result(timeout=30)
