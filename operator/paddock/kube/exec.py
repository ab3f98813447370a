"""Running a command in a pod's container through the ``pods/exec`` API."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client
from kubernetes.stream import stream

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
        if stdin is not None:
            # The scripts Paddock runs read their input up to an end line, not to EOF.
            connection.write_stdin(stdin)
        connection.run_forever(timeout=timeout_seconds)
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
        connection = _binary(api, namespace, pod, container, argv, stdin=False)
        deadline = time.monotonic() + timeout_seconds
        return _until_done(connection, sink, bytearray(), deadline, argv, timeout_seconds)
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
        connection = _binary(api, namespace, pod, container, argv, stdin=True)
        stderr = bytearray()
        deadline = time.monotonic() + timeout_seconds
        while chunk := source.read(STREAM_CHUNK):
            connection.write_stdin(chunk)
            connection.update(timeout=0)
            _drain(connection, None, stderr)
            if not connection.is_open() or time.monotonic() > deadline:
                break
        return _until_done(connection, None, stderr, deadline, argv, timeout_seconds)
    finally:
        api.api_client.close()


def _binary(
    api: client.CoreV1Api, namespace: str, pod: str, container: str, argv: list[str], stdin: bool
) -> Any:
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


def _drain(connection: Any, sink: Sink | None, stderr: bytearray) -> None:
    if connection.peek_stdout():
        data = connection.read_stdout()
        if sink is not None:
            sink.write(data)
    if connection.peek_stderr():
        stderr.extend(connection.read_stderr())
        del stderr[:-STDERR_KEPT]


def _until_done(
    connection: Any,
    sink: Sink | None,
    stderr: bytearray,
    deadline: float,
    argv: list[str],
    timeout_seconds: float,
) -> Streamed:
    """Drain the command's output until it ends: its exit code and stderr; ``TimeoutError``
    (the command stopped) once ``deadline`` passes."""
    while connection.is_open() and time.monotonic() <= deadline:
        connection.update(timeout=1)
        _drain(connection, sink, stderr)
    if connection.is_open():
        connection.close()
        raise TimeoutError(f"{argv[0]} ran longer than {timeout_seconds:.0f}s")
    _drain(connection, sink, stderr)
    return _streamed(connection, stderr)


def _streamed(connection: Any, stderr: bytearray) -> Streamed:
    code = connection.returncode
    return Streamed(-1 if code is None else int(code), stderr.decode(errors="replace"))
