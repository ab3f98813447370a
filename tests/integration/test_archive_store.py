"""The operator's archive index against the local S3 server: archive data a stopped operator
left without its manifest is deleted when the Workspace's archives are first listed, once it is
older than a transfer may last; complete archives, and data young enough to be a take still
under way, are kept."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from paddock.sandboxes import archives
from paddock.sandboxes.archives import ArchiveStore
from paddock.times import utcnow
from paddock.vocab import names
from support.kube import Cluster, object_store_in_use
from support.objects import ObjectStore
from support.waiting import wait_for

pytestmark = pytest.mark.integration
TIMEOUT = 1  # seconds a transfer may last, here


@pytest.fixture(autouse=True)
def _store_in_use() -> Iterator[None]:
    with object_store_in_use():
        yield


def _manifest(namespace: str, name: str) -> dict[str, object]:
    labels = {names.WORKSPACE_LABEL: "app"}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return {"metadata": meta, "status": {"readyToUse": True}}


def test_archive_data_without_its_manifest_is_deleted_once_older_than_a_transfer(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "ABANDONED_AFTER", 0.0)
    bucket = ObjectStore.of(cluster).bucket_client()
    prefix, namespace = f"tests/archive-store-{uuid.uuid4().hex[:8]}", "ns"
    store = ArchiveStore()
    store.configure(bucket, prefix, TIMEOUT)
    try:
        folder = store.folder(namespace, "app")
        bucket.put(f"{folder}kept.tar.gz", b"complete")
        bucket.put(f"{folder}kept.json", json.dumps(_manifest(namespace, "kept")).encode())
        bucket.put(f"{folder}abandoned.tar.gz", b"a take that never finished")
        # The store's clock, not this one's, dates the objects: wait until it says they are old.
        wait_for(
            lambda: all(
                o.modified is not None and (utcnow() - o.modified).total_seconds() > TIMEOUT + 1
                for o in bucket.listing(folder)
            ),
            30,
            what="the objects older than a transfer may last",
        )
        bucket.put(f"{folder}young.tar.gz", b"a take still under way, perhaps")

        listed = store.archives(namespace, "app")

        assert [a["metadata"]["name"] for a in listed] == ["kept"]
        assert [o.key for o in bucket.listing(folder)] == [
            f"{folder}kept.json",
            f"{folder}kept.tar.gz",
            f"{folder}young.tar.gz",
        ]
    finally:
        store.stop()
        bucket.delete([o.key for o in bucket.listing(prefix + "/")])
