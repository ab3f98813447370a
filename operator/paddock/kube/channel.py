"""A long-lived command in a pod's container through ``pods/exec``: one websocket (and one TLS
handshake) for as long as the caller keeps it, the command's output lines handed over as they
come, and lines written to its stdin at any time.

Each channel reads on a thread of its own, blocked on its socket (an idle channel costs no
CPU). A channel that says nothing for ``silence`` seconds is taken to be lost (the command
sends a beat more often), and closed."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client
from websocket import ABNF, WebSocketException

from paddock.kube.errors import converting
from paddock.kube.exec import STATUS, STDERR, STDERR_KEPT, STDOUT, binary, exit_code

log = logging.getLogger("paddock.kube")
LONGEST_LINE = 4 * 1024 * 1024  # a line longer than this ends the channel (never read whole)


class Channel:
    """``on_line(line)`` is called with each line the command prints (without its newline),
    on the channel's thread; ``on_end(exit_code, stderr)`` once, when the command has ended or
    the connection is lost (``exit_code`` is None then)."""

    def __init__(
        self,
        connection: Any,
        api: client.ApiClient,
        on_line: Callable[[bytes], None],
        on_end: Callable[[int | None, str], None],
        silence: float,
        name: str,
    ) -> None:
        self._connection, self._api = connection, api
        self._socket = connection.sock  # websocket-client's WebSocket
        self._socket.settimeout(silence)
        self._on_line, self._on_end = on_line, on_end
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name=name, daemon=True)
        self._thread.start()

    @property
    def open(self) -> bool:
        return not self._closed.is_set()

    def send(self, text: str) -> bool:
        """Write ``text`` to the command's stdin; False when the channel is closed."""
        if self._closed.is_set():
            return False
        try:
            self._connection.write_stdin(text.encode())
        except (WebSocketException, OSError):
            self.close()
            return False
        return True

    def close(self) -> None:
        """Close the connection (the command sees its stdin end); ``on_end`` follows. It never
        waits: the socket is shut down, not closed with a handshake (whose answer could take
        seconds, and this may be called on the event loop)."""
        self._closed.set()
        with contextlib.suppress(WebSocketException, OSError):
            self._socket.abort()

    def _read(self) -> None:
        pending, stderr, status = bytearray(), bytearray(), bytearray()
        try:
            while not self._closed.is_set():
                opcode, frame = self._socket.recv_data_frame(True)
                if opcode == ABNF.OPCODE_CLOSE:
                    break
                if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or not frame.data:
                    continue
                channel, data = frame.data[0], frame.data[1:]
                if channel == STDOUT:
                    pending.extend(data)
                    *lines, rest = pending.split(b"\n")
                    for line in lines:
                        self._on_line(bytes(line))
                    pending = bytearray(rest)
                    if len(pending) > LONGEST_LINE:
                        break
                elif channel == STDERR:
                    stderr.extend(data)
                    del stderr[:-STDERR_KEPT]
                elif channel == STATUS:
                    status.extend(data)
        except (WebSocketException, OSError) as exc:  # (a timeout too: the command went silent)
            if not self._closed.is_set():
                log.debug("exec channel %s lost: %s", self._thread.name, exc)
        except Exception:  # a bug in a handler: the channel ends, and says so
            log.exception("exec channel %s failed", self._thread.name)
        finally:
            self._closed.set()
            with contextlib.suppress(WebSocketException, OSError):
                self._connection.close(timeout=1)  # (only this thread reads the socket)
            self._api.close()
            told = exit_code(status) if status else None  # (None: the end was never told)
            self._on_end(told, stderr.decode(errors="replace"))


@converting
def open_channel(
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    on_line: Callable[[bytes], None],
    on_end: Callable[[int | None, str], None],
    *,
    first: str = "",
    silence: float = 30.0,
) -> Channel:
    """Start ``argv`` in the container and write ``first`` to its stdin. Raises ``KubeError``
    (``NotFoundError`` for a pod that is gone) when the pod cannot be reached."""
    api = client.ApiClient()
    try:
        connection = binary(client.CoreV1Api(api), namespace, pod, container, argv, stdin=True)
        if first:
            # A command may end without reading it all (a refusal): what it said and its exit
            # code are read all the same.
            with contextlib.suppress(WebSocketException, OSError):
                connection.write_stdin(first.encode())
    except BaseException:
        api.close()
        raise
    return Channel(connection, api, on_line, on_end, silence, f"paddock-exec-{pod}")
