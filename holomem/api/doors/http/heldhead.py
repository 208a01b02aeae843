"""How an HTTP answer leaves the server: its head and a small body in one write.

Owns: :class:`HeldHead`, the transport each request's answer is written to (the
server's httptools protocol gives every request one, :mod:`.webguard`). uvicorn writes an
answer's head as soon as the app starts it and its body after, so each answer was two
``write`` calls: two segments on the wire, and a client woken for the head only to wait
again for the body. HeldHead keeps the head back until the body's write, to which it is
joined, or until the event loop's current turn ends (a streamed answer, or one whose body
comes later, is never delayed past it). Imports asyncio only.
"""

from __future__ import annotations

import asyncio
from typing import Any


class HeldHead(asyncio.Transport):
    """A request's view of its connection's transport, whose first write (the answer's
    head) waits for the next write or the end of the loop's turn."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._first = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is not None:
            data, self._held = self._held + bytes(data), None
        elif self._first:
            self._first = False
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Write what is held back, if anything."""
        if self._held is not None:
            data, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)
