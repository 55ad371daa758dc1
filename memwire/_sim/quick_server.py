"""uvicorn's server, stopped as soon as it is told to: for servers started and stopped in a thread
(:class:`~memwire._sim.fake_provider.ServerThread`, the demo, the tests).

uvicorn checks ``should_exit`` once every 0.1 s, and its shutdown pauses 0.1 s after asking the
open connections to close, then checks every 0.1 s whether they have: about 0.15 s a stop, spent
waiting (a test run stops a few hundred servers). Here :meth:`QuickServer.stop` wakes the main loop
at once, and the shutdown takes the same steps in the same order (stop accepting, ask every
connection to close, wait for the connections and the tasks to end within ``timeout_graceful_shutdown``,
cancel the tasks left, the app's lifespan shutdown), looking every 5 ms instead of pausing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading

import uvicorn

__all__ = ["QuickServer"]

_POLL_S = 0.005  # how often the shutdown looks whether connections and tasks are done
_TICK_S = 0.1  # uvicorn's tick (its date header, max-requests): unchanged while serving


class QuickServer(uvicorn.Server):
    """A ``uvicorn.Server`` whose :meth:`stop` (from any thread) ends ``serve`` without waiting for a tick."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._lock = threading.Lock()

    def stop(self) -> None:
        """Ask the server to exit now (thread-safe); ``serve`` returns once it has shut down."""
        self.should_exit = True
        with self._lock:
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile: nothing to wake
                loop.call_soon_threadsafe(wake.set)

    async def main_loop(self) -> None:
        # uvicorn's loop (a tick every 0.1 s while serving), woken early by stop()
        with self._lock:
            self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        wake = self._wake
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), _TICK_S)
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        state = self.server_state
        logger = logging.getLogger("uvicorn.error")  # what uvicorn's shutdown says, said the same
        logger.info("Shutting down")
        for server in self.servers:  # stop accepting new connections
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(state.connections):  # ask every connection to close
            connection.shutdown()
        loop = asyncio.get_running_loop()
        grace = self.config.timeout_graceful_shutdown
        deadline = None if grace is None else loop.time() + grace
        # the connections finish sending their responses, then the tasks end
        while (state.connections or state.tasks) and not self.force_exit:
            if deadline is not None and loop.time() >= deadline:
                logger.error("Cancel %s running task(s), timeout graceful shutdown exceeded", len(state.tasks))
                for task in state.tasks:
                    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
                break
            await asyncio.sleep(_POLL_S)
        if not self.force_exit:
            await self.lifespan.shutdown()
