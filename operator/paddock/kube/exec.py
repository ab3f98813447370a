"""Running a command in a pod's container through the ``pods/exec`` API."""

from __future__ import annotations

import contextlib
import json
import select
import ssl
import time
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client
from kubernetes.stream import stream
from websocket import ABNF, WebSocketException

from paddock.kube.errors import converting


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int


@converting
def run(
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    stdin: str | None = None,
    timeout_seconds: float = 60,
) -> ExecResult:
    """Run ``argv`` in the container and wait for it, writing ``stdin`` (if any) first.
    Raises ``KubeError`` (``NotFoundError`` for a pod that is gone) when the pod cannot be
    reached."""
    # stream() swaps the request method of the client it is given: use one of our own.
    api = client.CoreV1Api(client.ApiClient())
    try:
        connection = stream(
            api.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container=container,
            command=argv,
            stdin=stdin is not None,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
        cut: Exception | None = None
        if stdin is not None:
            # The scripts Paddock runs read their input up to an end line, not to EOF. One
            # may end without reading it (a refusal): the connection is then closed under the
            # write, and what the command said and its exit code are read all the same.
            try:
                connection.write_stdin(stdin)
            except (WebSocketException, OSError) as exc:
                cut = exc
        try:
            connection.run_forever(timeout=timeout_seconds)
        except (WebSocketException, OSError):
            if cut is None:
                raise
            with contextlib.suppress(WebSocketException, OSError):
                connection.close()  # (its reply to the close failed: the socket is gone)
        if cut is not None and connection.returncode is None:
            raise cut
        code = connection.returncode
        return ExecResult(
            connection.read_stdout() or "",
            connection.read_stderr() or "",
            -1 if code is None else int(code),
        )
    finally:
        api.api_client.close()


class Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class Source(Protocol):
    def read(self, size: int, /) -> bytes: ...


STREAM_CHUNK = 256 * 1024
STDERR_KEPT = 4096  # bytes of a streamed command's stderr kept for its error message
STDOUT, STDERR, STATUS = 1, 2, 3  # the exec protocol's channels from the container


@dataclass(frozen=True)
class Streamed:
    exit_code: int
    stderr: str  # its last STDERR_KEPT bytes


@converting
def stream_out(
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    sink: Sink,
    timeout_seconds: float,
) -> Streamed:
    """Run ``argv`` in the container, writing its stdout to ``sink`` as it comes (bytes, never
    held whole in memory). ``TimeoutError`` when it runs longer than ``timeout_seconds``."""
    api = client.CoreV1Api(client.ApiClient())
    try:
        frames = _Frames(binary(api, namespace, pod, container, argv, stdin=False), sink)
        return frames.until_done(time.monotonic() + timeout_seconds, argv, timeout_seconds)
    finally:
        api.api_client.close()


@converting
def stream_in(
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    source: Source,
    timeout_seconds: float,
) -> Streamed:
    """Run ``argv`` in the container with ``source`` as its stdin, written in chunks. The exec
    protocol before v5 cannot close stdin, so ``argv`` must stop reading by itself (for
    example ``head -c SIZE | ...``)."""
    api = client.CoreV1Api(client.ApiClient())
    try:
        connection = binary(api, namespace, pod, container, argv, stdin=True)
        frames = _Frames(connection, None)
        deadline = time.monotonic() + timeout_seconds
        while chunk := source.read(STREAM_CHUNK):
            connection.write_stdin(chunk)
            frames.read(timeout=0)
            if not frames.open or time.monotonic() > deadline:
                break
        return frames.until_done(deadline, argv, timeout_seconds)
    finally:
        api.api_client.close()


def binary(
    api: client.CoreV1Api, namespace: str, pod: str, container: str, argv: list[str], stdin: bool
) -> Any:
    """An exec connection in the binary protocol, not yet read (``stream()`` swaps the request
    method of the client ``api`` has: give it one of its own)."""
    return stream(
        api.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        container=container,
        command=argv,
        stdin=stdin,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
        binary=True,
    )


class _Frames:
    """The frames of an exec connection, read off its websocket one at a time: stdout goes to
    the sink as each frame comes, the last STDERR_KEPT bytes of stderr are kept, and the status
    channel gives the exit code. The client's own ``update()`` is not used for streams: it
    keeps a copy of all output, and appends each frame to a growing buffer while frames keep
    coming, which stalled archives of a few hundred megabytes."""

    def __init__(self, connection: Any, sink: Sink | None) -> None:
        self._connection = connection
        self._socket = connection.sock  # websocket-client's WebSocket
        self._sink = sink
        self._stderr = bytearray()
        self._status = bytearray()
        self.open = True

    def read(self, timeout: float) -> None:
        """Read every frame there is, waiting at most ``timeout`` seconds for the first."""
        wait = timeout
        while self.open and self._ready(wait):
            wait = 0
            opcode, frame = self._socket.recv_data_frame(True)
            if opcode == ABNF.OPCODE_CLOSE:
                self.open = False
            elif opcode in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) and frame.data:
                self._take(frame.data[0], frame.data[1:])

    def until_done(self, deadline: float, argv: list[str], timeout_seconds: float) -> Streamed:
        """Read until the command ends: its exit code and stderr; ``TimeoutError`` (the
        connection closed, which stops the command) once ``deadline`` passes."""
        while self.open and time.monotonic() <= deadline:
            self.read(timeout=1)
        if self.open:
            self._connection.close()
            raise TimeoutError(f"{argv[0]} ran longer than {timeout_seconds:.0f}s")
        return Streamed(self._exit_code(), self._stderr.decode(errors="replace"))

    def _ready(self, timeout: float) -> bool:
        if not self._socket.connected:
            self.open = False
            return False
        raw = self._socket.sock
        # A TLS record holds several frames: those already decrypted are invisible to select.
        if isinstance(raw, ssl.SSLSocket) and raw.pending():
            return True
        readable, _, _ = select.select((raw,), (), (), timeout)
        return bool(readable)

    def _take(self, channel: int, data: bytes) -> None:
        if channel == STDOUT and self._sink is not None:
            self._sink.write(data)
        elif channel == STDERR:
            self._stderr.extend(data)
            del self._stderr[:-STDERR_KEPT]
        elif channel == STATUS:
            self._status.extend(data)

    def _exit_code(self) -> int:
        return exit_code(self._status)


def exit_code(status: bytes | bytearray) -> int:
    """From the exec protocol's status channel: 0 for a Success status, the ExitCode cause's
    number for a failure, else -1."""
    try:
        said = json.loads(status or b"{}")
    except ValueError:
        return -1
    if not isinstance(said, dict):
        return -1
    if said.get("status") == "Success":
        return 0
    causes = (said.get("details") or {}).get("causes") or []
    codes = [c.get("message", "") for c in causes if c.get("reason") == "ExitCode"]
    return int(codes[0]) if codes and codes[0].isdigit() else -1
