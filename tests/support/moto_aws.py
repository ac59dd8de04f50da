"""moto's mock of AWS as the tests start it: with boto3's default session kept from one test to
the next (moto's `reset_boto3_session` off; every other setting moto's own default).

A boto3 session caches the botocore service models its clients are made from; moto's default is
a new default session in each mock, so each test parsed EC2's model (megabytes of JSON) and the
others again: a third of the preflight tests' time. The session holds no state of a test's: the
clients are made in each test, under its mock, with moto's credentials."""

from __future__ import annotations

from moto import mock_aws
from moto.core.config import default_user_config


def mocked_aws():  # -> moto.core.models.MockAWS, a context manager and decorator as mock_aws's
    return mock_aws(config={"core": {**default_user_config["core"], "reset_boto3_session": False}})
