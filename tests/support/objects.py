"""The local cluster's object store (versitygw), as the tests reach it: its credentials from the
Secret ``paddock cluster up`` made, the operator's settings for it, and a bucket to look in."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from paddock.objectstore.client import Bucket, S3Config
from paddock_dev import object_store
from support.kube import Cluster


@dataclass(frozen=True)
class ObjectStore:
    endpoint: str
    bucket: str
    region: str
    access_key: str
    secret_key: str

    @classmethod
    def of(cls, cluster: Cluster) -> ObjectStore:
        secret = json.loads(
            cluster.kubectl(
                "get", "secret", object_store.SECRET, "-n", object_store.NAMESPACE, "-o", "json"
            ).stdout
        )
        data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
        return cls(
            endpoint=data["endpoint"],
            bucket=data["bucket"],
            region=data["region"],
            access_key=data[object_store.ACCESS_KEY],
            secret_key=data[object_store.SECRET_KEY],
        )

    def operator_env(self, prefix: str) -> dict[str, str]:
        """The operator's settings for this store, run logs under ``prefix``."""
        return {
            "PADDOCK_LOG_BACKEND": "s3",
            "PADDOCK_S3_ENDPOINT": self.endpoint,
            "PADDOCK_S3_BUCKET": self.bucket,
            "PADDOCK_S3_REGION": self.region,
            "PADDOCK_S3_PATH_STYLE": "true",
            "PADDOCK_S3_PREFIX": prefix,
            "PADDOCK_S3_ACCESS_KEY_ID": self.access_key,
            "PADDOCK_S3_SECRET_ACCESS_KEY": self.secret_key,
        }

    def reader_env(self) -> dict[str, str]:
        """What ``paddock logs`` reads an s3 log with: the standard AWS variables."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def bucket_client(self) -> Bucket:
        return Bucket(
            S3Config(
                bucket=self.bucket,
                endpoint=self.endpoint,
                region=self.region,
                path_style=True,
                access_key_id=self.access_key,
                secret_access_key=self.secret_key,
            )
        )

    def keys(self, prefix: str) -> list[str]:
        return [listed.key for listed in self.bucket_client().listing(prefix)]
