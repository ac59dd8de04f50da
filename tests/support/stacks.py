"""Building NAME-cluster in tests without its network and storage stacks, and reading its template.
Not a test module.

`network()` and `storage(spec)` stand in for the outputs of NAME-network and NAME-storage (the
stacks take any object with the same attributes: fmcluster_cdk/stacks/refs.py); `cluster(app, spec)`
builds the cluster stack of the spec's control plane on them, in an app `new_app()` makes as
fmcluster does (with cdk.json's context). Shared by the control planes' test modules in tests/cdk/
and by tests/node/ (FSX: the stand-in file system in a node script).
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Callable, Mapping, Union

from fmcluster.model.cluster import resolve
from fmcluster.node.program import LustreMount
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR, ROOT
from tests.support.specs import to_yaml

SUBNET = "subnet-0aaaaaaaaaaaaaaaa"
EFA_SG = "sg-0eeeeeeeeeeeeeeee"
NODE_SG = "sg-0dddddddddddddddd"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/0123abcd-0123-4567-89ab-0123456789ab"
FS_DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
FS_MOUNT = "abcdefgh"
HOME_DNS = "fs-0aaaaaaaaaaaaaaaa.fsx.us-east-1.amazonaws.com"  # the shared home (FSx for OpenZFS)
FSX = LustreMount(FS_DNS, FS_MOUNT, "/fsx")  # the stand-in file system, as a node's bootstrap mounts it


def load_spec(result):
    """The spec of a loader result, which must be valid."""
    assert result.ok, [d.format() for d in result.diagnostics]
    return result.spec


def example_spec(file: str):
    """The spec of examples/FILE, which must be valid."""
    return load_spec(loader.load(EXAMPLES_DIR / file))


SpecSource = Union[str, Path, Callable[[], dict]]  # an example (examples/FILE, or a path), or what makes a spec


def loaded_specs(sources: Mapping[str, SpecSource]) -> Callable[[], dict[str, Any]]:
    """A test module's `specs()`: its specs by key, loaded and checked once, at the first call, in the
    order of `sources`. A source is an example (a file name in examples/, or a path) or a function
    that makes the spec as a dict (loaded as KEY.yaml)."""
    loaded: dict[str, Any] = {}

    def specs() -> dict[str, Any]:
        if not loaded:
            for key, source in sources.items():
                loaded[key] = (load_spec(loader.load_text(to_yaml(source()), f"{key}.yaml")) if callable(source)
                               else load_spec(loader.load(EXAMPLES_DIR / source)))
        return loaded

    return specs


def network():
    return types.SimpleNamespace(
        vpc_id="vpc-0aaaaaaaaaaaaaaaa", gpu_subnet_id=SUBNET, private_subnet_ids=[SUBNET, "subnet-0bbbbbbbbbbbbbbbb"],
        region_subnet_ids=[SUBNET, "subnet-0bbbbbbbbbbbbbbbb"],
        efa_security_group_id=EFA_SG, node_security_group_id=NODE_SG)


def storage(spec, kms_key_arn=None):
    names = {b.name: f"{spec.name}-{b.name}-111122223333-use1" for b in spec.storage.buckets}
    lustre = spec.storage.lustre is not None
    return types.SimpleNamespace(
        bucket_names=names, bucket_arns={k: f"arn:aws:s3:::{v}" for k, v in names.items()}, kms_key_arn=kms_key_arn,
        file_system_id="fs-0123456789abcdef0" if lustre else None, file_system_dns_name=FS_DNS if lustre else None,
        file_system_mount_name=FS_MOUNT if lustre else None,
        accounting_database=ACCOUNTING_DATABASE if spec.teams and spec.orchestrator.type == "hyperpod-slurm" else None,
        home_dns_name=HOME_DNS if spec.storage.home is not None else None)


# NAME-storage's Slurm accounting database, as the HyperPod Slurm stack reads it
ACCOUNTING_DATABASE = types.SimpleNamespace(
    endpoint="b200-train.c0ffee.us-east-1.rds.amazonaws.com", port=3306,
    secret=types.SimpleNamespace(
        secret_arn="arn:aws:secretsmanager:us-east-1:111122223333:secret:SlurmAccounting-AbCdEf"))


def image_id(key: str) -> str:
    """The stand-in AMI of a node image (NAME-images' output)."""
    import hashlib

    return "ami-" + hashlib.sha256(key.encode()).hexdigest()[:17]


def images(model):
    """Stand-in NAME-images refs of a model's node images (None when it bakes none)."""
    if not model.images:
        return None
    return types.SimpleNamespace(image_ids={image.key: image_id(image.key) for image in model.images},
                                 identities={image.key: image_identity(image) for image in model.images})


def image_identity(image) -> str:
    """The stand-in identity of a node image: NAME-images' (its documents, base, revision...)."""
    from fmcluster.node.image import documents
    from fmcluster_cdk.stacks.images import identity

    return identity(image, documents(image).digest)


def cluster(app, spec, *, stack_id: str | None = None, observability=None):
    """NAME-cluster of `spec` for its control plane (fmcluster_cdk.stacks.cluster.cluster_stack, as the app
    builds it) on the stand-in network, storage and images; shared by the control planes' test modules."""
    import aws_cdk as cdk

    from fmcluster_cdk.stacks.cluster import cluster_stack

    model = resolve(spec)
    return cluster_stack(app, stack_id or f"{spec.name}-cluster", model=model, network=network(),
                         storage=storage(spec, KMS_KEY if spec.storage.kms else None),
                         env=cdk.Environment(region=spec.region), observability=observability, images=images(model))


def new_app(outdir: Path | None = None):
    """An app as fmcluster makes them (fmcluster_cdk.synthesis.new_app), with cdk.json's context."""
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.synthesis import new_app as fmcluster_app

    return fmcluster_app(str(outdir) if outdir else None, app_context(cdk_json(ROOT)))


def resources(template, type_):
    return {lid: r["Properties"] for lid, r in template["Resources"].items() if r["Type"] == type_}


def launch_templates(template):
    """{node-group name (from the instance tag): LaunchTemplateData}."""
    out = {}
    for props in resources(template, "AWS::EC2::LaunchTemplate").values():
        data = props["LaunchTemplateData"]
        tags = {t["Key"]: t["Value"] for t in data["TagSpecifications"][0]["Tags"]}
        out[tags["fmcluster:node-group"]] = data
    return out


def joined(value) -> str:
    """A Fn::Join / Fn::Sub / Ref value flattened to a readable string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(joined(v) for v in value)
    if "Fn::Join" in value:
        return value["Fn::Join"][0].join(joined(v) for v in value["Fn::Join"][1])
    if "Fn::Sub" in value:
        return value["Fn::Sub"]
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    return json.dumps(value, sort_keys=True)
