"""moto's mock of AWS as the tests start it: moto's own (a new boto3 default session in each mock,
so no test sees another's credentials or clients), whose botocore session reads botocore's data
through one loader a process.

botocore parses a service's model (megabytes of JSON for EC2) and its endpoint data in each new
session, once; a loader keeps what it parsed. With a new session in every mock, every test parsed
them all again: a third of the preflight tests' time.

`moto_server()` is moto's server instead, for programs of their own (the CDK CLI, the AWS CLI, the
pipeline's step programs): their AWS_ENDPOINT_URL."""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

import boto3
import botocore.loaders
import botocore.session
from moto import mock_aws

# botocore's data files do not change while the tests run: one loader serves every session
_LOADER = botocore.loaders.create_loader()


@contextlib.contextmanager
def mocked_aws() -> Iterator[None]:
    """`with mocked_aws():` as `with mock_aws():`, boto3's default session reading through _LOADER."""
    with mock_aws():
        session = botocore.session.Session()
        session.register_component("data_loader", _LOADER)
        boto3.setup_default_session(botocore_session=session)
        yield


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's server on 127.0.0.1 (a free port), its URL; quiet (werkzeug logs every request)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer("127.0.0.1", 0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
