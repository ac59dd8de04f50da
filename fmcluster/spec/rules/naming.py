"""Names: unique node groups, bucket names, tags."""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import naming
from fmcluster.spec.diagnostics import Problem, error
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule

RESERVED_GROUP_NAMES = {"login", "controller", "system"}


@rule
def node_group_names_unique(spec: ClusterSpec) -> Iterator[Problem]:
    seen: dict[str, int] = {}
    for i, group in enumerate(spec.node_groups):
        if group.name in seen:
            yield error(("node_groups", i, "name"), f"node group name '{group.name}' is used twice",
                        f"node_groups[{seen[group.name]}] already has it; each group names a partition")
        seen.setdefault(group.name, i)


@rule
def node_group_names_not_reserved(spec: ClusterSpec) -> Iterator[Problem]:
    for i, group in enumerate(spec.node_groups):
        if group.name in RESERVED_GROUP_NAMES:
            yield error(("node_groups", i, "name"), f"'{group.name}' is reserved for the control plane's own nodes",
                        "choose another name, such as gpu or cpu")


@rule
def buckets_limit(spec: ClusterSpec) -> Iterator[Problem]:
    if len(spec.storage.buckets) > naming.MAX_BUCKETS:
        yield error(("storage", "buckets", naming.MAX_BUCKETS),
                    f"{len(spec.storage.buckets)} buckets; a cluster has at most {naming.MAX_BUCKETS}: each is named "
                    "in the node role's policies, which IAM caps at 10,240 characters",
                    "share a bucket between datasets with prefixes (storage.lustre.links take a prefix each)")


@rule
def bucket_names_unique(spec: ClusterSpec) -> Iterator[Problem]:
    seen = set()
    for i, bucket in enumerate(spec.storage.buckets):
        if bucket.name in seen:
            yield error(("storage", "buckets", i, "name"), f"bucket '{bucket.name}' is declared twice")
        seen.add(bucket.name)


@rule
def tags_valid(spec: ClusterSpec) -> Iterator[Problem]:
    """Tag keys and values as EC2 takes them (fmcluster.facts.naming), no reserved prefix or key, and
    no more than a resource can carry with fmcluster's own tags."""
    room = naming.MAX_TAGS - len(naming.OWN_TAGS)
    if len(spec.tags) > room:
        yield error(("tags",), f"{len(spec.tags)} tags; a resource takes at most {naming.MAX_TAGS}, and fmcluster "
                    f"puts {len(naming.OWN_TAGS)} of its own on each ({', '.join(naming.OWN_TAGS)})",
                    f"keep at most {room} tags")
    for key, value in spec.tags.items():
        path = ("tags", key)
        reserved = next((p for p in naming.RESERVED_TAG_PREFIXES if key.lower().startswith(p)), None)
        key_problem = naming.tag_text_problem(key)
        if reserved:
            owner = "AWS" if reserved == "aws:" else "fmcluster's own tags"
            yield error(path, f"tag key '{key}' uses the {reserved} prefix, reserved for {owner}", at_key=True)
        elif key == naming.NAME_TAG:
            yield error(path, "fmcluster names each resource with its own Name tag (such as CLUSTER-vpc)",
                        "use another key, such as Project", at_key=True)
        elif not 1 <= len(key) <= naming.TAG_KEY_MAX:
            yield error(path, f"tag keys are 1 to {naming.TAG_KEY_MAX} characters, not {len(key)}", at_key=True)
        elif key_problem:
            yield error(path, f"tag key '{key}': {key_problem}",
                        "letters, digits, spaces and _ . : / = + - @", at_key=True)
        value_problem = naming.tag_text_problem(value)
        if not value:
            yield error(path, "an empty tag value: CloudWatch alarms and dashboards take none, and the spec's tags "
                        "go on every resource", "give it a value, such as the team's name")
        elif len(value) > naming.TAG_VALUE_MAX:
            yield error(path, f"tag values are at most {naming.TAG_VALUE_MAX} characters, not {len(value)}")
        elif value_problem:
            yield error(path, f"tag value '{value}': {value_problem}", "letters, digits, spaces and _ . : / = + - @")


@rule
def bucket_s3_names_fit(spec: ClusterSpec) -> Iterator[Problem]:
    for i, bucket in enumerate(spec.storage.buckets):
        length = naming.bucket_name_length(spec.name, bucket.name, spec.region)
        if length > naming.S3_NAME_MAX:
            example = naming.bucket_name(spec.name, bucket.name, spec.region, "111122223333")
            yield error(("storage", "buckets", i, "name"),
                        f"the S3 bucket name would be {length} characters ({example}); S3 allows {naming.S3_NAME_MAX}",
                        "shorten the bucket name or the cluster name")


@rule
def bucket_s3_names_allowed(spec: ClusterSpec) -> Iterator[Problem]:
    reserved = next((p for p in naming.S3_RESERVED_PREFIXES if spec.name.startswith(p)), None)
    if reserved and spec.storage.buckets:
        yield error(("name",),
                    f"S3 bucket names cannot start with '{reserved}', and bucket names start with the cluster name",
                    "choose another cluster name")
