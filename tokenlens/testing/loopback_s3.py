"""A real S3 endpoint on loopback (moto's standalone server), for tests and benches.

Why a server and not moto's in-process mock: the ledger's safety on object storage rests
on what S3 does over the wire (conditional PUTs, strongly consistent LISTs), and the
tests run several processes against one bucket, which an in-process mock cannot share.

Caveat, stated where it matters: moto checks ``If-None-Match: *`` and then stores, not as
one atomic step, so two PUTs of one key that arrive within the same instant may both
succeed on moto (never on S3). Tests keep racing writers on different keys or sequential.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The environment a client process needs to reach the loopback server (dummy credentials).
ENV_KEYS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
)


@contextmanager
def loopback_s3() -> Iterator[str]:
    """Start moto's S3 server on 127.0.0.1, point the AWS environment at it, yield its URL.

    The environment is restored on exit; child processes started inside inherit it.
    """
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {key: os.environ.get(key) for key in ENV_KEYS}
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
    )
    try:
        yield endpoint
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


def new_bucket(prefix: str = "tokenlens") -> str:
    """Create a fresh bucket on the configured endpoint; returns its name."""
    import s3fs

    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    fs: Any = s3fs.S3FileSystem(skip_instance_cache=True)
    fs.mkdir(name)
    return name
