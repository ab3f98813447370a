"""An S3 bucket (AWS or any S3-compatible server) through obstore: put-if-absent, get, list
and delete of whole objects (the run log, archive manifests), and streamed writes and reads of
large ones (workspace archives, never held whole in memory). Errors come out as
``paddock.objectstore.errors``, their messages cut to the server's code and words."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import obstore
from obstore import exceptions as obstore_errors
from obstore.store import S3Store

from paddock.objectstore.errors import (
    ObjectExistsError,
    ObjectStoreDeniedError,
    ObjectStoreError,
    ObjectStoreNotFoundError,
    ObjectStoreUnavailableError,
)

# A request that fails is retried briefly here; a store that stays down is the caller's to
# retry (a run's daemon, with its own backoff), so that no step hangs for minutes.
GETS_AT_ONCE = 16  # objects read in parallel by ``get_many``
PART_BYTES = 8 * 1024 * 1024  # a streamed object's parts (and read-ahead)
PARTS_AT_ONCE = 2  # parts uploaded in parallel: at most ~3 parts held in memory
RETRY = {
    "max_retries": 2,
    "retry_timeout": timedelta(seconds=10),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2)},
}


@dataclass(frozen=True)
class S3Config:
    """Where the bucket is and how to reach it. Without keys, the standard AWS chain is used
    (``AWS_*`` environment, web identity, instance metadata)."""

    bucket: str
    endpoint: str | None = None
    region: str = "us-east-1"
    path_style: bool = False
    access_key_id: str | None = None
    secret_access_key: str | None = None
    ca_file: str | None = None


def configured_store(settings: dict[str, Any] | None) -> S3Config | None:
    """The bucket of the operator's ``s3_*`` settings (``OperatorSettings.s3_store()``)."""
    return None if settings is None else S3Config(**settings)


@dataclass(frozen=True)
class Listed:
    key: str
    size: int
    modified: datetime | None = None


class Bucket:
    """One bucket; safe to share between threads."""

    def __init__(self, config: S3Config, request_timeout: float = 30) -> None:
        options: dict[str, Any] = {"connect_timeout": "5s", "timeout": f"{request_timeout:.0f}s"}
        if config.endpoint and config.endpoint.startswith("http://"):
            options["allow_http"] = True
        if config.ca_file:
            options["root_certificate"] = Path(config.ca_file).read_bytes()
        keys: dict[str, str] = {}
        if config.access_key_id and config.secret_access_key:
            keys = {
                "access_key_id": config.access_key_id,
                "secret_access_key": config.secret_access_key,
            }
        self.config = config
        self._store = S3Store(
            config.bucket,
            endpoint=config.endpoint,
            region=config.region,
            virtual_hosted_style_request=not config.path_style,
            client_options=options,  # type: ignore[arg-type]
            retry_config=RETRY,  # type: ignore[arg-type]
            **keys,  # type: ignore[arg-type]
        )

    def create(self, key: str, data: bytes, metadata: dict[str, str]) -> None:
        """Store a new object; ``ObjectExistsError`` when one is there already."""
        with _answers(key):
            obstore.put(self._store, key, data, mode="create", attributes=metadata)

    def put(self, key: str, data: bytes) -> None:
        """Store an object, replacing any of that key."""
        with _answers(key):
            obstore.put(self._store, key, data)

    @contextmanager
    def writer(self, key: str) -> Iterator[Writer]:
        """A file-like sink that stores what is written to it as ``key`` (in parts, as it
        comes). If the block raises, what was sent may still be stored (obstore completes a
        multipart upload when it is closed): the caller deletes the key."""
        with _answers(key):
            file = obstore.open_writer(
                self._store, key, buffer_size=PART_BYTES, max_concurrency=PARTS_AT_ONCE
            )
        sink = Writer(key, file)
        try:
            yield sink
        except BaseException:
            with contextlib.suppress(Exception):
                file.close()
            raise
        with _answers(key):
            file.close()

    @contextmanager
    def reader(self, key: str) -> Iterator[Reader]:
        """A file-like source of the object's bytes, read ahead in parts."""
        with _answers(key):
            file = obstore.open_reader(self._store, key, buffer_size=PART_BYTES)
        try:
            yield Reader(key, file)
        finally:
            file.close()

    def size(self, key: str) -> int:
        with _answers(key):
            return int(obstore.head(self._store, key)["size"])

    def get(self, key: str) -> tuple[bytes, dict[str, str]]:
        """An object's bytes and its user metadata."""
        with _answers(key):
            result = obstore.get(self._store, key)
            data = bytes(result.bytes())
        metadata = {name: str(value) for name, value in result.attributes.items()}
        return data, metadata

    def get_many(self, keys: list[str]) -> list[tuple[bytes, dict[str, str]]]:
        """Several objects, read in parallel (a long run's log is many small objects), in the
        order of ``keys``."""
        if len(keys) <= 1:
            return [self.get(key) for key in keys]
        with ThreadPoolExecutor(max_workers=min(GETS_AT_ONCE, len(keys))) as pool:
            return list(pool.map(self.get, keys))

    def listing(self, prefix: str, after: str | None = None) -> list[Listed]:
        """The objects under ``prefix`` (after the key ``after``), in key order."""
        with _answers(prefix):
            found = obstore.list(self._store, prefix, offset=after).collect()
        listed = (Listed(o["path"], int(o["size"]), o.get("last_modified")) for o in found)
        return sorted(listed, key=lambda o: o.key)

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            with _answers(keys[start]):
                obstore.delete(self._store, keys[start : start + 1000])


