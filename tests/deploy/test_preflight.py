"""fmcluster preflight, without the network: moto for what it implements (caller identity, zones
by AZ ID, instance type offerings, EKS/SageMaker/FSx list calls), botocore's Stubber for what it
lacks (capacity reservations and Capacity Blocks, EC2 service quotas, AWS PCS)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from functools import partial

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber

from fmcluster.deploy import preflight
from fmcluster.deploy.preflight import (
    FAIL,
    PASS,
    WARN,
    Context,
    account,
    capacity,
    endpoints,
    reservation_checks,
    services,
    size_check,
)
from fmcluster.deploy.preflight import checks as run_checks
from fmcluster.deploy.preflight import ec2 as ec2_checks
from fmcluster.deploy.preflight.guard import guard
from fmcluster.deploy.preflight.images import node_images
from fmcluster.deploy.preflight.quotas import instance_quotas
from fmcluster.facts import catalog
from fmcluster.facts import images as image_facts
from fmcluster.spec import loader
from tests.support.docs import readme_output
from tests.support.moto_aws import mocked_aws
from tests.support.paths import EXAMPLES, ROOT
from tests.support.preflight import (
    BLOCK_ID,
    NOW,
    Clients,
    Split,
    by_name,
    reservation,
    shown,
    stubbed,
)
from tests.support.specs import base_spec, problems, validated, with_

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


@pytest.fixture(autouse=True)
def credentials(monkeypatch):
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def matching_reservations(spec) -> list[list[dict]]:
    return [[reservation(g, spec.availability_zone_id, block=g.capacity.type == "capacity-block",
                         block_id=BLOCK_ID if g.capacity.ultraserver_type else None)]
            for g in spec.node_groups if g.capacity.reservation_id]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_runs_and_prints_a_table(example, capsys):
    spec = loader.load(ROOT / example).spec
    with mocked_aws():
        rc = shown(spec, client=Clients(spec, matching_reservations(spec)), now=NOW)
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert out.startswith(f"fmcluster preflight: {spec.name} in {spec.region}\n  STATUS")
    assert "PASS    credentials" in out and "checks:" in out.splitlines()[-1]
    assert (rc == 1) == (not out.splitlines()[-1].endswith(" 0 fail"))


def test_capacity_block_example_passes():
    spec = loader.load(ROOT / "examples/p5-pcs.yaml").spec
    with mocked_aws():
        clients = Clients(spec, matching_reservations(spec))
        checks = run_checks(Context(spec, clients, NOW))
    assert {c.status for c in checks} == {PASS, WARN}, [c for c in checks if c.status == FAIL]
    assert by_name(checks, "AZ ID use1-az4").reason == "use1-az4 is us-east-1d in this account"
    assert by_name(checks, "offering p5.48xlarge").status == PASS
    assert by_name(checks, "reservation gpu: state").reason.startswith("cr-0123456789abcdef0: active Capacity Block")
    assert by_name(checks, "reservation gpu: size").status == PASS
    assert by_name(checks, "FSx PERSISTENT_2").status == WARN  # no read-only API can tell
    assert by_name(checks, "AWS PCS").status == PASS
    clients.reservations.assert_no_pending_responses()


def test_instance_type_not_offered_in_the_az_fails(capsys):
    """moto's offerings data: p6-b300.48xlarge is not offered in use2-az1."""
    spec = loader.load(ROOT / "examples/p6-b300-pcs.yaml").spec
    with mocked_aws():
        rc = shown(spec, client=Clients(spec), now=NOW)
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL    offering p6-b300.48xlarge" in out and "not offered in use2-az1" in out
    assert ("hint: aws ec2 describe-instance-type-offerings --location-type availability-zone-id"
            in " ".join(out.split()))  # wrapped in its column
    assert "PASS    offering c7i.8xlarge" in out


def test_unknown_az_id_fails():
    spec = validated(base_spec(availability_zone_id="use1-az9"))
    with mocked_aws():
        checks = run_checks(Context(spec, Clients(spec), NOW))
    check = by_name(checks, "AZ ID use1-az9")
    assert check.status == FAIL and "use1-az4" in check.hint


def test_other_account_fails():
    spec = validated(base_spec(account="111122223333"))
    with mocked_aws():
        check = by_name(run_checks(Context(spec, Clients(spec), NOW)), "credentials")
    assert check.status == FAIL and "123456789012" in check.reason  # moto's account


# ---- reservations and Capacity Blocks (Stubber) --------------------------------------------

def cb_group(**capacity):
    data = with_(base_spec(), "node_groups[0]", {"name": "gpu", "instance_type": "p5.48xlarge", "count": 16,
                                                  "capacity": {"type": "capacity-block",
                                                               "reservation_id": "cr-0123456789abcdef0", **capacity}})
    return validated(data).node_groups[0]


def statuses(checks) -> dict[str, str]:
    return {c.name.split(": ", 1)[1]: c.status for c in checks}


def test_active_block_covering_now_passes():
    group = cb_group()
    checks = list(reservation_checks(group, reservation(group), "use1-az4", NOW, None))
    assert statuses(checks) == {"state": PASS, "instance type": PASS, "AZ ID": PASS}
    assert size_check("reservation gpu", [group], [reservation(group)]).status == PASS


def test_future_block_warns_without_a_window_and_is_checked_against_one():
    group = cb_group()
    future = reservation(group, state="scheduled", start=NOW + timedelta(days=2), end=NOW + timedelta(days=9))
    checks = list(reservation_checks(group, future, "use1-az4", NOW, None))
    assert statuses(checks)["state"] == WARN and "--window" in checks[0].hint
    inside = (NOW + timedelta(days=3), NOW + timedelta(days=5))
    assert statuses(reservation_checks(group, future, "use1-az4", NOW, inside))["state"] == PASS
    outside = (NOW + timedelta(days=8), NOW + timedelta(days=12))
    window = [c for c in reservation_checks(group, future, "use1-az4", NOW, outside) if c.name.endswith("window")]
    assert window[0].status == FAIL and "does not cover the planned window" in window[0].reason


