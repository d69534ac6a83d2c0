"""A real S3 HTTP API on localhost for tests: moto's ``ThreadedMotoServer`` on a free port, one bucket.

    with running_s3_server() as s3:
        uri = s3.staging_uri("sink-staging")   # s3://KEY:SECRET@<bucket>/sink-staging?endpoint_override=...
        filesystem, path = pyarrow.fs.FileSystem.from_uri(uri)

Everything a client needs is in the URI (credentials as its user info, ``endpoint_override``,
``scheme=http``, ``region``), so Spark executors and subprocesses need no environment; ``env`` has
the same as the standard AWS variables for clients that read those (boto3, the AWS CLI). moto
accepts any credentials. The server runs in a thread of the test process and is stopped when the
context exits, also when the test fails. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    host: str
    port: int
    bucket: str

    @property
    def endpoint(self) -> str:
        """``host:port``, as pyarrow's ``endpoint_override`` takes it."""
        return f"{self.host}:{self.port}"

    @property
    def query(self) -> str:
        return f"endpoint_override={self.endpoint}&scheme=http&region={REGION}"

    def staging_uri(self, prefix: str = "") -> str:
        """``s3://KEY:SECRET@bucket/prefix?endpoint_override=...&scheme=http&region=...``."""
        path = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
        return f"s3://{ACCESS_KEY}:{SECRET_KEY}@{self.bucket}{path}?{self.query}"

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS variables for this server (for clients that do not take a URI)."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION,
                "AWS_ENDPOINT_URL": f"http://{self.endpoint}"}

    def filesystem(self, **options):
        """A pyarrow S3FileSystem on this server (for the test's own checks)."""
        from pyarrow.fs import S3FileSystem
        return S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, endpoint_override=self.endpoint,
                            scheme="http", region=REGION, **options)

    def keys(self, prefix: str = "") -> list[str]:
        """The object keys under ``prefix`` (relative to the bucket), sorted; directory markers left out."""
        from pyarrow.fs import FileSelector, FileType
        base = f"{self.bucket}/{prefix.strip('/')}".rstrip("/")
        infos = self.filesystem().get_file_info(FileSelector(base, recursive=True, allow_not_found=True))
        return sorted(info.path[len(self.bucket) + 1:] for info in infos if info.type == FileType.File)


@contextmanager
def running_s3_server(bucket: str | None = None, host: str = "127.0.0.1") -> Iterator[S3Server]:
    """A moto S3 server on a free port with ``bucket`` created (a fresh name by default); stopped on exit."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address=host, port=0, verbose=False)  # port 0: the OS picks a free one
    server.start()
    try:
        _, port = server.get_host_and_port()
        s3 = S3Server(host, port, bucket or f"test-{uuid.uuid4().hex[:12]}")
        s3.filesystem(allow_bucket_creation=True).create_dir(s3.bucket)  # a bucket is a top-level directory
        yield s3
    finally:
        server.stop()
