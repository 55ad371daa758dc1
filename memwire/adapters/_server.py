"""The HTTP/1.1 protocol ``memwire proxy`` serves with: uvicorn's h11 protocol plus a header timeout.

uvicorn closes idle keep-alive connections, but a connection that opens and then sends its request
headers slowly, or never finishes them, is held forever (before the proxy key is even checked):
a few hundred such connections would hold every slot. Here each request's headers must arrive
within ``header_timeout`` seconds of the connection opening, or of the previous response; else
the connection is closed. The body has its own timeout in the proxy app (a 408 in the API's format);
responses are never cut (a streamed answer may take minutes).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["protocol_with_header_timeout"]


class _GuardedH11Protocol(H11Protocol):
    header_timeout: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.logger.info("memwire proxy: closed a connection that sent no complete request headers in %.0f s",
                             self.header_timeout)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()  # a new request begins: its headers are on the clock
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()  # the headers are complete: the request is the app's now

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def protocol_with_header_timeout(header_timeout: float) -> type[H11Protocol]:
    """An h11 protocol class whose connections must send complete headers within ``header_timeout`` s."""
    return type("MemwireH11Protocol", (_GuardedH11Protocol,), {"header_timeout": float(header_timeout)})