@pytest.mark.parametrize("state", ["expired", "cancelled", "failed"])
def test_ended_reservation_fails(state):
    group = cb_group()
    r = reservation(group, state=state, start=NOW - timedelta(days=9), end=NOW - timedelta(days=2))
    assert statuses(reservation_checks(group, r, "use1-az4", NOW, None))["state"] == FAIL


def test_block_ending_within_a_day_warns():
    group = cb_group()
    r = reservation(group, end=NOW + timedelta(hours=5))
    checks = list(reservation_checks(group, r, "use1-az4", NOW, None))
    assert statuses(checks)["state"] == WARN and "ends within 24 h" in checks[0].reason


def test_wrong_type_az_size_and_kind_fail():
    group = cb_group()
    r = reservation(group, az_id="use1-az6", total=8, instance_type="p5en.48xlarge", block=False)
    checks = {c.name.split(": ", 1)[1]: c for c in reservation_checks(group, r, "use1-az4", NOW, None)}
    assert checks["kind"].status == FAIL and "set capacity.type: reservation" in checks["kind"].hint
    assert checks["instance type"].status == FAIL and "p5en.48xlarge" in checks["instance type"].reason
    assert checks["AZ ID"].status == FAIL and checks["AZ ID"].hint == "set availability_zone_id: use1-az6"
    size = size_check("reservation gpu", [group], [r])
    assert size.status == FAIL and "holds 8 instances; node group gpu needs up to 16" in size.reason


def test_instances_in_use_warn():
    group = cb_group()
    r = reservation(group, available=10)
    assert size_check("reservation gpu", [group], [r]).status == WARN


def test_reservation_not_found_fails():
    spec = validated(with_(base_spec(), "node_groups[0].capacity",
                           {"type": "reservation", "reservation_id": "cr-0fedcba9876543210"}))
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                          "The capacity reservation ID 'cr-0fedcba9876543210' does not exist")
    checks = list(capacity.reservations(Context(spec, lambda service: ec2, NOW)))
    assert checks[0].status == FAIL and "cr-0fedcba9876543210 not found in us-east-1" in checks[0].reason


def test_reservations_of_a_resource_group_are_added_up():
    arn = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-odcrs"
    spec = validated(with_(base_spec(), "node_groups[0].capacity",
                           {"type": "reservation", "reservation_resource_group_arn": arn}))
    group = spec.node_groups[0]  # 2 x p5.48xlarge
    groups, groups_stub = stubbed("resource-groups", spec.region)
    groups_stub.add_response("list_group_resources", {"Resources": [
        {"Identifier": {"ResourceArn": "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/"
                                       f"cr-0000000000000000{i}",
                        "ResourceType": "AWS::EC2::CapacityReservation"}} for i in (1, 2)]}, {"Group": arn})
    ec2, ec2_stub = stubbed("ec2", spec.region)
    ec2_stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        reservation(group, block=False, total=1, rid=f"cr-0000000000000000{i}", end=None) for i in (1, 2)]},
        {"CapacityReservationIds": ["cr-00000000000000001", "cr-00000000000000002"]})
    checks = list(capacity.reservations(Context(spec, {"resource-groups": groups, "ec2": ec2}.get, NOW)))
    sizes = [c for c in checks if c.name.endswith(": size")]  # each alone is too small: judged on the total
    assert len(sizes) == 1 and sizes[0].status == PASS and "2 reservations hold 2 instances" in sizes[0].reason


# ---- quotas --------------------------------------------------------------------------------

