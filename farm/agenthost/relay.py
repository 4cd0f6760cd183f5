"""The worker's end of the agent's only network paths: a Unix socket in the sandbox's private
folder whose every connection is carried to one TCP endpoint on the worker's loopback (the
session's MCP server, or its model proxy). The sandbox's end is farm/agents/loopback.py."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from farm.agenthost.sandbox import sandbox_uid
from farm.agents.loopback import _pipe


class Relay:
    """`Relay(socket_path, port).start()` … `.stop()`: connections to the socket reach 127.0.0.1:port."""

    def __init__(self, socket_path: Path, port: int) -> None:
        self.socket_path, self.port = socket_path, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    def start(self) -> Relay:
        ready = threading.Event()
        errors: list[BaseException] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

        async def main() -> None:
            self._stop = asyncio.Event()
            try:
                server = await asyncio.start_unix_server(handle, str(self.socket_path))
                os.chmod(self.socket_path, 0o600)
                uid = sandbox_uid()  # a root worker's agent runs as a uid of its own: the socket is its
                if uid is not None:
                    os.chown(self.socket_path, uid, uid)
            except BaseException as exc:  # reported to start()'s caller
                errors.append(exc)
                ready.set()
                return
            self._loop = asyncio.get_running_loop()
            ready.set()
            async with server:
                await self._stop.wait()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), name="agent-relay", daemon=True)
        self._thread.start()
        ready.wait(30)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.socket_path.unlink(missing_ok=True)
