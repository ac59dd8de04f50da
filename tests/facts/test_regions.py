"""fmcluster.facts.regions: botocore's regions and partitions, and the AZ ID prefix of each region."""

import botocore.loaders
import botocore.session
import pytest

from fmcluster.facts import regions
from tests.support.specs import base_spec, messages

# AZ ID prefixes as AWS shows them (`aws ec2 describe-availability-zones`, ZoneId): every region
# of the commercial partition that fmcluster's hand-kept table named before its regions came
# from botocore, and the China and GovCloud regions. The naming rule must give each of them.
KNOWN_AZ_ID_PREFIXES = {
    "af-south-1": "afs1", "ap-east-1": "ape1", "ap-east-2": "ape2",
    "ap-northeast-1": "apne1", "ap-northeast-2": "apne2", "ap-northeast-3": "apne3",
    "ap-south-1": "aps1", "ap-south-2": "aps2",
    "ap-southeast-1": "apse1", "ap-southeast-2": "apse2", "ap-southeast-3": "apse3",
    "ap-southeast-4": "apse4", "ap-southeast-5": "apse5", "ap-southeast-6": "apse6", "ap-southeast-7": "apse7",
    "ca-central-1": "cac1", "ca-west-1": "caw1",
    "eu-central-1": "euc1", "eu-central-2": "euc2", "eu-north-1": "eun1",
    "eu-south-1": "eus1", "eu-south-2": "eus2",
    "eu-west-1": "euw1", "eu-west-2": "euw2", "eu-west-3": "euw3",
    "il-central-1": "ilc1", "me-central-1": "mec1", "me-south-1": "mes1",
    "mx-central-1": "mxc1", "sa-east-1": "sae1",
    "us-east-1": "use1", "us-east-2": "use2", "us-west-1": "usw1", "us-west-2": "usw2",
    "cn-north-1": "cnn1", "cn-northwest-1": "cnnw1",
    "us-gov-east-1": "usge1", "us-gov-west-1": "usgw1",
}


# ---- botocore's data --------------------------------------------------------------------

def test_partitions_are_what_botocores_loader_reads():
    assert regions.botocore_data("partitions") == botocore.loaders.Loader().load_data("partitions")


def test_every_region_is_botocores_and_pseudo_regions_are_not_regions():
    data = botocore.loaders.Loader().load_data("partitions")
    listed = {r for p in data["partitions"] for r in p["regions"]}
    assert set(regions.region_names()) == {r for r in listed if not r.endswith("-global")}
    assert {"us-east-1", "cn-north-1", "us-gov-west-1"} <= set(regions.region_names())


@pytest.fixture(scope="module")
def botocore_session():
    """One botocore session for the module: each new one loads botocore's endpoint data again."""
    return botocore.session.get_session()


@pytest.mark.parametrize("region", [*regions.region_names(), "eu-faraway-9", "cn-south-7", "us-gov-north-3"])
def test_partition_is_botocores(region, botocore_session):
    assert regions.partition(region) == botocore_session.get_partition_for_region(region)


def test_partition_of_a_name_no_partition_matches_is_the_first():
    """botocore's endpoint rules (aws.partition) fall back to the first partition, aws."""
    assert regions.partition("not-a-region") == "aws" == regions.partitions()[0].name


# ---- the AZ ID prefixes -----------------------------------------------------------------

@pytest.mark.parametrize("region, prefix", KNOWN_AZ_ID_PREFIXES.items())
def test_the_rule_names_every_known_prefix(region, prefix):
    assert region in regions.region_names()
    assert regions.az_id_prefix(region) == prefix
    assert regions.region_of_az_id(f"{prefix}-az1") == region


def test_exceptions_are_only_where_the_rule_does_not_hold():
    for region, prefix in regions.AZ_ID_PREFIX_EXCEPTIONS.items():
        assert region in regions.region_names()
        assert regions.prefix_by_rule(region) != prefix == KNOWN_AZ_ID_PREFIXES[region]


def test_every_commercial_region_is_supported():
    """A new region of the aws partition whose name the rule cannot read fails here, not in a user's validate."""
    (commercial,) = (p for p in regions.partitions() if p.name == "aws")
    assert [r for r in commercial.regions if not regions.is_supported(r)] == []


def test_supported_regions_have_distinct_prefixes():
    supported = [r for r in regions.region_names() if regions.is_supported(r)]
    prefixes = [regions.az_id_prefix(r) for r in supported]
    assert len(prefixes) == len(set(prefixes))
    for region, prefix in zip(supported, prefixes, strict=True):
        assert regions.region_of_az_id(f"{prefix}-az1") == region


@pytest.mark.parametrize("az, region", [("use1-az4", "us-east-1"), ("usw2-az2", "us-west-2"),
                                        ("use2-az1", "us-east-2"), ("euw1-az3", "eu-west-1"),
                                        ("apne1-az4", "ap-northeast-1"), ("apse2-az1", "ap-southeast-2")])
def test_region_of_az_id(az, region):
    assert regions.region_of_az_id(az) == region


@pytest.mark.parametrize("az", ["use1-az", "us-east-1a", "zzz1-az1", ""])
def test_region_of_unknown_az_id(az):
    assert regions.region_of_az_id(az) is None


@pytest.mark.parametrize("region, example", [("eu-west-1", "euw1-az1"), ("us-gov-west-1", "usgw1-az1"),
                                             ("us-iso-east-1", "use1-az1"), (None, "use1-az1")])
def test_example_az_id(region, example):
    assert regions.example_az_id(region) == example


# ---- the spec's region ------------------------------------------------------------------

def test_a_region_botocore_knows_but_the_rule_cannot_name():
    unnamed = [r for r in regions.region_names() if regions.az_id_prefix(r) is None]
    assert "us-iso-east-1" in unnamed
    (message,) = messages(base_spec(region="us-iso-east-1"), "region")
    assert "cannot name the Availability Zone IDs of region 'us-iso-east-1' (partition aws-iso)" in message
    assert "AZ_ID_PREFIX_EXCEPTIONS" in message


def test_an_unknown_region_lists_the_known_ones():
    (message,) = messages(base_spec(region="us-middle-1"), "region")
    assert "'us-middle-1' is not an AWS region" in message and "us-gov-west-1" in message
    assert "us-iso-east-1" not in message


def test_a_china_region_is_a_region():
    assert messages(base_spec(region="cn-north-1", availability_zone_id="cnn1-az1"), "region") == []