def test_on_demand_p_quota_is_counted_in_vcpus():
    # 2 x p5.48xlarge on demand = 384 vCPUs; login m7i.2xlarge = 8, and NAME-images' build instance c6i.2xlarge 8
    spec = validated(base_spec())
    quotas, stub = stubbed("service-quotas", spec.region)
    stub.add_response("get_service_quota", {"Quota": {"Value": 192.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied quota")
    stub.add_response("get_aws_default_service_quota", {"Quota": {"Value": 5.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    checks = list(instance_quotas(Context(spec, lambda service: quotas, NOW)))
    p = by_name(checks, "quota On-Demand P vCPUs")
    assert p.status == FAIL and "384 vCPUs needed, the quota is 192" in p.reason
    assert "--quota-code L-417A185B --desired-value 384" in p.hint
    standard = checks[1]
    assert standard.status == FAIL and standard.reason.startswith(
        "16 vCPUs needed (8 of them for the image builds of test-cluster-images), the quota is 5")
    assert "--desired-value 16" in standard.hint
    stub.assert_no_pending_responses()


def test_spot_groups_use_the_spot_quota():
    spec = validated(with_(base_spec(), "node_groups[0].capacity.type", "spot"))
    quotas, stub = stubbed("service-quotas", spec.region)
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-7212CCBC"})
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    checks = list(instance_quotas(Context(spec, lambda service: quotas, NOW)))
    assert [c.status for c in checks] == [PASS, PASS]
    assert checks[0].name == "quota Spot P vCPUs"


@pytest.mark.parametrize("market, label, code", [
    ("on-demand", "quota On-Demand G and VT vCPUs", "L-DB2E81BA"),
    ("spot", "quota Spot G and VT vCPUs", "L-3819A6DF"),
])
def test_a_g6e_group_gets_the_g_and_vt_quota_check(market, label, code):
    """The quota comes from the instance catalog, not the type's first letter: 4 x g6e.48xlarge
    (192 vCPUs each) count against the G and VT quota of their market."""
    spec = validated(with_(base_spec(), "node_groups[0]", {"name": "infer", "instance_type": "g6e.48xlarge",
                                                            "count": 4, "capacity": {"type": market}}))
    quotas, stub = stubbed("service-quotas", spec.region)
    stub.add_response("get_service_quota", {"Quota": {"Value": 192.0}}, {"ServiceCode": "ec2", "QuotaCode": code})
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    checks = list(instance_quotas(Context(spec, lambda service: quotas, NOW)))
    g = by_name(checks, label)
    assert g.status == FAIL and "768 vCPUs needed, the quota is 192" in g.reason and f"({code})" in g.reason
    assert f"--quota-code {code} --desired-value 768" in g.hint
    assert [c.name for c in checks] == [label, "quota On-Demand Standard vCPUs"]
    stub.assert_no_pending_responses()


def test_every_type_of_the_catalog_names_its_vcpu_quota():
    """P types count against the P quota, g6e against G and VT, the CPU families against Standard."""
    quotas = {t.name: t.vcpu_quota for t in catalog.catalog().values()}
    assert {quotas[t] for t in quotas if t.startswith("p")} == {catalog.P_VCPUS}
    assert {quotas[t] for t in quotas if t.startswith("g6e.")} == {catalog.G_VCPUS}
    assert {quotas[t] for t in quotas if not t.startswith(("p", "g6e."))} == {catalog.STANDARD_VCPUS}
    assert set(image_facts.BUILD_INSTANCE_QUOTAS) == set(image_facts.BUILD_INSTANCE_VCPUS)


def test_quota_missing_in_moto_warns():
    """moto implements Service Quotas for VPC only: an EC2 quota is 'not found' there."""
    spec = validated(base_spec())
    with mocked_aws():
        quotas = boto3.client("service-quotas", region_name=spec.region)
        with Stubber(quotas) as stub:  # moto lacks GetAWSDefaultServiceQuota: stub that second call
            stub.add_client_error("get_service_quota", "NoSuchResourceException")
            stub.add_client_error("get_aws_default_service_quota", "NoSuchResourceException")
            stub.add_client_error("get_service_quota", "NoSuchResourceException")
            stub.add_client_error("get_aws_default_service_quota", "NoSuchResourceException")
            checks = list(instance_quotas(Context(spec, lambda service: quotas, NOW)))
    assert [c.status for c in checks] == [WARN, WARN]


# ---- node images (NAME-images) --------------------------------------------------------------

def test_node_images_need_their_base_parameter_and_image_builder():
    spec = loader.load(ROOT / "examples/p6e-gb200-pcs.yaml").spec  # an arm64 image and an x86_64 one
    clients = Clients(spec, matching_reservations(spec))
    checks = list(node_images(Context(spec, clients, NOW)))
    arm = by_name(checks, "base image pcs-arm64")
    assert arm.status == PASS
    assert arm.reason.startswith("/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id: ami-")
    assert arm.reason.endswith(", PCS agent 1.5.2-1")
    assert by_name(checks, "base image pcs-x86_64").status == PASS
    assert by_name(checks, "EC2 Image Builder").reason == "EC2 Image Builder answers in us-east-1"
    clients.ssm_stub.assert_no_pending_responses()
    clients.imagebuilder_stub.assert_no_pending_responses()


@pytest.mark.parametrize("agent, status", [("1.4.0-1", FAIL), ("1.5.0-1", PASS), ("1.10.0-1", PASS), (None, WARN)])
def test_a_pcs_base_image_needs_an_agent_that_runs_lifecycle_actions(agent, status):
    spec = loader.load(ROOT / "examples/p5-pcs.yaml").spec
    clients = Clients(spec, matching_reservations(spec), agent=agent or "unknown")
    check = by_name(list(node_images(Context(spec, clients, NOW))), "base image pcs-x86_64")
    assert check.status == status, check
    if status == FAIL:
        assert "PCS agent 1.4.0-1" in check.reason and "1.5.0-1 or later" in check.reason
        assert "images.revision" in check.hint and "ami_id" in check.hint
    if status == WARN:
        assert "names no PCS agent version" in check.reason and "describe-images" in check.hint


@pytest.mark.parametrize("version, status", [("25.11", PASS), ("24.11", PASS), ("26.05", FAIL)])
def test_a_pcs_base_image_must_carry_the_clusters_slurm(version, status):
    """The PCS-ready DLAMI lists its Slurm releases in its description; the cluster's must be one."""
    spec = validated(base_spec(orchestrator={"type": "pcs", "version": version}))
    clients = Clients(spec)
    check = by_name(list(node_images(Context(spec, clients, NOW))), "base image pcs-x86_64 Slurm")
    assert check.status == status, check
    assert "24.11.7-2, 25.05.8-2, 25.11.6-2" in check.reason
    if status == PASS:
        assert check.reason.endswith(f"the cluster's {version} among them")
    else:
        assert "Slurm 26.05 (orchestrator.version) is not on ami-" in check.reason
        assert "test-cluster-images fails" in check.reason
        assert "orchestrator.version" in check.hint and "24.11, 25.05, 25.11; the newest is 25.11" in check.hint


def test_a_pcs_base_image_that_lists_no_slurm_warns():
    spec = validated(base_spec())
    clients = Clients(spec, slurm=())
    check = by_name(list(node_images(Context(spec, clients, NOW))), "base image pcs-x86_64 Slurm")
    assert check.status == WARN and "lists no Slurm versions" in check.reason
    assert "/opt/aws/pcs/scheduler/slurm-25.11" in check.reason and "describe-images" in check.hint


@pytest.mark.parametrize("root, status, said", [
    (("/dev/sda1", 100), PASS, "root device /dev/sda1, root snapshot 100 GiB: the image's root is 200 GiB"),
    (("/dev/xvda", 100), FAIL, "the image's recipe sizes /dev/sda1 to 200 GiB, which on this base adds a second "
                               "volume and leaves the root at 100 GiB"),
    (("/dev/sda1", 250), FAIL, "root snapshot 250 GiB: larger than the 200 GiB the image's recipe gives the root "
                               "volume")])
def test_a_pcs_base_image_root_is_the_device_and_size_the_recipe_sets(root, status, said):
    spec = validated(base_spec())
    check = by_name(list(node_images(Context(spec, Clients(spec, root=root), NOW))),
                    "base image pcs-x86_64 root volume")
    assert check.status == status and said in check.reason, check
    if status == FAIL:
        assert "ami_id" in check.hint


def hyperpod_base(clients):
    """The DescribeImages entry of the HyperPod base image the Clients publish."""
    [entry] = [e for e in clients.ec2.images.values() if e["Name"] == "base-hyperpod-slurm-x86_64"]
    return entry


def test_a_hyperpod_image_keeps_the_base_root_volume_which_preflight_reports():
    spec = validated(base_spec(orchestrator={"type": "hyperpod-slurm"}))
    clients = Clients(spec, root=("/dev/xvda", 100))
    checks = list(node_images(Context(spec, clients, NOW)))
    root = by_name(checks, "base image hyperpod-slurm-x86_64 root volume")
    assert root.status == PASS
    assert root.reason.endswith(": root device /dev/xvda, root snapshot 100 GiB: the image keeps it (SageMaker "
                                "sizes a HyperPod node's root volume itself)")
    assert not [c for c in checks if c.name.endswith("Slurm")]  # HyperPod's Slurm is its image's own
    # a base with a second EBS volume: the image would carry it, which HyperPod refuses
    clients = Clients(spec, root=("/dev/xvda", 100))
    hyperpod_base(clients)["BlockDeviceMappings"].append(
        {"DeviceName": "/dev/sdb", "Ebs": {"VolumeSize": 50, "SnapshotId": "snap-0fedcba9876543210"}})
    root = by_name(list(node_images(Context(spec, clients, NOW))), "base image hyperpod-slurm-x86_64 root volume")
    assert root.status == FAIL and "EBS volumes at /dev/sdb" in root.reason
    assert "primary snapshot volume only" in root.reason


@pytest.mark.parametrize("kms", [False, True])
def test_ebs_encryption_by_default_refuses_a_hyperpod_image(kms):
    """moto keeps EBS encryption by default; its key comes from a Stubber (moto lacks the call)."""
    spec = validated(with_(base_spec(orchestrator={"type": "hyperpod-slurm"}), "storage.kms", kms))
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    with mocked_aws():
        clients = Clients(spec, ebs_key=key)
        off = by_name(list(node_images(Context(spec, clients, NOW))), "EBS encryption by default")
        assert off.status == PASS
        assert off.reason == ("EBS encryption by default is off in us-east-1: the HyperPod image is built "
                              "unencrypted, as SageMaker takes it")
        assert len(clients.ebs_key._queue) == 1  # the key is not asked for
        clients("ec2").enable_ebs_encryption_by_default()
        on = by_name(list(node_images(Context(spec, clients, NOW))), "EBS encryption by default")
    assert on.status == FAIL
    assert on.reason == (f"EBS encryption by default is on in us-east-1 (key {key}): image hyperpod-slurm-x86_64 "
                         "would come out encrypted, and SageMaker HyperPod launches only unencrypted custom AMIs")
    assert "aws ec2 disable-ebs-encryption-by-default --region us-east-1" in on.hint
    clients.ebs_key.assert_no_pending_responses()


@pytest.mark.parametrize("key, kms, status", [
    ("alias/aws/ebs", False, PASS),
    ("arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab", False, WARN),
    ("arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab", True, PASS)])
def test_a_pcs_image_without_the_storage_key_takes_the_default_ebs_key(key, kms, status):
    spec = validated(with_(base_spec(), "storage.kms", kms))
    with mocked_aws():
        clients = Clients(spec, ebs_key=key)
        check = by_name(list(node_images(Context(spec, clients, NOW))), "EBS encryption by default")
    assert check.status == status, check
    if kms:
        assert check.reason.endswith("the images are encrypted with the storage key")
        assert len(clients.ebs_key._queue) == 1  # the default key does not matter
    elif status == PASS:
        assert check.reason.endswith("the account's default EBS key, alias/aws/ebs")
    else:
        assert "AWSServiceRoleForPCS" in check.reason and "storage.kms: true" in check.hint


def test_a_base_parameter_missing_in_the_region_fails_with_a_hint():
    spec = loader.load(ROOT / "examples/p6-b200-hyperpod-slurm.yaml").spec
    checks = list(node_images(Context(spec, Clients(spec, parameters=()), NOW)))
    missing = by_name(checks, "base image hyperpod-slurm-x86_64")
    assert missing.status == FAIL
    assert missing.reason.startswith("/aws/service/sagemaker-hyperpod/ami/x86_64/slurm-ubuntu-22.04/latest/ami-id not "
                                     "found in us-east-1")
    assert "controller, login, train, eval" in missing.reason and "ami_id" in missing.hint
    assert by_name(checks, "EC2 Image Builder").status == PASS  # one missing parameter stops nothing else


def test_image_builder_access_denied_is_a_fail_row_that_names_the_permission():
    spec = validated(base_spec())
    imagebuilder, stub = stubbed("imagebuilder", spec.region)
    stub.add_client_error("list_image_recipes", "AccessDeniedException", http_status_code=403)
    ssm, ssm_stub = stubbed("ssm", spec.region)
    ssm_stub.add_response("get_parameter", {"Parameter": {"Name": "p", "Type": "String", "Value": "ami-1"}})
    checks = list(node_images(Context(spec, {"ssm": ssm, "imagebuilder": imagebuilder}.__getitem__, NOW)))
    denied = by_name(checks, "EC2 Image Builder")
    assert denied.status == FAIL and denied.reason == "access denied to ListImageRecipes"
    assert "imagebuilder:ListImageRecipes" in denied.hint


def test_image_builder_not_in_the_region_fails_without_a_call(monkeypatch):
    spec = validated(base_spec())
    monkeypatch.setattr(endpoints, "offered_in", lambda service, region: service != "imagebuilder")
    clients = Clients(spec)
    checks = list(node_images(Context(spec, clients, NOW)))
    assert by_name(checks, "EC2 Image Builder").status == FAIL
    assert len(clients.imagebuilder_stub._queue) == 1  # never called


def test_hyperpod_image_builds_count_against_the_ec2_quota():
    """HyperPod's nodes are SageMaker's (its quotas); the build instance is an EC2 one."""
    spec = validated(base_spec(orchestrator={"type": "hyperpod-slurm"}))
    with mocked_aws():
        checks = run_checks(Context(spec, Clients(spec, quota=4.0), NOW))
    build = by_name(checks, "quota On-Demand Standard vCPUs")
    assert build.status == FAIL
    assert build.reason.startswith("8 vCPUs needed (8 of them for the image builds of test-cluster-images), "
                                   "the quota is 4")


def test_kubernetes_planes_build_no_images():
    data = with_(base_spec(orchestrator={"type": "eks"}), "network.extra_availability_zone_ids", ["use1-az6"])
    spec = validated(data)
    assert list(node_images(Context(spec, Clients(spec), NOW))) == []
    quotas, stub = stubbed("service-quotas", spec.region)
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    stub.add_response("get_service_quota", {"Quota": {"Value": 4000.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
    standard = list(instance_quotas(Context(spec, lambda service: quotas, NOW)))[1]
    assert "image builds" not in standard.reason


# ---- failures that must not be tracebacks --------------------------------------------------

def test_access_denied_fails_that_check_only(capsys):
    spec = validated(base_spec())
    with mocked_aws():
        clients = Clients(spec)
        ec2, stub = stubbed("ec2", spec.region)
        stub.add_client_error("describe_availability_zones", "UnauthorizedOperation",
                              "You are not authorized to perform this operation.")
        clients.ec2 = Split(clients.ec2.base, ec2, ("describe_availability_zones",))
        rc = shown(spec, client=clients, now=NOW)
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL    availability zones" in out and "access denied to DescribeAvailabilityZones" in out
    assert "ec2:Describe*" in out and "PASS    credentials" in out


def test_an_unreachable_endpoint_is_cannot_reach_not_a_missing_service():
    spec = validated(base_spec())
    pcs = boto3.client("pcs", region_name=spec.region)

    def unreachable(**kwargs):
        raise EndpointConnectionError(endpoint_url="https://pcs.us-east-1.amazonaws.com/")

    pcs.meta.events.register("before-send.pcs.ListClusters", unreachable)
    (check,) = services.control_plane(Context(spec, lambda service: pcs, NOW))
    assert check.status == FAIL and check.reason.startswith("cannot reach https://pcs.us-east-1.amazonaws.com/")
    assert "check the network" in check.hint


def test_a_service_botocore_does_not_list_in_the_region_fails_without_a_call(monkeypatch):
    spec = validated(base_spec(orchestrator={"type": "hyperpod-slurm"}))
    monkeypatch.setattr(endpoints, "offered_in", lambda service, region: False)
    (check,) = services.control_plane(Context(spec, lambda service: pytest.fail("no call"), NOW))
    assert check == preflight.Check("SageMaker HyperPod", FAIL, "SageMaker HyperPod is not offered in us-east-1 "
                                    "(botocore's endpoint data)", "choose a region where the service runs")


@pytest.mark.parametrize("service,region,offered", [
    ("sagemaker", "us-east-1", True), ("sagemaker", "us-iso-west-1", False),
    ("pcs", "us-east-1", None),  # PCS ships endpoint rules only: the data cannot say
])
def test_offered_in_reads_botocores_endpoint_data(service, region, offered):
    assert preflight.offered_in(service, region) is offered


def test_hyperpod_uses_sagemaker_quotas_and_list_clusters():
    spec = validated(base_spec(orchestrator={"type": "hyperpod-slurm"}))
    with mocked_aws():
        checks = run_checks(Context(spec, Clients(spec, quota=1.0), NOW))
    assert by_name(checks, "instance types").status == WARN
    assert by_name(checks, "quota ml.p5.48xlarge for cluster usage").status == FAIL  # 2 needed, quota 1
    assert by_name(checks, "SageMaker HyperPod").status == PASS


def test_no_credentials_is_one_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    result = subprocess.run([sys.executable, "-m", "fmcluster", "preflight", "examples/p5-pcs.yaml"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error: no usable AWS credentials: Unable to locate credentials" in result.stderr
    assert "hint: preflight reads the target account" in result.stderr


def test_unknown_profile_is_one_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_PROFILE="nope", AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    result = subprocess.run([sys.executable, "-m", "fmcluster", "preflight", "examples/p5-pcs.yaml"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "no usable AWS credentials" in result.stderr and "nope" in result.stderr


def test_bad_window_and_invalid_spec_exit_2(tmp_path, capsys):
    from fmcluster.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["preflight", "examples/p5-pcs.yaml", "--window", "tomorrow"])
    assert exc.value.code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["preflight", str(bad)]) == 2


def own_values(example: str):
    """An example with the values of one's own in place of its placeholders (placeholder-values)."""
    text = (ROOT / example).read_text().replace("cr-0123456789abcdef0", "cr-08f3a9c2b1d4e6f70").replace(
        "ml-oncall@example.com", "ml-oncall@mycompany.com")
    result = loader.load_text(text, example)
    assert result.ok and not [d for d in result.diagnostics if d.rule == "placeholder-values"]
    return result.spec


def test_json_format(capsys):
    spec = own_values("examples/p5-pcs.yaml")
    with mocked_aws():
        assert shown(spec, "json", client=Clients(spec, matching_reservations(spec)), now=NOW) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["cluster"] == "llm-pretrain"
    assert {"name", "status", "reason", "hint"} == set(report["checks"][0])


def test_placeholders_fail_first_whatever_the_account_says(capsys):
    """A placeholder fails preflight (validate only warns): one row each, first, with the field and
    what to put there; the account's checks still run. Accepting the warning changes nothing."""
    text = (ROOT / "examples/p5-pcs.yaml").read_text() + (
        "accepted_warnings:\n  - rule: placeholder-values\n    reason: an example\n")
    spec = loader.load_text(text, "p5-pcs.yaml").spec
    with mocked_aws():
        assert shown(spec, "json", client=Clients(spec, matching_reservations(spec)), now=NOW) == 1
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert [(c["name"], c["status"], c["reason"].split(":")[0]) for c in checks[:2]] == [
        ("placeholder", FAIL, "node_groups[0].capacity.reservation_id"),
        ("placeholder", FAIL, "observability.alert_email")]
    assert "cr-0123456789abcdef0 is an example reservation id" in checks[0]["reason"]
    assert "describe-capacity-reservations" in checks[0]["hint"]
    assert [c["status"] for c in checks[2:] if c["status"] == FAIL] == []  # the account's checks pass
    assert preflight.placeholder_checks(own_values("examples/p5-pcs.yaml")) == []


def test_an_az_id_the_region_does_not_have_fails(capsys):
    """`use1-az99` has the region's prefix, which is all validate can check (botocore ships no AZ
    list, and fmcluster keeps none): the account's zones say it does not exist."""
    data = with_(base_spec(), "availability_zone_id", "use1-az99")
    assert not [d for d in problems(data) if d.is_error]
    spec = validated(data)
    with mocked_aws():
        checks = list(account.zones(Context(spec, Clients(spec, []), NOW)))
    (zone,) = [c for c in checks if c.name == "AZ ID use1-az99"]
    assert zone.status == FAIL and zone.reason == "no zone use1-az99 in us-east-1"
    assert zone.hint.startswith("zones here: use1-az1, use1-az2") and "use1-az4" in zone.hint


def test_readme_shows_real_preflight_output(capsys):
    spec = loader.load(ROOT / "examples/p5en-reservation-pcs.yaml").spec
    small = reservation(spec.node_groups[0], "usw2-az2", block=False, total=24, end=None)
    with mocked_aws():
        assert shown(spec, client=Clients(spec, [[small]]), now=NOW) == 1
    out = capsys.readouterr().out
    assert readme_output("fmcluster preflight examples/p5en-reservation-pcs.yaml") == out
    assert max(map(len, out.splitlines())) <= 100  # results and hints wrap in their column


# ---- sums over node groups; placement groups and AMIs (issue 15) ----------------------------

def two_groups_on(capacity, counts=(16, 8)):
    spec = with_(base_spec(), "node_groups", [
        {"name": f"gpu{i}", "instance_type": "p5.48xlarge", "count": n, "capacity": capacity}
        for i, n in enumerate(counts)])
    return validated(spec)


def test_groups_drawing_on_one_reservation_are_summed():
    """16 + 8 from an 8-instance reservation: each group alone would be checked against 8."""
    spec = two_groups_on({"type": "reservation", "reservation_id": "cr-0123456789abcdef0"})
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        reservation(spec.node_groups[0], block=False, total=8, end=None)]},
        {"CapacityReservationIds": ["cr-0123456789abcdef0"]})  # one call for both groups
    checks = list(capacity.reservations(Context(spec, lambda service: ec2, NOW)))
    (size,) = [c for c in checks if c.name.endswith(": size")]
    assert size.name == "reservation gpu0, gpu1: size" and size.status == FAIL
    assert "holds 8 instances; node groups gpu0 (16), gpu1 (8) need up to 24 together" in size.reason
    stub.assert_no_pending_responses()


RIDS = ("cr-00000000000000001", "cr-00000000000000002")


def test_a_resource_group_is_judged_on_its_total():
    """Two 8-instance reservations backing a 16-node group: one PASS, not two FAILs."""
    arn = "arn:aws:resource-groups:us-east-1:111122223333:group/p5"
    spec = two_groups_on({"type": "reservation", "reservation_resource_group_arn": arn}, counts=(16,))
    groups, groups_stub = stubbed("resource-groups", spec.region)
    groups_stub.add_response("list_group_resources", {"Resources": [
        {"Identifier": {"ResourceArn": f"arn:aws:ec2:us-east-1:111122223333:capacity-reservation/{rid}",
                        "ResourceType": "AWS::EC2::CapacityReservation"}} for rid in RIDS]}, {"Group": arn})
    ec2, ec2_stub = stubbed("ec2", spec.region)
    ec2_stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
        reservation(spec.node_groups[0], block=False, total=8, rid=rid, end=None)
        for rid in RIDS]})
    checks = list(capacity.reservations(Context(spec, {"resource-groups": groups, "ec2": ec2}.get, NOW)))
    assert not [c for c in checks if c.status == FAIL], checks
    (size,) = [c for c in checks if c.name.endswith(": size")]
    assert size.status == PASS and "2 reservations hold 16 instances" in size.reason


def with_pg(name="train-cpg"):
    return validated(with_(base_spec(), "node_groups[0].placement_group", name))


@pytest.mark.parametrize("answer,status,word", [
    ({"PlacementGroups": [{"GroupName": "train-cpg", "State": "available", "Strategy": "cluster"}]}, PASS, "cluster"),
    ({"PlacementGroups": [{"GroupName": "train-cpg", "State": "available", "Strategy": "spread"}]}, WARN, "spread"),
    ({"PlacementGroups": [{"GroupName": "train-cpg", "State": "deleting", "Strategy": "cluster"}]}, FAIL, "deleting"),
    ({"PlacementGroups": []}, FAIL, "no placement group train-cpg"),
])
def test_a_named_placement_group_must_exist_and_be_a_cluster_group(answer, status, word):
    spec = with_pg()
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_placement_groups", answer, {"GroupNames": ["train-cpg"]})
    (check,) = ec2_checks.placement_groups(Context(spec, lambda service: ec2, NOW))
    assert check.status == status and word in check.reason


def test_an_unknown_placement_group_error_is_a_fail_row():
    spec = with_pg()
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_client_error("describe_placement_groups", "InvalidPlacementGroup.Unknown", "unknown")
    (check,) = ec2_checks.placement_groups(Context(spec, lambda service: ec2, NOW))
    assert check.status == FAIL and "no placement group train-cpg in us-east-1" in check.reason


def image(arch="x86_64", root_gib=100, state="available"):
    return {"Images": [{"ImageId": "ami-0123456789abcdef0", "Name": "my-dlami", "State": state,
                        "Architecture": arch, "RootDeviceName": "/dev/sda1",
                        "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": root_gib}}]}]}


@pytest.mark.parametrize("answer,status,word", [
    (image(), PASS, "my-dlami: available, x86_64, root snapshot 100 GiB"),
    (image(arch="arm64"), FAIL, "built for arm64; p5.48xlarge (node group gpu) runs x86_64"),
    (image(root_gib=1024), FAIL, "root snapshot is 1024 GiB; root_volume_gib of node group gpu is 512"),
    (image(state="pending"), FAIL, "is pending"),
    ({"Images": []}, FAIL, "not found in us-east-1"),
])
def test_a_named_ami_must_exist_match_the_architecture_and_fit_the_root_volume(answer, status, word):
    spec = validated(with_(base_spec(), "node_groups[0].ami_id", "ami-0123456789abcdef0"))
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_images", answer, {"ImageIds": ["ami-0123456789abcdef0"]})
    (check,) = ec2_checks.amis(Context(spec, lambda service: ec2, NOW))
    assert check.status == status and word in check.reason, check


# ---- whatever the endpoint answers: a FAIL row with a hint, never a traceback (issue 15) -------

@pytest.mark.parametrize("code,status,word", [
    ("Throttling", 400, "was throttled"), ("RequestLimitExceeded", 503, "was throttled"),
    ("InternalError", 500, "failed on the AWS side: HTTP 500"), ("ServiceUnavailable", 503, "HTTP 503"),
])
def test_throttling_and_server_errors_fail_that_check_only(code, status, word):
    spec = validated(base_spec())
    with mocked_aws():
        clients = Clients(spec)
        ec2, stub = stubbed("ec2", spec.region)
        stub.add_client_error("describe_availability_zones", code, "try later", http_status_code=status)
        clients.ec2 = Split(clients.ec2.base, ec2, ("describe_availability_zones",))
        checks = run_checks(Context(spec, clients, NOW))
    failed = by_name(checks, "availability zones")
    assert failed.status == FAIL and word in failed.reason and failed.hint
    assert by_name(checks, "credentials").status == PASS and by_name(checks, "AWS PCS").status == PASS


def test_an_answer_without_the_fields_asked_for_is_a_fail_row():
    spec = validated(base_spec())
    ec2, stub = stubbed("ec2", spec.region)
    stub.add_response("describe_availability_zones", {})  # valid for the model, but no AvailabilityZones
    ctx = Context(spec, lambda service: ec2, NOW)
    checks = guard(ctx, "availability zones", partial(account.zones, ctx))
    (check,) = checks
    assert check.status == FAIL and "lacks what the check reads" in check.reason


class Garbage:
    """An HTTP server on the loopback that answers every request with `status` and `body`."""

    def __init__(self, status: int, body: bytes) -> None:
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args):
                pass

        self.status, self.body = status, body
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def client(self, service: str, region: str):
        from botocore.config import Config

        return boto3.client(service, region_name=region, endpoint_url=self.url,
                            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5))

    def close(self) -> None:
        self.server.shutdown()


