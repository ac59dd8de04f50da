"""`fmcluster destroy`: an example's synthesized stacks deployed into moto's CloudFormation (made to
behave as CloudFormation where moto falls short: tests/support/moto_stacks.py), destroyed, and read
back with boto3: what should be gone is gone, what should be kept is kept, in the order the stacks
depend on each other. The planes' node APIs moto lacks (AWS PCS) answer through botocore's Stubber.
No test sleeps: destroy's waits take the test's `sleep`, which records them."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timezone

import boto3
import pytest

from fmcluster.cli import main
from fmcluster.deploy import assembly, destroy, nodes, retained
from fmcluster.deploy.destroy import deleting
from fmcluster.facts import prices
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support import moto_stacks
from tests.support.docs import readme_output
from tests.support.paths import ROOT

PCS_EXAMPLE, HYPERPOD_EXAMPLE = "examples/p5-pcs.yaml", "examples/p6-b200-hyperpod-slurm.yaml"
WHEN = datetime(2026, 1, 19, tzinfo=timezone.utc)


@pytest.fixture
def aws(monkeypatch):
    """moto, with CloudFormation as the service behaves (moto_stacks.as_the_service)."""
    from tests.support.moto_aws import mocked_aws

    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mocked_aws():
        moto_stacks.as_the_service(monkeypatch)
        yield


class Account:
    """The clients destroy is given: moto's, AWS PCS's through a Stubber (moto has no PCS), each
    call recorded as (service, operation, parameters), in order."""

    def __init__(self, region: str, pcs_answers: int = 0) -> None:
        import boto3
        from botocore.stub import Stubber

        self.region, self.calls, self.made = region, [], {}
        pcs = self.made["pcs"] = boto3.client("pcs", region_name=region)
        self.pcs = Stubber(pcs)
        for _ in range(pcs_answers):  # one ListClusters a run that deletes the cluster: none found
            self.pcs.add_response("list_clusters", {"clusters": []}, {})
        self.pcs.activate()
        self._record(pcs)

    def _record(self, client) -> None:
        service = client.meta.service_model.service_name

        def record(model, params, **kwargs):
            self.calls.append((service, model.name, params))

        client.meta.events.register("before-parameter-build", record)

    def __call__(self, service: str):
        if service not in self.made:
            import boto3

            self.made[service] = boto3.client(service, region_name=self.region)
            self._record(self.made[service])
        return self.made[service]

    def operations(self, *names: str) -> list[tuple[str, str]]:
        """(operation, what it named: a stack, bucket, file system...) of the calls named `names`."""
        def named(params):
            for key in ("StackName", "Bucket", "FileSystemId", "GroupId", "DBInstanceIdentifier", "logGroupName",
                        "KeyId"):
                if key in params:
                    return params[key]
            return ""

        return [(op, named(params)) for _, op, params in self.calls if op in names]


def stack_names(account: Account, operation: str) -> list[str]:
    """The stacks an operation named, by name (destroy names them by id)."""
    return [ref.split("/")[1] if ref.startswith("arn:") else ref for op, ref in account.operations(operation)]


def deploy(corpus, example: str):
    """The example deployed into moto as `cdk deploy` would: its model, and its spec."""
    spec = loader.load(ROOT / example).spec
    m = resolve(spec)
    moto_stacks.deploy([s.name for s in m.stacks], assembly.load(corpus.assembly(example)), spec.region,
                       protected=frozenset(s.name for s in m.stacks if s.termination_protection),
                       skipped_types=moto_stacks.SKIPPED_BY_THE_SERVICE, keep_imports=True, conditioned=True)
    return spec, m


def statuses(m) -> dict[str, str]:
    """The last status of each stack of the model, by name."""
    import boto3

    found: dict[str, str] = {}
    for summary in boto3.client("cloudformation", region_name=m.region).list_stacks()["StackSummaries"]:
        found.setdefault(summary["StackName"], summary["StackStatus"])
    return {s.name: found[s.name] for s in m.stacks}


def buckets(spec) -> set[str]:
    import boto3

    names = {b["Name"] for b in boto3.client("s3", region_name=spec.region).list_buckets()["Buckets"]}
    return {n for n in names if n.startswith(f"{spec.name}-") and not n.startswith(moto_stacks.ASSET_BUCKET_PREFIX)}


def file_systems(region: str) -> list[str]:
    import boto3

    return [f["FileSystemId"] for f in boto3.client("fsx", region_name=region).describe_file_systems()["FileSystems"]]


def log_groups(spec) -> set[str]:
    import boto3

    groups = boto3.client("logs", region_name=spec.region).describe_log_groups()["logGroups"]
    return {g["logGroupName"] for g in groups if spec.name in g["logGroupName"]}


def vpcs(spec) -> list[str]:
    import boto3

    found = boto3.client("ec2", region_name=spec.region).describe_vpcs(
        Filters=[{"Name": "tag:fmcluster:cluster", "Values": [spec.name]}])["Vpcs"]
    return [v["VpcId"] for v in found]


def run(spec, account, sleeps=None, **options):
    sleeps = [] if sleeps is None else sleeps
    return destroy.run(spec, "examples/x.yaml", clients=account, sleep=sleeps.append, **options)


# ---- without data: the stacks that hold none, newest first -----------------------------------

def bake(spec, key: str = "pcs-x86_64") -> tuple[str, str]:
    """A node image as NAME-images' build leaves it: an AMI of the account, tagged with the cluster
    and the image's key, and its snapshot."""
    import boto3

    ec2 = boto3.client("ec2", region_name=spec.region)
    instance = ec2.run_instances(ImageId=ec2.describe_images()["Images"][0]["ImageId"], MinCount=1,
                                 MaxCount=1)["Instances"][0]["InstanceId"]
    tags = [{"Key": "fmcluster:cluster", "Value": spec.name}, {"Key": "fmcluster:image", "Value": key}]
    image = ec2.create_image(InstanceId=instance, Name=f"{spec.name}-{key}-1",
                             TagSpecifications=[{"ResourceType": "image", "Tags": tags}])["ImageId"]
    ec2.terminate_instances(InstanceIds=[instance])
    (disk,) = ec2.describe_images(ImageIds=[image])["Images"][0]["BlockDeviceMappings"]
    return image, disk["Ebs"]["SnapshotId"]


