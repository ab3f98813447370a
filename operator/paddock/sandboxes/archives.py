"""Workspace archives in the object store: portable snapshots, for volumes no VolumeSnapshot
can be taken of. Taking one streams ``tar`` of the volume's files out of the sandbox's pod
(the operator's exec) into a multipart upload; restoring one streams it back into ``tar -x``
in the new sandbox's pod before it is Ready. Neither touches the operator's disk. On its way to
the store an archive's secret values are masked (``archive_masking``): those of the sandbox's
Workspace and of the runs that ran in it.

An archive is two objects under ``PREFIX/snapshots/NAMESPACE/WORKSPACE/``: ``NAME.tar.gz`` and
``NAME.json``, its manifest (the snapshot-shaped object the decisions read), written last: an
archive without its manifest is not there. The operator keeps an index of the manifests per
Workspace, filled by one listing the first time a Workspace's archives are asked for and kept
up to date by its own writes and deletes, so that a reconcile reads no bucket.

Transfers run on a few threads of their own, never a reconcile's; each one's end asks for a
reconcile of its Sandbox and its Workspace."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.kube.errors import KubeError
from paddock.objectstore.client import Bucket, Listed
from paddock.objectstore.errors import ObjectStoreError
from paddock.sandboxes.archive_masking import MaskingSink, masked_forms
from paddock.sandboxes.plan import Transfer, TransferState
from paddock.times import format_time, utcnow
from paddock.vocab import names
from paddock.vocab.names import SANDBOX_CONTAINER

Obj = dict[str, Any]
Key = tuple[str, str]  # namespace, name
Notify = Callable[[str, str, str], None]  # kind ("Sandbox", "Workspace"), namespace, name
Secrets = Callable[[str, str], list[str]]  # namespace, sandbox -> the values its files may hold
log = logging.getLogger("paddock.archives")

SNAPSHOTS = "snapshots"
TRANSFERS_AT_ONCE = 2
RELIST_AFTER = 30.0  # seconds before a listing the store refused is tried again
ABANDONED_AFTER = 600.0  # seconds past the transfer timeout before data with no manifest goes
# The volume's entries, not "." itself: its root is not the sandbox user's to chmod on restore.
ARCHIVE_SCRIPT = "cd /workspace && find . -mindepth 1 -maxdepth 1 -print0 | tar --null -T - -czf -"
# tar exits 1 when a file changed while it was read (a run still writing): the archive holds
# what each file was when it was read, as a VolumeSnapshot after a run would.
ARCHIVED = (0, 1)


def archive_command(timeout: float) -> list[str]:
    """``tar -c`` of the volume to stdout. It lives at most ``timeout`` seconds: a transfer
    whose operator went away leaves no ``tar | gzip`` blocked in the container (``timeout``
    kills the command's whole process group)."""
    return ["timeout", "-s", "KILL", f"{timeout:.0f}", "sh", "-c", ARCHIVE_SCRIPT]


def unpack_command(size: int, timeout: float) -> list[str]:
    """``tar -x`` into the volume of exactly ``size`` bytes of stdin (exec cannot close it),
    for at most ``timeout`` seconds."""
    script = 'head -c "$1" | tar -xzf - -C /workspace'
    return ["timeout", "-s", "KILL", f"{timeout:.0f}", "sh", "-c", script, "unpack", str(size)]


class ArchiveStore:
    """The operator's archives: an index of manifests per Workspace, and the transfers."""

    def __init__(self) -> None:
        self._bucket: Bucket | None = None
        self._prefix = ""
        self._timeout = 1800.0
        self._notify: Notify = lambda kind, namespace, name: None
        self._secrets: Secrets = lambda namespace, sandbox: []
        self._index: dict[Key, dict[str, Obj]] = {}  # per Workspace, by archive name
        self._refused: dict[Key, float] = {}  # when a listing of a Workspace's was refused
        self._transfers: dict[str, tuple[TransferState, Obj]] = {}  # per Sandbox uid
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def configure(
        self,
        bucket: Bucket | None,
        prefix: str = "",
        timeout: float = 0,
        notify: Notify | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        """Start afresh with ``bucket`` (None: no archives; snapshots are VolumeSnapshots).
        ``secrets``: the secret values a sandbox's files may hold, masked in its archives."""
        self.stop()
        with self._lock:
            self._bucket, self._prefix, self._timeout = bucket, prefix.strip("/"), timeout
            self._notify = notify or (lambda kind, namespace, name: None)
            self._secrets = secrets or (lambda namespace, sandbox: [])
            self._index.clear()
            self._refused.clear()
            self._transfers.clear()
            if bucket is not None:
                self._pool = ThreadPoolExecutor(TRANSFERS_AT_ONCE, "paddock-archive")

    def stop(self) -> None:
        """At shutdown: no new transfer starts, and those not started are dropped."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._bucket = None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    @property
    def configured(self) -> bool:
        return self._bucket is not None

    def folder(self, namespace: str, workspace: str) -> str:
        return "/".join(p for p in (self._prefix, SNAPSHOTS, namespace, workspace) if p) + "/"

    def location(self, archive: Obj) -> str:
        """The archive's s3:// URL, for a person to find it."""
        bucket = self._bucket.config.bucket if self._bucket else ""
        return f"s3://{bucket}/{self._data_key(archive)}"

    def archives(self, namespace: str, workspace: str) -> list[Obj]:
        """The Workspace's stored archives (listed once, then from the index)."""
        key = (namespace, workspace)
        with self._lock:
            if key in self._index:
                return list(self._index[key].values())
            if time.monotonic() - self._refused.get(key, -RELIST_AFTER) < RELIST_AFTER:
                return []
        found = self._listed(namespace, workspace)
        with self._lock:
            if found is None:
                self._refused[key] = time.monotonic()
                return []
            index = self._index.setdefault(key, found)
            for state, archive in self._transfers.values():  # stored while it was listed
                if state.done("take", state.archive) and _of(archive, namespace, workspace):
                    index[state.archive] = archive
            return list(index.values())

    def being_made(self, namespace: str, workspace: str) -> list[Obj]:
        """The archives of the Workspace being taken, or whose taking failed (with
        ``status.error``), as the decisions read a VolumeSnapshot that is not ready."""
        with self._lock:
            return [
                archive
                for state, archive in self._transfers.values()
                if state.action == "take"
                and (state.running or state.error is not None)
                and _of(archive, namespace, workspace)
            ]

    def state(self, sandbox_uid: str) -> TransferState | None:
        with self._lock:
            found = self._transfers.get(sandbox_uid)
        return None if found is None else found[0]

    def forget(self, sandbox_uid: str) -> None:
        """A deleted Sandbox: its last transfer no longer matters."""
        with self._lock:
            self._transfers.pop(sandbox_uid, None)

    def start(self, namespace: str, sandbox: Obj, transfer: Transfer) -> None:
        """Start ``transfer`` for the Sandbox in the background (not twice at once)."""
        uid = sandbox["metadata"]["uid"]
        name = transfer.archive["metadata"]["name"]
        with self._lock:
            running = self._transfers.get(uid)
            if self._pool is None or (running is not None and running[0].running):
                return
            archive = _pending(transfer.archive) if transfer.action == "take" else transfer.archive
            self._transfers[uid] = (TransferState(transfer.action, name, True), archive)
            pool = self._pool
        # In the context of the reconcile that started it: the reconciles its end asks for
        # post their Events through kopf, which needs that context.
        context = contextvars.copy_context()
        pool.submit(context.run, self._run, namespace, sandbox["metadata"]["name"], uid, transfer)

    def delete(self, namespace: str, workspace: str, name: str) -> None:
        """Delete an archive (its manifest first: from then on it is not there)."""
        with self._lock:
            archive = self._index.get((namespace, workspace), {}).get(name)
        if archive is None or self._bucket is None:
            return
        data = self._data_key(archive)
        self._bucket.delete([_manifest_key(data), data])
        with self._lock:
            self._index.get((namespace, workspace), {}).pop(name, None)

    def _data_key(self, archive: Obj) -> str:
        meta = archive["metadata"]
        workspace = meta["labels"][names.WORKSPACE_LABEL]
        return f"{self.folder(meta['namespace'], workspace)}{meta['name']}.tar.gz"

    def _listed(self, namespace: str, workspace: str) -> dict[str, Obj] | None:
        assert self._bucket is not None
        try:
            listed = self._bucket.listing(self.folder(namespace, workspace))
            manifests = [o.key for o in listed if o.key.endswith(".json")]
            found = [json.loads(data) for data, _ in self._bucket.get_many(manifests)]
            self._bucket.delete(self._abandoned(listed, set(manifests)))
        except (ObjectStoreError, ValueError) as exc:
            log.warning("archives of Workspace %s/%s not listed: %s", namespace, workspace, exc)
            return None
        return {archive["metadata"]["name"]: archive for archive in found}

    def _abandoned(self, listed: list[Listed], manifests: set[str]) -> list[str]:
        """Archive data with no manifest, older than a transfer may last: what a take stopped
        by an operator's end left (between the data's upload and its manifest)."""
        cutoff = utcnow() - timedelta(seconds=self._timeout + ABANDONED_AFTER)
        abandoned = [
            o.key
            for o in listed
            if o.key.endswith(".tar.gz")
            and _manifest_key(o.key) not in manifests
            and o.modified is not None
            and o.modified < cutoff
        ]
        for key in abandoned:
            log.info("deleting %s: an archive whose taking never finished", key)
        return abandoned

    def _run(self, namespace: str, sandbox: str, uid: str, transfer: Transfer) -> None:
        archive = transfer.archive
        error: str | None = None
        try:
            if transfer.action == "take":
                archive = self._take(namespace, sandbox, transfer)
            else:
                self._unpack(namespace, sandbox, transfer)
        except (KubeError, ObjectStoreError, TimeoutError, OSError, ValueError) as exc:
            error = str(getattr(exc, "message", "") or exc)
            log.warning("%s of archive %s failed: %s", transfer.action, _name(archive), error)
        except Exception as exc:  # a bug: said on the Sandbox, never a transfer left running
            log.exception("%s of archive %s failed", transfer.action, _name(archive))
            error = f"{type(exc).__name__}: {exc}"
        if error is not None and transfer.action == "take":
            archive = _failed(_pending(archive), error)
        with self._lock:
            state = TransferState(transfer.action, _name(archive), False, error)
            self._transfers[uid] = (state, archive)
        workspace = archive["metadata"]["labels"][names.WORKSPACE_LABEL]
        self._notify("Sandbox", namespace, sandbox)
        self._notify("Workspace", namespace, workspace)

    def _take(self, namespace: str, sandbox: str, transfer: Transfer) -> Obj:
        """Archive the volume into the bucket, its secret values masked, then its manifest;
        the stored archive."""
        assert self._bucket is not None
        data = self._data_key(transfer.archive)
        started = time.monotonic()
        forms = masked_forms(self._secrets(namespace, sandbox))
        try:
            with self._bucket.writer(data) as bucket:
                sink = MaskingSink(forms, bucket) if forms else bucket
                out = kube_exec.stream_out(
                    namespace,
                    transfer.pod,
                    SANDBOX_CONTAINER,
                    archive_command(self._timeout),
                    sink,
                    self._timeout,
                )
                if out.exit_code not in ARCHIVED:
                    raise OSError(f"tar exited with {out.exit_code}: {out.stderr.strip()[-300:]}")
                if isinstance(sink, MaskingSink):
                    sink.close()
        except BaseException:
            with contextlib.suppress(ObjectStoreError):  # no manifest: it is not there anyway
                self._bucket.delete([data])
            raise
        size = self._bucket.size(data)
        archive = _stored(transfer.archive, size)
        self._bucket.put(_manifest_key(data), json.dumps(archive, sort_keys=True).encode())
        namespace_workspace = (namespace, archive["metadata"]["labels"][names.WORKSPACE_LABEL])
        with self._lock:
            if namespace_workspace in self._index:
                self._index[namespace_workspace][_name(archive)] = archive
        log.info("archive %s stored (%d bytes, %.1fs)", data, size, time.monotonic() - started)
        return archive

    def _unpack(self, namespace: str, sandbox: str, transfer: Transfer) -> None:
        """Unpack the archive into the volume, then record it on the PVC (its uid checked)."""
        assert self._bucket is not None
        with self._bucket.reader(self._data_key(transfer.archive)) as source:
            into = kube_exec.stream_in(
                namespace,
                transfer.pod,
                SANDBOX_CONTAINER,
                unpack_command(source.size, self._timeout),
                source,
                self._timeout,
            )
        if into.exit_code != 0:
            raise OSError(f"tar exited with {into.exit_code}: {into.stderr.strip()[-300:]}")
        unpacked = {names.UNPACKED_ANNOTATION: "true"}
        body = {"metadata": {"uid": transfer.pvc_uid, "annotations": unpacked}}
        kube.patch("PersistentVolumeClaim", namespace, names.pvc_name(sandbox), body)


def _of(archive: Obj, namespace: str, workspace: str) -> bool:
    meta = archive["metadata"]
    return (meta["namespace"], meta["labels"][names.WORKSPACE_LABEL]) == (namespace, workspace)


def _name(archive: Obj) -> str:
    return str(archive["metadata"]["name"])


def _manifest_key(data_key: str) -> str:
    return data_key.removesuffix(".tar.gz") + ".json"


def _pending(archive: Obj) -> Obj:
    """An archive being made: not ready, made now (so its max age and hold read as a
    VolumeSnapshot's being cut)."""
    meta = archive["metadata"] | {"creationTimestamp": format_time(utcnow())}
    return archive | {"metadata": meta, "status": {"readyToUse": False}}


def _failed(archive: Obj, error: str) -> Obj:
    return archive | {"status": {"readyToUse": False, "error": {"message": error}}}


def _stored(archive: Obj, size: int) -> Obj:
    now = format_time(utcnow())
    meta = archive["metadata"] | {"creationTimestamp": now}
    status = {"readyToUse": True, "creationTime": now, "size": size}
    return archive | {"metadata": meta, "status": status}