@pytest.mark.parametrize("status,body,word", [
    (200, b"\x00\xffnot xml at all", "could not be read"),
    (200, b"<html><body>captive portal</body></html>", "lacks what the check reads"),  # XML, not AWS's
    (500, b"oops", "HTTP 500"),
    (502, b"<html>bad gateway</html>", "HTTP 502"),
])
def test_a_server_that_answers_garbage_gives_fail_rows_and_json(status, body, word, capsys):
    spec = validated(base_spec())
    server = Garbage(status, body)
    try:
        rc = shown(spec, "json", client=lambda service: server.client(service, spec.region), now=NOW)
    finally:
        server.close()
    import json

    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["ok"] is False
    assert report["checks"] and not [c for c in report["checks"] if c["status"] == PASS], report["checks"]
    assert any(word in c["reason"] for c in report["checks"]), report["checks"]


def test_a_closed_port_is_cannot_reach():
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    from botocore.config import Config

    spec = validated(base_spec())
    client = boto3.client("sts", region_name=spec.region, endpoint_url=f"http://127.0.0.1:{port}",
                          config=Config(retries={"max_attempts": 1}, connect_timeout=1))
    ctx = Context(spec, lambda service: client, NOW)
    (check,) = guard(ctx, "credentials", partial(account.identity, ctx))
    assert check.status == FAIL and check.reason.startswith(f"cannot reach http://127.0.0.1:{port}")