class Writer:
    """What ``Bucket.writer`` yields: ``write`` bytes (errors as ``ObjectStoreError``)."""

    def __init__(self, key: str, file: Any) -> None:
        self._key, self._file = key, file

    def write(self, data: bytes) -> int:
        with _answers(self._key):
            return int(self._file.write(data))


class Reader:
    """What ``Bucket.reader`` yields: ``read`` bytes, and the object's ``size``."""

    def __init__(self, key: str, file: Any) -> None:
        self._key, self._file = key, file
        self.size = int(file.size)

    def read(self, size: int) -> bytes:
        with _answers(self._key):
            return bytes(self._file.read(size))


_CODE = re.compile(r"<Code>([^<]*)</Code>")
_WORDS = re.compile(r"<Message>([^<]*)</Message>")
_DENIED = re.compile(
    r"\b(401|403) (Unauthorized|Forbidden)\b"
    r"|<Code>(AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch)</Code>"
)


@contextmanager
def _answers(key: str) -> Iterator[None]:
    try:
        yield
    except obstore_errors.AlreadyExistsError:
        raise ObjectExistsError(f"the object {key} exists already") from None
    except (obstore_errors.PermissionDeniedError, obstore_errors.UnauthenticatedError) as exc:
        raise ObjectStoreDeniedError(f"the object store refused access: {_said(exc)}") from None
    except obstore_errors.NotFoundError as exc:
        raise ObjectStoreNotFoundError(f"not found in the object store: {_said(exc)}") from None
    except obstore_errors.BaseError as exc:
        if _DENIED.search(str(exc)):  # some requests (a listing) come back as generic errors
            raise ObjectStoreDeniedError(f"the object store refused access: {_said(exc)}") from None
        raise ObjectStoreUnavailableError(f"the object store failed: {_said(exc)}") from None
    except OSError as exc:  # what obstore raises for a missing object (FileNotFoundError)
        raise ObjectStoreNotFoundError(f"not found in the object store: {_said(exc)}") from None


def _said(exc: Exception) -> str:
    """The server's error code and message, else the first line of the client's; never the
    request's headers (obstore does not include them, and this keeps it so)."""
    text = str(exc)
    code, words = _CODE.search(text), _WORDS.search(text)
    if code:
        return f"{code.group(1)}: {words.group(1)}" if words else code.group(1)
    first = text.split("\n", 1)[0]
    return first.split(" - ", 1)[-1].strip()[:300] or type(exc).__name__


__all__ = ["Bucket", "Listed", "ObjectStoreError", "Reader", "S3Config", "Writer"]


@functools.cache
def bucket(config: S3Config) -> Bucket:
    """One client per bucket and credentials, for the life of the process."""
    return Bucket(config)
