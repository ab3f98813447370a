"""Running a command in a pod's container through the ``pods/exec`` API."""

from __future__ import annotations

from dataclasses import dataclass

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