def snapshots(region: str) -> set[str]:
    import boto3

    found = boto3.client("ec2", region_name=region).describe_snapshots(OwnerIds=["self"])["Snapshots"]
    return {s["SnapshotId"] for s in found}


def test_deletes_the_stacks_without_data_newest_first_and_keeps_the_rest(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    image, snapshot = bake(spec)
    before = {"buckets": buckets(spec), "file systems": file_systems(spec.region), "logs": log_groups(spec)}
    account = Account(spec.region, pcs_answers=1)
    report = run(spec, account)
    assert destroy.exit_code(report) == 0, destroy.render(report)
    # the reference images first (deployed last, after the cluster), then the cluster and its node images
    assert stack_names(account, "DeleteStack") == ["llm-pretrain-reference", "llm-pretrain-cluster",
                                                   "llm-pretrain-images"]
    # the node image its builds left, and its snapshot, after the images' stack: they hold no data
    assert account.operations("DeleteStack", "DeregisterImage", "DeleteSnapshot")[2:] == [
        ("DeleteStack", report.plan.stacks[2].stack_id), ("DeregisterImage", ""), ("DeleteSnapshot", "")]
    import boto3

    assert boto3.client("ec2", region_name=spec.region).describe_images(Owners=["self"])["Images"] == []
    assert snapshot not in snapshots(spec.region)
    assert statuses(m) == {
        "llm-pretrain-reference": "DELETE_COMPLETE", "llm-pretrain-cluster": "DELETE_COMPLETE",
        "llm-pretrain-images": "DELETE_COMPLETE",
        "llm-pretrain-observability": "CREATE_COMPLETE", "llm-pretrain-storage": "CREATE_COMPLETE",
        "llm-pretrain-network": "CREATE_COMPLETE"}
    assert len(before["buckets"]) == 2 and len(before["file systems"]) == 1
    assert buckets(spec) == before["buckets"] and file_systems(spec.region) == before["file systems"]
    # the log groups CloudFormation retained when it deleted the cluster's and the images' stacks stay,
    # the reference image's build log among them
    assert log_groups(spec) == before["logs"] and any("/aws/imagebuilder/llm-pretrain" in g for g in before["logs"])
    assert "/aws/imagebuilder/llm-pretrain-reference-x86-64" in before["logs"]
    assert not account.operations("UpdateTerminationProtection", "DeleteBucket", "DeleteFileSystem",
                                  "DeleteLogGroup", "DeleteSecurityGroup")
    out, err = destroy.render(report)
    assert err == ""
    assert "  keep    llm-pretrain-storage        it holds data: 2 S3 buckets, FSx for Lustre" in out
    assert "  keep    llm-pretrain-network        the kept llm-pretrain-observability is built on it" in out
    assert ("deleted: 3 stacks (llm-pretrain-reference, llm-pretrain-cluster, llm-pretrain-images) and 1 resource "
            "they left behind\n") in out


def test_what_is_kept_is_priced_from_the_deployed_sizes_and_the_price_table(aws, corpus):
    """The file system at its capacity and tier (4800 GiB PERSISTENT_2 at 250 MB/s/TiB), the NAT
    gateway and its address by the hour, a month of them; the buckets and logs billed by use."""
    spec, m = deploy(corpus, PCS_EXAMPLE)
    report = run(spec, Account(spec.region, pcs_answers=1), dry_run=True)
    table = prices.table()
    rows = {r.what: retained.cost(r, table) for r in report.plan.kept}
    lustre = spec.storage.lustre
    assert rows["FSx for Lustre"].monthly_usd == round(
        lustre.storage_capacity_gib * table.fsx_lustre_gib_month["PERSISTENT_2"]["250"], 2) == 1008.0
    assert rows["NAT gateway"].monthly_usd == round(table.nat_gateway_hourly * table.hours_per_month, 2)
    assert rows["public IPv4 address"].monthly_usd == round(table.public_ipv4_hourly * table.hours_per_month, 2)
    assert rows["S3 bucket"] == rows["log group"] == retained.Cost(None, retained.BILLED_BY_USE, by_use=True)
    out, _ = destroy.render(report)
    assert "  total                       $1,045.50  a month, and what is billed by use" in out  # with the alerts' key
    assert "aws logs delete-log-group --log-group-name /aws/imagebuilder/llm-pretrain-pcs-x86-64" in out


# The ids moto makes up, each time another: in the docs, ids of the shape AWS gives
MADE_UP = ((r"\bfs-[0-9a-f]{8}\b", "fs-0123456789abcdef0"), (r"\bnat-[0-9a-f]{17}\b", "nat-0123456789abcdef0"),
           (r"\b127\.\d+\.\d+\.\d+\b", "203.0.113.10"),
           (r"(Logs43EC5B8D|LogGroupE45F977D|Logs6DC19D7F)-[0-9A-Z]{12}\b", r"\1-1A2B3C4D5E6F"))


def test_docs_show_real_destroy_output(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    report = destroy.run(spec, PCS_EXAMPLE, clients=Account(spec.region, pcs_answers=1), dry_run=True)
    out, err = destroy.render(report)
    assert err == ""
    for made_up, shown in MADE_UP:
        out, n = re.subn(made_up, shown, out)
        assert n, made_up
    assert readme_output(f"fmcluster destroy {PCS_EXAMPLE} --dry-run") == out


# ---- with data: everything, in order ---------------------------------------------------------

def fill(spec) -> str:
    """Objects in the versioned bucket: two versions of one, a delete marker, an unfinished upload."""
    import boto3

    s3 = boto3.client("s3", region_name=spec.region)
    (bucket,) = [b for b in buckets(spec) if "checkpoints" in b]
    # (moto's CloudFormation leaves the bucket's VersioningConfiguration out: turned on as AWS has it)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="step-1/model.pt", Body=b"one")
    s3.put_object(Bucket=bucket, Key="step-1/model.pt", Body=b"two")
    s3.put_object(Bucket=bucket, Key="step-2/model.pt", Body=b"three")
    s3.delete_object(Bucket=bucket, Key="step-2/model.pt")
    s3.create_multipart_upload(Bucket=bucket, Key="step-3/model.pt")
    versions = s3.list_object_versions(Bucket=bucket)
    assert len(versions["Versions"]) == 3 and len(versions["DeleteMarkers"]) == 1
    return bucket


def test_with_data_deletes_everything_in_dependency_order(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    bucket = fill(spec)
    (file_system,) = file_systems(spec.region)
    account = Account(spec.region, pcs_answers=1)
    report = run(spec, account, with_data=True, yes="llm-pretrain")
    assert destroy.exit_code(report) == 0, destroy.render(report)
    deploy_order = [s.name for s in m.stacks]
    assert stack_names(account, "DeleteStack") == deploy_order[::-1]
    assert set(statuses(m).values()) == {"DELETE_COMPLETE"}
    assert buckets(spec) == set() and file_systems(spec.region) == [] and vpcs(spec) == []
    assert log_groups(spec) == set()
    import boto3

    groups = boto3.client("ec2", region_name=spec.region).describe_security_groups()["SecurityGroups"]
    assert [g for g in groups if g["GroupName"] != "default"] == []
    steps = account.operations("DeleteStack", "UpdateTerminationProtection", "DeleteObjects", "DeleteBucket",
                               "AbortMultipartUpload", "DeleteFileSystem", "DeleteSecurityGroup")
    order = [(op, ref.split("/")[1] if ref.startswith("arn:") else ref) for op, ref in steps]
    at = {step: i for i, step in reversed(list(enumerate(order)))}
    # the storage stack's protection lifted just before it goes, and nothing of its data before it
    assert order.index(("UpdateTerminationProtection", "llm-pretrain-storage")) + 1 == \
        order.index(("DeleteStack", "llm-pretrain-storage"))
    assert at[("DeleteStack", "llm-pretrain-storage")] < at[("DeleteObjects", bucket)] < \
        at[("AbortMultipartUpload", bucket)] < at[("DeleteBucket", bucket)]
    # the file system before its security group, and both before the network they are in
    (group,) = [ref for op, ref in order if op == "DeleteSecurityGroup"]
    assert at[("DeleteFileSystem", file_system)] < at[("DeleteSecurityGroup", group)] < \
        at[("DeleteStack", "llm-pretrain-network")]
    out, err = destroy.render(report)
    assert err == "" and "nothing of llm-pretrain is left in us-east-1\n" in out


def test_with_data_lifts_the_accounting_databases_protection_and_deletes_it(aws, corpus):
    import boto3

    spec, m = deploy(corpus, HYPERPOD_EXAMPLE)
    rds = boto3.client("rds", region_name=spec.region)
    (database,) = rds.describe_db_instances()["DBInstances"]
    # (moto's CloudFormation leaves DeletionProtection out: turned on as the template asks, as AWS has it)
    rds.modify_db_instance(DBInstanceIdentifier=database["DBInstanceIdentifier"], DeletionProtection=True)
    with pytest.raises(rds.exceptions.ClientError, match="deletion protection"):
        rds.delete_db_instance(DBInstanceIdentifier=database["DBInstanceIdentifier"], SkipFinalSnapshot=True)
    account = Account(spec.region)
    report = run(spec, account, with_data=True, yes=spec.name)
    assert destroy.exit_code(report) == 0, destroy.render(report)
    assert rds.describe_db_instances()["DBInstances"] == []
    order = account.operations("ModifyDBInstance", "DeleteDBInstance")
    identifier = database["DBInstanceIdentifier"]
    assert order == [("ModifyDBInstance", identifier), ("DeleteDBInstance", identifier)]
    (modify,) = [params for _, op, params in account.calls if op == "ModifyDBInstance"]
    assert modify["DeletionProtection"] is False
    (delete,) = [params for _, op, params in account.calls if op == "DeleteDBInstance"]
    assert delete["SkipFinalSnapshot"] is True
    assert set(statuses(m).values()) == {"DELETE_COMPLETE"}


def test_what_an_earlier_teardown_left_behind_is_found_kept_then_deleted(aws, corpus):
    """`npx cdk destroy --all` with the storage stack's protection lifted by hand: its retained file
    system, security group and buckets stay, and keep NAME-network (the file system is in its VPC)."""
    import boto3

    spec, m = deploy(corpus, PCS_EXAMPLE)
    cfn = boto3.client("cloudformation", region_name=spec.region)
    cfn.update_termination_protection(StackName="llm-pretrain-storage", EnableTerminationProtection=False)
    for name in ("llm-pretrain-reference", "llm-pretrain-cluster", "llm-pretrain-images", "llm-pretrain-observability",
                 "llm-pretrain-storage"):
        cfn.delete_stack(StackName=name)
    (file_system,) = file_systems(spec.region)
    account = Account(spec.region)
    report = run(spec, account)
    assert destroy.exit_code(report) == 0 and report.done == (), destroy.render(report)
    network = next(s for s in report.plan.stacks if s.name == "llm-pretrain-network")
    assert network.action == destroy.KEEP and "which llm-pretrain-storage left behind, is in its VPC" in network.why
    assert file_system in {r.physical_id for r in report.plan.kept}
    assert statuses(m)["llm-pretrain-network"] == "CREATE_COMPLETE" and file_systems(spec.region)
    report = run(spec, account, with_data=True, yes="llm-pretrain")
    assert destroy.exit_code(report) == 0, destroy.render(report)
    assert file_systems(spec.region) == [] and buckets(spec) == set() and vpcs(spec) == []
    assert stack_names(account, "DeleteStack") == ["llm-pretrain-network"]


# ---- refusals leave everything ---------------------------------------------------------------

def run_node(spec, group: str, count: int = 1) -> list[str]:
    """EC2 instances as a node group's launch template tags them."""
    import boto3

    ec2 = boto3.client("ec2", region_name=spec.region)
    image = ec2.describe_images()["Images"][0]["ImageId"]
    tags = [{"Key": "fmcluster:cluster", "Value": spec.name}, {"Key": "fmcluster:node-group", "Value": group}]
    made = ec2.run_instances(ImageId=image, MinCount=count, MaxCount=count, InstanceType="m7i.large",
                             TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    return [i["InstanceId"] for i in made["Instances"]]


def test_compute_nodes_up_refuse_and_leave_everything_unless_forced(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    up = run_node(spec, "gpu", 4)
    account = Account(spec.region, pcs_answers=2)
    report = run(spec, account)
    assert destroy.exit_code(report) == 1
    assert account.operations("DeleteStack", "UpdateTerminationProtection") == []
    assert set(statuses(m).values()) == {"CREATE_COMPLETE"}
    out, err = destroy.render(report)
    first = sorted(up)[:3]
    assert err.startswith(f"error: examples/x.yaml: llm-pretrain-cluster: nodes are up: 4 of node group gpu "
                          f"({', '.join(first)}, ...); deleting the stack ends the jobs on them\n  hint: ")
    assert "--force" in err and "nodes up: gpu: 4\n" in out and "refused: nothing was deleted\n" in out
    report = run(spec, account, force=True)
    assert destroy.exit_code(report) == 0 and report.done == ("llm-pretrain-reference", "llm-pretrain-cluster",
                                                              "llm-pretrain-images")


def test_the_control_planes_own_nodes_do_not_refuse(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    run_node(spec, "login")
    report = run(spec, Account(spec.region, pcs_answers=1))
    assert destroy.exit_code(report) == 0
    assert "nodes up: none in the compute groups; the control plane's own (login: 1) go with its stack\n" in \
        destroy.render_plan(report.plan)


@pytest.mark.parametrize("typed", [None, "llm-pretrain-storage", "llm"])
def test_with_data_unconfirmed_or_another_name_refuses_and_leaves_everything(aws, corpus, typed):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    before = buckets(spec), file_systems(spec.region)
    account = Account(spec.region, pcs_answers=1)
    asked = []
    report = run(spec, account, with_data=True, confirm=lambda plan: asked.append(plan) or typed)
    assert asked == [report.plan] and destroy.exit_code(report) == 1
    assert account.operations("DeleteStack", "UpdateTerminationProtection", "DeleteBucket") == []
    assert set(statuses(m).values()) == {"CREATE_COMPLETE"}
    assert (buckets(spec), file_systems(spec.region)) == before
    _, err = destroy.render(report)
    if typed is None:
        assert "nobody confirmed it" in err and "--yes=llm-pretrain" in err
    else:
        assert f"{typed!r} is not the cluster's name: nothing was deleted" in err


def test_a_dry_run_deletes_nothing_and_asks_nothing(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    account = Account(spec.region, pcs_answers=1)
    report = run(spec, account, with_data=True, dry_run=True, confirm=lambda plan: pytest.fail("asked"))
    assert destroy.exit_code(report) == 0
    assert [op for _, op, _ in account.calls if not op.startswith(("Describe", "List", "Get", "Head"))] == []
    assert [s.action for s in report.plan.stacks] == [destroy.DELETE] * 6
    out, _ = destroy.render(report)
    assert "(dry run: nothing is deleted)" in out and out.endswith("dry run: nothing was deleted\n")


def test_a_failed_deletion_says_the_stack_the_reason_and_a_hint_and_stops(aws, corpus):
    """Another stack imports one of NAME-network's exports: CloudFormation fails the network's
    deletion; what came before is gone, nothing after it is tried."""
    import boto3

    spec, m = deploy(corpus, PCS_EXAMPLE)
    cfn = boto3.client("cloudformation", region_name=spec.region)
    export = next(e["Name"] for e in cfn.list_exports()["Exports"] if e["Name"].startswith("llm-pretrain-network:"))
    cfn.create_stack(StackName="someone-else", TemplateBody=json.dumps({"Resources": {"Q": {
        "Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::ImportValue": export}}}}}))
    account = Account(spec.region, pcs_answers=1)
    report = run(spec, account, with_data=True, yes="llm-pretrain")
    assert destroy.exit_code(report) == 1
    assert report.failed.where == "llm-pretrain-network"
    assert report.failed.reason.startswith("DELETE_FAILED: ") and "in use by someone-else" in report.failed.reason
    assert statuses(m)["llm-pretrain-network"] == "DELETE_FAILED"
    assert statuses(m)["llm-pretrain-storage"] == "DELETE_COMPLETE" and buckets(spec) == set()
    out, err = destroy.render(report)
    assert err.startswith("error: examples/x.yaml: llm-pretrain-network: DELETE_FAILED: ")
    assert "\n  hint: another stack imports one of its exports" in err and "Traceback" not in err
    assert "stopped at llm-pretrain-network" in out


def test_another_account_is_refused(aws, corpus):
    spec, m = deploy(corpus, PCS_EXAMPLE)
    other = spec.model_copy(update={"account": "111122223333"})
    account = Account(spec.region, pcs_answers=1)
    report = run(other, account)
    assert destroy.exit_code(report) == 1 and account.operations("DeleteStack") == []
    assert "the spec's account is 111122223333, the credentials' 123456789012" in destroy.render(report)[1]


def test_nothing_deployed_is_nothing_to_do(aws):
    spec = loader.load(ROOT / PCS_EXAMPLE).spec
    report = run(spec, Account(spec.region))
    assert destroy.exit_code(report) == 0 and report.done == ()
    assert destroy.render(report)[0].endswith("nothing of llm-pretrain is deployed in us-east-1\n")


# ---- the order --------------------------------------------------------------------------------

@pytest.mark.parametrize("example", [PCS_EXAMPLE, HYPERPOD_EXAMPLE, "examples/p5en-eks.yaml"])
def test_the_model_deploys_each_stack_after_those_its_assembly_says_it_depends_on(corpus, example):
    """Destroy deletes in the reverse of the model's order: that order must list every stack after
    the stacks the synthesized assembly makes it depend on (its references and the app's own
    dependencies)."""
    manifest = json.loads((corpus.assembly(example) / "manifest.json").read_text())
    stacks = {artifact_id: a["properties"].get("stackName", artifact_id) for artifact_id, a
              in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    order = [s.name for s in resolve(loader.load(ROOT / example).spec).stacks]
    assert sorted(order) == sorted(stacks.values())
    for artifact_id, name in stacks.items():
        needs = {stacks[d] for d in manifest["artifacts"][artifact_id].get("dependencies", []) if d in stacks}
        assert needs <= set(order[:order.index(name)]), (name, needs)
    assert any(manifest["artifacts"][a].get("dependencies") for a in stacks)  # the check has something to check


def plan_of(stacks, with_data=False):
    return destroy.Plan("c", "us-east-1", "123456789012", with_data, tuple(stacks), (), prices.table())


def test_each_stack_is_waited_for_and_a_slow_one_says_how_long(monkeypatch):
    """Polled every STACK_POLL_S, a line every SAY_EVERY_S; a deletion that outlasts
    STACK_LIMIT_S is reported, not waited for forever."""
    import boto3
    from botocore.stub import Stubber

    cfn = boto3.client("cloudformation", region_name="us-east-1")
    stub = Stubber(cfn)
    stack_id = "arn:aws:cloudformation:us-east-1:123456789012:stack/c-cluster/1"
    stub.add_response("delete_stack", {}, {"StackName": stack_id})
    polls = int(destroy.SAY_EVERY_S / destroy.STACK_POLL_S) + 1
    for status in ["DELETE_IN_PROGRESS"] * polls + ["DELETE_COMPLETE"]:
        stub.add_response("describe_stacks", {"Stacks": [{"StackName": "c-cluster", "StackId": stack_id,
                                                          "CreationTime": WHEN, "StackStatus": status}]},
                          {"StackName": stack_id})
    stub.activate()
    said, sleeps = [], []
    stack = destroy.Stack("c-cluster", "cluster", destroy.DELETE, stack_id=stack_id, status="CREATE_COMPLETE")
    done, failed = destroy.execute(plan_of([stack]), {"cloudformation": cfn}.__getitem__, said.append, sleeps.append)
    assert failed is None and done == ("c-cluster",)
    assert sleeps == [destroy.STACK_POLL_S] * polls
    assert said == ["c-cluster: deleting", "c-cluster: DELETE_IN_PROGRESS for 5 min",
                    f"c-cluster: deleted after {polls * destroy.STACK_POLL_S / 60:.0f} min"]
    stub.assert_no_pending_responses()
    monkeypatch.setattr(deleting, "STACK_LIMIT_S", 2 * destroy.STACK_POLL_S)
    stub.add_response("delete_stack", {}, {"StackName": stack_id})
    for _ in range(3):
        stub.add_response("describe_stacks", {"Stacks": [{"StackName": "c-cluster", "StackId": stack_id,
                                                          "CreationTime": WHEN, "StackStatus": "DELETE_IN_PROGRESS"}]},
                          {"StackName": stack_id})
    done, failed = destroy.execute(plan_of([stack]), {"cloudformation": cfn}.__getitem__, said.append, sleeps.append)
    assert done == () and failed.where == "c-cluster" and failed.reason == "still DELETE_IN_PROGRESS after 30 s"


# ---- finding the nodes: each plane's own APIs ---------------------------------------------------

def test_pcs_nodes_are_found_through_its_node_groups_and_their_instance_tags(aws):
    """Instances PCS launched carry its group's id, not always fmcluster's tags."""
    import boto3
    from botocore.stub import Stubber

    m = resolve(loader.load(ROOT / PCS_EXAMPLE).spec)
    ec2 = boto3.client("ec2", region_name=m.region)
    image = ec2.describe_images()["Images"][0]["ImageId"]
    for group, count in (("pcs_gpu0123", 2), ("pcs_login01", 1)):
        ec2.run_instances(ImageId=image, MinCount=count, MaxCount=count, TagSpecifications=[{
            "ResourceType": "instance", "Tags": [{"Key": nodes.PCS_GROUP_TAG, "Value": group}]}])
    pcs = boto3.client("pcs", region_name=m.region)
    stub = Stubber(pcs)
    common = {"createdAt": WHEN, "modifiedAt": WHEN, "status": "ACTIVE"}
    stub.add_response("list_clusters", {"clusters": [
        {"name": "someone-else", "id": "pcs_other0001", "arn": "arn:aws:pcs:::cluster/pcs_other0001", **common},
        {"name": "llm-pretrain", "id": "pcs_cluster01", "arn": "arn:aws:pcs:::cluster/pcs_cluster01", **common}]}, {})
    stub.add_response("list_compute_node_groups", {"computeNodeGroups": [
        {"name": name, "id": group, "arn": f"arn:aws:pcs:::computenodegroup/{group}", "clusterId": "pcs_cluster01",
         **common} for name, group in (("gpu", "pcs_gpu0123"), ("login", "pcs_login01"))]},
        {"clusterIdentifier": "pcs_cluster01"})
    stub.activate()
    found = nodes.up(m, {"ec2": ec2, "pcs": pcs}.__getitem__)
    assert [(n.group, n.compute) for n in found] == [("gpu", True), ("gpu", True), ("login", False)]
    stub.assert_no_pending_responses()


def test_hyperpod_nodes_are_found_through_list_cluster_nodes(aws):
    """SageMaker HyperPod's instances are not in the account's EC2: ListClusterNodes lists them."""
    import boto3
    from botocore.stub import Stubber

    m = resolve(loader.load(ROOT / HYPERPOD_EXAMPLE).spec)
    sagemaker = boto3.client("sagemaker", region_name=m.region)
    stub = Stubber(sagemaker)
    stub.add_response("list_clusters", {"ClusterSummaries": [{
        "ClusterName": "b200-train", "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
        "CreationTime": WHEN, "ClusterStatus": "InService"}]}, {"NameContains": "b200-train"})
    nodes_of = [("controller", "Running"), ("login", "Running"), ("train", "Running"), ("train", "ShuttingDown"),
                ("eval", "Pending")]
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [
        {"InstanceGroupName": group, "InstanceId": f"i-{n:017x}", "InstanceType": "ml.p6-b200.48xlarge",
         "LaunchTime": WHEN, "InstanceStatus": {"Status": status}} for n, (group, status) in enumerate(nodes_of)]},
        {"ClusterName": "b200-train"})
    stub.activate()
    found = nodes.up(m, {"ec2": boto3.client("ec2", region_name=m.region), "sagemaker": sagemaker}.__getitem__)
    assert [(n.group, n.state, n.compute) for n in found] == [
        ("eval", "Pending", True), ("train", "Running", True), ("controller", "Running", False),
        ("login", "Running", False)]


def test_eks_nodes_are_found_through_the_node_groups_and_their_instances(aws):
    import boto3

    m = resolve(loader.load(ROOT / "examples/p5en-eks.yaml").spec)
    eks = boto3.client("eks", region_name=m.region)
    eks.create_cluster(name=m.name, roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": ["subnet-1"]})
    eks.create_nodegroup(clusterName=m.name, nodegroupName="NodeGroupgpu-abc", subnets=["subnet-1"],
                         nodeRole="arn:aws:iam::123456789012:role/n", tags={"fmcluster:node-group": "gpu"})
    ec2 = boto3.client("ec2", region_name=m.region)
    image = ec2.describe_images()["Images"][0]["ImageId"]
    ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2, TagSpecifications=[{"ResourceType": "instance", "Tags": [
        {"Key": nodes.EKS_CLUSTER_TAG, "Value": m.name}, {"Key": nodes.EKS_GROUP_TAG, "Value": "NodeGroupgpu-abc"}]}])
    found = nodes.up(m, lambda service: boto3.client(service, region_name=m.region))
    assert [(n.group, n.compute) for n in found] == [("gpu", True), ("gpu", True)]


# ---- the command line ------------------------------------------------------------------------

def test_yes_without_with_data_is_an_invalid_command_line(capsys):
    assert main(["destroy", str(ROOT / PCS_EXAMPLE), "--yes=llm-pretrain"]) == 2
    assert capsys.readouterr().err == "error: --yes confirms --with-data: give both, or neither\n"


def test_without_credentials_it_says_so_in_one_error_and_exits_1(monkeypatch, capsys, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # boto3's default session as a new process has it: none yet. One an earlier test of this worker
    # made outside moto's mock (which restores the session it found) keeps the credentials it read
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    assert main(["destroy", str(ROOT / HYPERPOD_EXAMPLE)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "", captured
    error, hint = captured.err.splitlines()[-2:]
    assert error.startswith(f"error: {ROOT / HYPERPOD_EXAMPLE}: b200-train: cannot read the cluster's stacks in "
                            "us-east-1: Unable to locate credentials")
    assert hint.startswith("  hint: destroy reads with the default credentials")


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("typed, code", [("b200-train\n", 0), ("b200\n", 1), ("", 1)])
def test_the_name_is_asked_for_at_a_terminal(aws, corpus, monkeypatch, capsys, typed, code):
    spec, m = deploy(corpus, HYPERPOD_EXAMPLE)
    monkeypatch.setattr("sys.stdin", Terminal(typed))
    assert main(["destroy", str(ROOT / HYPERPOD_EXAMPLE), "--with-data"]) == code
    captured = capsys.readouterr()
    assert "This deletes the data of b200-train for good. Type the cluster's name to go on: " in captured.err
    assert captured.out.startswith("fmcluster destroy: b200-train in us-east-1, account 123456789012\n")
    gone = set(statuses(m).values()) == {"DELETE_COMPLETE"}
    assert gone == (code == 0)
    if code == 0:
        assert "fmcluster destroy: b200-train-storage: lifting its termination protection\n" in captured.err
        assert captured.out.endswith("nothing of b200-train is left in us-east-1\n")


def test_without_a_terminal_with_data_needs_yes(aws, corpus, monkeypatch, capsys):
    spec, m = deploy(corpus, HYPERPOD_EXAMPLE)
    monkeypatch.setattr("sys.stdin", io.StringIO("b200-train\n"))  # a pipe: not read
    assert main(["destroy", str(ROOT / HYPERPOD_EXAMPLE), "--with-data"]) == 1
    assert "nobody confirmed it" in capsys.readouterr().err
    assert set(statuses(m).values()) == {"CREATE_COMPLETE"}
    assert main(["destroy", str(ROOT / HYPERPOD_EXAMPLE), "--with-data", "--yes=b200-train"]) == 0
    assert set(statuses(m).values()) == {"DELETE_COMPLETE"}