def test_no_credentials_in_json_is_json(tmp_path):
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    result = subprocess.run([sys.executable, "-m", "fmcluster", "preflight", "examples/p5-pcs.yaml", "--format",
                             "json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["checks"] == [] and "no usable AWS credentials" in report["error"]


# ---- what preflight read, for the plan --------------------------------------------------------

def first_group_cell(plan_text: str, label: str) -> str:
    """The first node group's cell of a row of the text plan's compute table, its wrapped lines
    joined: the column starts and ends where the header's cells do."""
    lines = plan_text.splitlines()
    header = next(line for line in lines if "(per node)" in line)
    start, end = [m.start() for m in re.finditer(r"\S+ \(per node\)|total at max", header)][:2]
    first = next(i for i, line in enumerate(lines) if line.startswith(f"  {label}  "))
    cell = [lines[first][start:end].strip()]
    for line in lines[first + 1:]:
        if line[:start].strip() or not line.strip():
            break
        cell.append(line[start:end].strip())
    return " ".join(part for part in cell if part)


def test_json_says_what_it_read_and_the_plan_shows_the_block_window(tmp_path, capsys):
    """`fmcluster preflight SPEC --format json > REPORT` keeps each reservation's window;
    `fmcluster plan SPEC --preflight REPORT` shows it beside the node group."""
    import json

    from fmcluster.cli import main as cli

    example = ROOT / "examples/p5en-eks.yaml"
    spec = loader.load(example).spec
    with mocked_aws():
        shown(spec, "json", client=Clients(spec, matching_reservations(spec)), now=NOW)
    report = capsys.readouterr().out
    read = json.loads(report)["reservations"]
    assert read == [{"id": "cr-0123456789abcdef0", "kind": "capacity-block", "state": "active",
                     "instance_type": "p5en.48xlarge", "instances": 8, "start": "2026-11-30T12:00:00Z",
                     "end": "2026-12-07T12:00:00Z", "upfront_fee": None, "currency": None}]
    saved = tmp_path / "preflight.json"
    saved.write_text(report)
    assert cli(["plan", str(example), "--preflight", str(saved)]) == 0
    out = capsys.readouterr().out
    assert first_group_cell(out, "window").startswith(
        "2026-11-30T12:00:00Z to 2026-12-07T12:00:00Z (active, 8 instances)")
    assert first_group_cell(out, "scaling").startswith("8 while the block is active, else 0 (45 min before end)")
    assert cli(["plan", str(example), "--preflight", str(saved), "--format", "json"]) == 0
    groups = json.loads(capsys.readouterr().out)["node_groups"]
    assert groups[0]["window"].startswith("2026-11-30T12:00:00Z to") and groups[1]["window"] is None


@pytest.mark.parametrize("text, message", [
    ("not json", "cannot read a preflight report"),
    ('{"cluster": "p5en-eks"}', 'no "reservations" list'),
    ('{"cluster": "other", "reservations": []}', "a preflight report of cluster 'other', not of 'p5en-eks'"),
])
def test_plan_refuses_a_file_that_is_not_this_clusters_preflight_report(tmp_path, capsys, text, message):
    from fmcluster.cli import main as cli

    saved = tmp_path / "report.json"
    saved.write_text(text)
    assert cli(["plan", str(ROOT / "examples/p5en-eks.yaml"), "--preflight", str(saved)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert cli(["plan", str(ROOT / "examples/p5en-eks.yaml"), "--preflight", str(tmp_path / "missing")]) == 2


def test_encrypted_images_need_the_service_linked_roles_the_key_policy_names():
    """storage.kms on AWS PCS: the image is encrypted with the storage key, whose policy names the
    PCS and Image Builder service-linked roles; KMS refuses a policy naming a missing role, so
    preflight fails until each exists (moto's IAM), with the command that creates it."""
    spec = validated(base_spec(storage={"kms": True}))
    with mocked_aws():
        clients = Clients(spec)
        checks = list(node_images(Context(spec, clients, NOW)))
        pcs, builder = (by_name(checks, "service-linked role AWSServiceRoleForPCS"),
                        by_name(checks, "service-linked role AWSServiceRoleForImageBuilder"))
        assert (pcs.status, builder.status) == (FAIL, FAIL)
        assert pcs.hint == "aws iam create-service-linked-role --aws-service-name pcs.amazonaws.com"
        assert "KMS refuses a policy naming a missing role" in builder.reason
        # the roles as AWS names them (moto's CreateServiceLinkedRole makes up other names)
        for service, role in image_facts.KEY_USERS.values():
            clients("iam").create_role(RoleName=role, Path=f"/aws-service-role/{service}/",
                                       AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                                           {"Effect": "Allow", "Principal": {"Service": service},
                                            "Action": "sts:AssumeRole"}]}))
        clients = Clients(spec)
        checks = list(node_images(Context(spec, clients, NOW)))
        assert by_name(checks, "service-linked role AWSServiceRoleForPCS").status == PASS
        assert by_name(checks, "service-linked role AWSServiceRoleForImageBuilder").status == PASS
    unencrypted = list(node_images(Context(validated(base_spec()), Clients(validated(base_spec())), NOW)))
    assert not [c for c in unencrypted if c.name.startswith("service-linked role")]


def test_a_shared_home_gets_its_fsx_check():
    spec = validated(with_(base_spec(), "storage.home", {"deployment_type": "SINGLE_AZ_HA_2"}))
    with mocked_aws():
        checks = run_checks(Context(spec, Clients(spec, matching_reservations(spec)), NOW))
    check = by_name(checks, "FSx for OpenZFS SINGLE_AZ_HA_2")
    assert check.status == WARN and "only the create call does" in check.reason
    bare = validated(base_spec())
    with mocked_aws():
        checks = run_checks(Context(bare, Clients(bare, matching_reservations(bare)), NOW))
    assert not [c for c in checks if c.name.startswith("FSx for OpenZFS")]
