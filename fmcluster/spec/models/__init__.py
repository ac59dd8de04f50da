"""The cluster spec (v1): pydantic models with every default resolved.

Owns the spec's sections (`storage`, `compute`: the control plane and node groups, `operations`:
images, observability and health, `workloads`: serving and teams, `cluster`: the whole
`ClusterSpec`, its network and accepted warnings, and its JSON Schema), apart from the field
formats they are built of (`formats`: names, AZ IDs, CIDRs, ARNs, paths, each checked on its own
and reported with the type errors) and the models' base (`base`). Rules that relate several
fields live in `fmcluster.spec.rules`. Imports only `fmcluster.facts`, pydantic and the control
characters of `fmcluster.spec.diagnostics` (which no string of the spec may hold); the modules
import one another directly, never through this package.

No `from __future__ import annotations` in this package: with it every field annotation is a
string that pydantic must evaluate when it builds the models, about a third of the time
`fmcluster validate` spends here.

This package re-exports every name the one module it was made from had, for
`from fmcluster.spec.models import ClusterSpec`.
"""

from fmcluster.spec.models.base import Model, written
from fmcluster.spec.models.cluster import (
    KUBERNETES_PLANES,
    ONLY_FOR,
    AcceptedWarning,
    ClusterSpec,
    NetworkSpec,
    json_schema,
)
from fmcluster.spec.models.compute import (
    EVERYONE,
    CapacitySpec,
    LoginSpec,
    NodeGroupSpec,
    OrchestratorSpec,
    is_everyone,
)
from fmcluster.spec.models.formats import (
    AbsPath,
    AccessCidr,
    Account,
    AmiId,
    AzId,
    BucketName,
    Cidr,
    Email,
    GpuCount,
    GroupName,
    ImageRef,
    InstanceTypeName,
    LinkPath,
    Member,
    MemberGroup,
    MetadataIops,
    Name,
    Priority,
    Reason,
    Region,
    ReservationId,
    ResourceGroupArn,
    RoleArn,
    RuleId,
    S3Event,
    S3Prefix,
    ServedModelName,
    TeamName,
    Text,
    TrainingPlanArn,
    UltraServerType,
    Version,
    _pattern,
    region_problem,
)
from fmcluster.spec.models.operations import HealthSpec, ImagesSpec, ObservabilitySpec
from fmcluster.spec.models.storage import BucketSpec, HomeSpec, LustreLink, LustreSpec, StorageSpec
from fmcluster.spec.models.workloads import ServedModelSpec, ServingSpec, TeamSpec

__all__ = [
    "EVERYONE", "KUBERNETES_PLANES", "ONLY_FOR", "AbsPath", "AcceptedWarning", "AccessCidr", "Account", "AmiId",
    "AzId", "BucketName", "BucketSpec", "CapacitySpec", "Cidr", "ClusterSpec", "Email", "GpuCount", "GroupName",
    "HealthSpec", "HomeSpec", "ImageRef", "ImagesSpec", "InstanceTypeName", "LinkPath", "LoginSpec", "LustreLink",
    "LustreSpec", "Member", "MemberGroup", "MetadataIops", "Model", "Name", "NetworkSpec", "NodeGroupSpec",
    "ObservabilitySpec", "OrchestratorSpec", "Priority", "Reason", "Region", "ReservationId", "ResourceGroupArn",
    "RoleArn", "RuleId", "S3Event", "S3Prefix", "ServedModelName", "ServedModelSpec", "ServingSpec", "StorageSpec",
    "TeamName", "TeamSpec", "Text", "TrainingPlanArn", "UltraServerType", "Version", "_pattern", "is_everyone",
    "json_schema", "region_problem", "written",
]
