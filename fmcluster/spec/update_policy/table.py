"""The update policy of every field of the spec (POLICIES), in the order of the models' fields, and
how to read it: a field's policy by its path, the fields of an effect, what the data-losing
changes of some fields replace or remove, every field's path."""

from __future__ import annotations

import re
import typing
from typing import Any, Iterator

from pydantic import BaseModel

from fmcluster.spec.models import ONLY_FOR, ClusterSpec
from fmcluster.spec.update_policy.cases import (
    BUCKET,
    DATA_LOSS,
    DATABASE,
    EKS,
    FILE_SYSTEM,
    HYPERPOD,
    HYPERPOD_EKS,
    HYPERPOD_SLURM,
    IN_PLACE,
    KEY,
    KUBERNETES,
    LINK,
    NEW_CLUSTER,
    NODEGROUP,
    NOTHING,
    PCS,
    PLACEMENT_GROUP,
    PLANES,
    REFUSED,
    REPLACE,
    ROLL,
    SECRET,
    SECURITY_GROUP,
    SLURM,
    VOLUME,
    Case,
    Policy,
)
from fmcluster.spec.update_policy.checks import (
    both_name_an_account,
    bucket_goes,
    eks_capacity_changes,
    email_changes,
    extra_zone_goes,
    grafana_goes,
    grafana_stays,
    has_placement_groups,
    home_added_or_changed,
    home_goes,
    home_shrinks,
    image_changes,
    kubernetes_home_with_teams,
    kubernetes_version_refused,
    last_team_goes,
    leaves_slurm,
    link_goes,
    lustre_goes,
    lustre_shrinks,
    metrics_go,
    observed,
    on_capacity_block,
    on_spot,
    on_training_plan,
    placement_changes,
    plane_data_goes,
    reference_goes,
    spot_changes,
    team_volume_goes,
)


def _only_for(path: str, *cases: Case) -> Policy:
    """A field only some control planes read (fmcluster.spec.models.cluster.ONLY_FOR): nothing on the others."""
    others = tuple(p for p in PLANES if p not in ONLY_FOR[path])
    return Policy((Case(NOTHING, "the control plane does not read it", planes=others), *cases))


def _policy(*cases: Case) -> Policy:
    return Policy(cases)


SECTION = Policy()
_CONSUMERS = ("the other stacks import NAME-network's subnet ids, which CloudFormation does not change while they do: "
              "its update fails and rolls back")
_ONE_ACCOUNT = "where only one spec names one (the other deploys to the account of the credentials)"
_FS_AT_CREATION = "the file system is replaced (set at creation), its links with it"

# ---- the table --------------------------------------------------------------------------------
# In the order of the models' fields (tests/spec/test_update_policy.py walks them); each case is held
# against the templates in tests/deploy/test_update_claims.py.
POLICIES: dict[str, Policy] = {
    "name": _policy(Case(NEW_CLUSTER, "every stack's name derives from it: NEW's stacks stand beside OLD's, with new, "
                                      "empty storage, and OLD's keep their data")),
    "region": _policy(Case(NEW_CLUSTER, "NEW's stacks are made in the other region, with new, empty storage, and "
                                        "OLD's keep their data")),
    "account": _policy(
        Case(NEW_CLUSTER, "NEW's stacks are made in the other account, with new, empty storage",
             when="both specs name one", check=both_name_an_account),
        Case(REPLACE, f"{_ONE_ACCOUNT}: the stacks name the account, and kubectl's Lambda layer is replaced",
             planes=KUBERNETES, nodes=(HYPERPOD_EKS,), resources=("AWS::Lambda::LayerVersion",)),
        Case(ROLL, f"{_ONE_ACCOUNT}: the stacks name the account, the nodes' scripts too", nodes=SLURM)),
    "availability_zone_id": _policy(Case(REFUSED, f"its subnets are replaced, and {_CONSUMERS}")),
    "network": SECTION,
    "network.vpc_cidr": _policy(Case(REFUSED, f"the VPC and its subnets are replaced, and {_CONSUMERS}")),
    "network.extra_availability_zone_ids": _policy(
        Case(REFUSED, f"its subnet is replaced or goes, and {_CONSUMERS}", planes=(HYPERPOD_SLURM, *KUBERNETES),
             when="an AZ ID goes or changes", check=extra_zone_goes),
        Case(IN_PLACE, "a subnet for each new AZ ID")),
    "storage": SECTION,
    "storage.buckets": _policy(
        Case(DATA_LOSS, "the bucket leaves the stack (retained outside it, no longer the cluster's), its links with it",
             when="a bucket goes", check=bucket_goes, resources=(BUCKET,)),
        Case(IN_PLACE, "a new bucket")),
    "storage.buckets[].name": _policy(Case(DATA_LOSS, "another name is another, empty bucket: the old one leaves the "
                                                      "stack (retained outside it), its links are replaced",
                                           resources=(BUCKET, LINK))),
    "storage.buckets[].versioned": _policy(Case(IN_PLACE)),
    "storage.lustre": _policy(
        Case(DATA_LOSS, "the file system leaves the stack (retained outside it), with its links and security group",
             when="it goes", check=lustre_goes, nodes=SLURM, resources=(FILE_SYSTEM, LINK, SECURITY_GROUP)),
        Case(ROLL, "a new file system, which the nodes mount", planes=SLURM, nodes=SLURM),
        Case(IN_PLACE, "a new file system and its claim")),
    "storage.lustre.storage_capacity_gib": _policy(
        Case(REFUSED, "FSx for Lustre storage only grows: FSx refuses the update", when="it shrinks",
             check=lustre_shrinks),
        Case(IN_PLACE)),
    "storage.lustre.deployment_type": _policy(Case(DATA_LOSS, _FS_AT_CREATION, nodes=(PCS,),
                                                   resources=(FILE_SYSTEM, LINK))),
    "storage.lustre.throughput_per_tib": _policy(Case(IN_PLACE)),
    "storage.lustre.compression": _policy(Case(IN_PLACE)),
    "storage.lustre.metadata_iops": _policy(Case(IN_PLACE)),
    "storage.lustre.efa": _policy(Case(DATA_LOSS, _FS_AT_CREATION, nodes=(PCS, EKS, HYPERPOD_EKS),
                                       resources=(FILE_SYSTEM, LINK))),
    "storage.lustre.mount_path": _policy(
        Case(NOTHING, "pods mount the claim where they want it", planes=KUBERNETES),
        Case(ROLL, "the nodes mount the file system there", nodes=SLURM)),
    "storage.lustre.links": _policy(
        Case(IN_PLACE, "the link is deleted (its files stay in the file system and the bucket)", when="a link goes",
             check=link_goes),
        Case(IN_PLACE, "a new link")),
    "storage.lustre.links[].bucket": _policy(Case(REPLACE, "the link is replaced", resources=(LINK,))),
    "storage.lustre.links[].path": _policy(Case(IN_PLACE, "the link at the old path is deleted and one at the new "
                                                          "path made (its files stay in the file system)")),
    "storage.lustre.links[].prefix": _policy(Case(REPLACE, "the link is replaced", resources=(LINK,))),
    "storage.lustre.links[].import": _policy(Case(IN_PLACE)),
    "storage.lustre.links[].export": _policy(Case(IN_PLACE)),
    "storage.home": _policy(
        Case(DATA_LOSS, "the file system leaves the stack (retained outside it), with its security group (and on "
                        "Kubernetes the teams' volumes)", when="it goes", check=home_goes, nodes=SLURM,
             resources=(FILE_SYSTEM, VOLUME, SECURITY_GROUP)),
        Case(ROLL, "HyperPod mounts the home only on the nodes it provisions, and the nodes copy the image's home "
                   "directories in at their first boot: the running nodes keep the home they had until they are "
                   "replaced", planes=(HYPERPOD_SLURM,), when="it is added or changed", check=home_added_or_changed,
             nodes=(HYPERPOD_SLURM,), unseen=True),
        Case(ROLL, "the nodes mount the new home", planes=(PCS,), nodes=(PCS,)),
        Case(IN_PLACE, "a new file system and its claims")),
    "storage.home.storage_capacity_gib": _policy(
        Case(REFUSED, "FSx for OpenZFS storage only grows: FSx refuses the update", when="it shrinks",
             check=home_shrinks),
        Case(IN_PLACE)),
    "storage.home.deployment_type": _policy(Case(DATA_LOSS, "the file system is replaced (set at creation), and on "
                                                            "Kubernetes the teams' volumes of it", nodes=(PCS,),
                                                 resources=(FILE_SYSTEM, VOLUME))),
    "storage.home.throughput_mbps": _policy(Case(IN_PLACE)),
    "storage.home.compression": _policy(Case(DATA_LOSS, "the root volume's compression is set at creation: the file "
                                                        "system is replaced", nodes=(PCS,),
                                             resources=(FILE_SYSTEM, VOLUME))),
    "storage.kms": _policy(Case(
        DATA_LOSS, "the file systems' key is set at creation: they are replaced (hyperpod-slurm's accounting database "
                   "too, and an EKS cluster); without it, the key leaves the stack", nodes=(PCS, EKS, HYPERPOD_EKS),
        resources=(FILE_SYSTEM, VOLUME, DATABASE, KEY))),
    "images": SECTION,
    "images.revision": _policy(
        Case(REPLACE, "the node images are built again, and the reference image", planes=SLURM, nodes=SLURM,
             resources=("AWS::ImageBuilder::Image",)),
        Case(REPLACE, "the reference image is built again", resources=("AWS::ImageBuilder::Image",))),
    "images.reference": _policy(
        Case(IN_PLACE, "the reference image's builds and repository leave NAME-reference", when="it is turned off",
             check=reference_goes),
        Case(IN_PLACE, "NAME-reference builds the reference image")),
    "orchestrator": SECTION,
    "orchestrator.type": _policy(
        Case(DATA_LOSS, "another control plane: the old one goes, with its data", when="the old control plane holds "
             "data of its own (hyperpod-slurm's Slurm accounting database; a Kubernetes plane's volumes of the home "
             "for its teams)", check=plane_data_goes, resources=(DATABASE, SECRET, VOLUME)),
        Case(REPLACE, "another control plane: the cluster and its node groups are replaced, their nodes with them",
             when="it leaves a Slurm plane", check=leaves_slurm,
             resources=("AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::PCS::Cluster")),
        Case(IN_PLACE, "another control plane: the old one's cluster and node groups are removed, their nodes with "
                       "them, and the new one's made")),
    "orchestrator.version": _policy(
        Case(NOTHING, "HyperPod's Slurm has one version", planes=(HYPERPOD_SLURM,)),
        Case(REFUSED, "EKS updates a cluster one minor version at a time, and never down: the update fails",
             planes=KUBERNETES, when="it goes down, or up by more than one minor version",
             check=kubernetes_version_refused),
        Case(IN_PLACE, "the control plane is upgraded in place; the node groups keep their version",
             planes=KUBERNETES),
        Case(REPLACE, "the node images are built again with the new Slurm, and the node groups take it",
             nodes=(PCS,), resources=("AWS::ImageBuilder::Image",))),
    "orchestrator.login": SECTION,
    "orchestrator.login.instance_type": _policy(
        Case(ROLL, "new nodes only", planes=(HYPERPOD_SLURM,), nodes=(HYPERPOD_SLURM,)),
        Case(REPLACE, "the login (or system) node group is replaced, its nodes with it",
             nodes=(PCS, EKS, HYPERPOD_EKS), resources=("AWS::PCS::ComputeNodeGroup", NODEGROUP))),
    "orchestrator.login.count": _policy(Case(IN_PLACE)),
    "orchestrator.admin_role_arn": _only_for("orchestrator.admin_role_arn", Case(IN_PLACE, "its access entry")),
    "orchestrator.endpoint_access": _only_for("orchestrator.endpoint_access", Case(IN_PLACE)),
    "orchestrator.public_access_cidrs": _only_for("orchestrator.public_access_cidrs", Case(IN_PLACE)),
    "orchestrator.namespace": _only_for("orchestrator.namespace", Case(IN_PLACE, "the claims and queue move to the "
                                                                                 "new namespace")),
    "node_groups": _policy(Case(IN_PLACE, "a group added, or one removed with its nodes")),
    "node_groups[].name": _policy(Case(IN_PLACE, "another name is another group: the old one goes with its nodes, "
                                                 "a new one is made")),
    "node_groups[].instance_type": _policy(
        Case(ROLL, "HyperPod launches the new type for new nodes only", planes=HYPERPOD, nodes=HYPERPOD),
        Case(REPLACE, "the node group is replaced, its nodes with it", nodes=(PCS, EKS),
             resources=("AWS::PCS::ComputeNodeGroup", NODEGROUP))),
    "node_groups[].count": _policy(Case(IN_PLACE)),
    "node_groups[].min_count": _policy(Case(IN_PLACE)),
    "node_groups[].max_count": _policy(Case(IN_PLACE)),
    "node_groups[].capacity": SECTION,
    "node_groups[].capacity.type": _policy(
        Case(IN_PLACE, "HyperPod's instance groups take it in place", planes=HYPERPOD),
        Case(REPLACE, "the node group's capacity type is set at creation: it is replaced, its nodes with it",
             planes=(EKS,), when="it goes to or from spot or a Capacity Block", check=eks_capacity_changes,
             nodes=(EKS,), resources=(NODEGROUP,)),
        Case(ROLL, "its placement group comes or goes: new nodes only (EKS rolls the group)", when="the group gets "
             "or loses its cluster placement group", check=placement_changes, nodes=(PCS, EKS)),
        Case(ROLL, "the group's lifecycle scripts start or stop watching for spot interruption notices: new nodes "
             "only", planes=(PCS,), when="it goes to or from spot", check=spot_changes, nodes=(PCS,)),
        Case(IN_PLACE)),
    "node_groups[].capacity.reservation_id": _policy(
        Case(NOTHING, "HyperPod reserves capacity with training plans", planes=HYPERPOD),
        Case(ROLL, "the launch template names it: new nodes only (EKS rolls the group)", nodes=(PCS, EKS))),
    "node_groups[].capacity.reservation_resource_group_arn": _policy(
        Case(NOTHING, "HyperPod reserves capacity with training plans", planes=HYPERPOD),
        Case(ROLL, "the launch template names it: new nodes only (EKS rolls the group)", nodes=(PCS, EKS))),
    "node_groups[].capacity.training_plan_arn": _only_for("node_groups[].capacity.training_plan_arn", Case(
        ROLL, "the instance group takes the plan, and its lifecycle scripts the plan's end: new nodes only",
        planes=(HYPERPOD_SLURM,), nodes=(HYPERPOD_SLURM,)), Case(IN_PLACE, "the instance group takes the plan")),
    "node_groups[].capacity.ultraserver_type": _policy(Case(NOTHING, "read by validate and the plan: what the "
                                                                     "group's count may be")),
    "node_groups[].capacity.ultraserver_count": _policy(Case(NOTHING, "read by validate and the plan: what the "
                                                                      "group's count may be")),
    "node_groups[].capacity.end_signal_minutes": _policy(
        Case(ROLL, "the Capacity Block group's lifecycle scripts carry it: new nodes only", planes=(PCS,),
             when="the group is on a Capacity Block", check=on_capacity_block, nodes=(PCS,)),
        Case(ROLL, "the training-plan group's lifecycle scripts carry it: new nodes only", planes=(HYPERPOD_SLURM,),
             when="the group is on a training plan", check=on_training_plan, nodes=(HYPERPOD_SLURM,)),
        Case(IN_PLACE, "the group's capacity-end function takes it (its environment)", planes=(EKS,),
             when="the group is on a Capacity Block", check=on_capacity_block),
        Case(IN_PLACE, "the group's capacity-end function takes it (its environment)", planes=(HYPERPOD_EKS,),
             when="the group is on a training plan", check=on_training_plan),
        Case(NOTHING, "read by the nodes of AWS PCS Capacity Block and HyperPod Slurm training-plan groups, and by "
                      "the capacity-end functions of EKS Capacity Block and HyperPod EKS training-plan groups, only")),
    "node_groups[].capacity.end_signal": _policy(
        Case(ROLL, "the Capacity Block group's lifecycle scripts carry it: new nodes only", planes=(PCS,),
             when="the group is on a Capacity Block", check=on_capacity_block, nodes=(PCS,)),
        Case(ROLL, "the spot group's lifecycle scripts carry it: new nodes only", planes=(PCS,),
             when="the group is on spot", check=on_spot, nodes=(PCS,)),
        Case(ROLL, "the training-plan group's lifecycle scripts carry it: new nodes only", planes=(HYPERPOD_SLURM,),
             when="the group is on a training plan", check=on_training_plan, nodes=(HYPERPOD_SLURM,)),
        Case(NOTHING, "read by the nodes of AWS PCS Capacity Block and spot groups and HyperPod Slurm training-plan "
                      "groups only")),
    "node_groups[].placement_group": _policy(
        Case(NOTHING, "HyperPod places the instances itself", planes=HYPERPOD),
        Case(ROLL, "the launch template names the placement group: new nodes only (EKS rolls the group)",
             nodes=(PCS, EKS))),
    "node_groups[].efa": _policy(
        Case(REPLACE, "the instance group's network interfaces change: the HyperPod cluster may be replaced",
             planes=HYPERPOD, nodes=HYPERPOD, resources=("AWS::SageMaker::Cluster",)),
        Case(ROLL, "the launch template's network interfaces change: its nodes are replaced", nodes=(PCS, EKS))),
    "node_groups[].root_volume_gib": _policy(
        Case(IN_PLACE, "HyperPod's instance groups take it for new nodes", planes=HYPERPOD),
        Case(ROLL, "the launch template changes: new nodes only (EKS rolls the group)", nodes=(PCS, EKS))),
    "node_groups[].ami_id": _policy(
        Case(ROLL, "the new image boots new nodes only (HyperPod: until UpdateClusterSoftware)", planes=HYPERPOD,
             nodes=HYPERPOD),
        Case(REPLACE, "EKS replaces the node group for another image", planes=(EKS,), nodes=(EKS,),
             resources=(NODEGROUP,)),
        Case(REPLACE, "the baked node image is built again for the groups that keep it; the new image boots new "
                      "nodes only", planes=(PCS,), when="the group leaves the baked image or comes back to it",
             check=image_changes, nodes=(PCS,), resources=("AWS::ImageBuilder::Image",)),
        Case(ROLL, "the new image boots new nodes only", nodes=(PCS,))),
    "node_groups[].labels": _only_for("node_groups[].labels", Case(IN_PLACE, "EKS relabels the group's nodes")),
    "node_groups[].team": _policy(
        Case(IN_PLACE, "the team's quotas and its cost allocation tag", planes=HYPERPOD),
        Case(ROLL, "the launch template tags the instances with the team: new nodes only (EKS rolls the group)",
             nodes=(PCS, EKS))),
    "observability": SECTION,
    "observability.prometheus": _policy(
        Case(DATA_LOSS, "the metrics workspace leaves the stack with its metrics, and the nodes stop sending them",
             when="it goes and Grafana with it", check=metrics_go, nodes=PLANES,
             resources=("AWS::APS::Workspace",)),
        Case(NOTHING, "Grafana keeps the workspace", when="Grafana stays on", check=grafana_stays),
        Case(ROLL, "a metrics workspace, which the nodes send their metrics to", nodes=PLANES)),
    "observability.grafana": _policy(
        Case(DATA_LOSS, "the dashboards workspace leaves the stack", when="it goes", check=grafana_goes,
             resources=("AWS::Grafana::Workspace",)),
        Case(IN_PLACE, "a dashboards workspace")),
    "observability.alert_email": _policy(
        Case(REPLACE, "the e-mail subscription is replaced: confirm the new one", when="it changes",
             check=email_changes, resources=("AWS::SNS::Subscription",)),
        Case(IN_PLACE, "the subscription is added or deleted")),
    "tags": _policy(
        Case(ROLL, "every resource is tagged in place; the launch templates too: new nodes only (EKS rolls the "
                   "groups)", planes=(HYPERPOD_EKS,), nodes=(HYPERPOD_EKS,)),
        Case(IN_PLACE, "every resource is tagged in place", planes=(HYPERPOD_SLURM,)),
        Case(REPLACE, "a cluster placement group's tags are set at creation: it is replaced; the launch templates "
                      "are tagged: new nodes only (EKS rolls the groups)", when="a node group has one",
             check=has_placement_groups, nodes=(PCS, EKS), resources=(PLACEMENT_GROUP,)),
        Case(ROLL, "every resource is tagged in place; the launch templates too: new nodes only (EKS rolls the "
                   "groups)", nodes=(PCS, EKS))),
    "protect": _policy(Case(NOTHING, "termination protection is a setting of the stacks, not of their templates")),
    "serving": _policy(Case(NOTHING, "the serving jobs are the kit's (fmcluster jobs), not the stacks'")),
    "serving.model": SECTION,
    "serving.model.name": _policy(Case(NOTHING, "read by the kit's serving jobs")),
    "serving.model.path": _policy(Case(NOTHING, "read by the kit's serving jobs")),
    "serving.model.parameters_billions": _policy(Case(NOTHING, "read by the plan and the kit")),
    "serving.model.dtype": _policy(Case(NOTHING, "read by the plan and the kit")),
    "serving.node_group": _policy(Case(NOTHING, "read by the plan and the kit")),
    "serving.replicas": _policy(Case(NOTHING, "read by the plan and the kit")),
    "serving.engine": _policy(Case(NOTHING, "read by the kit's serving jobs")),
    "serving.image": _policy(Case(NOTHING, "read by the kit's serving jobs")),
    "serving.gpu_memory_utilization": _policy(Case(NOTHING, "read by the plan and the kit")),
    "serving.max_model_len": _policy(Case(NOTHING, "read by the plan and the kit")),
    "health": SECTION,
    "health.check_minutes": _policy(
        Case(ROLL, "the GPU groups' lifecycle scripts carry it", planes=SLURM, nodes=SLURM),
        Case(ROLL, "the GPU groups' user data carries it: EKS rolls them", planes=(EKS,),
             when="the nodes run the check (observability on)", check=observed, nodes=(EKS,)),
        Case(NOTHING, "the nodes do not run fmcluster's check (HyperPod's agent watches them)")),
    "health.replace": _policy(
        Case(ROLL, "the GPU groups' lifecycle scripts carry it; the replacer comes or goes", planes=SLURM,
             nodes=SLURM),
        Case(IN_PLACE, "EKS node repair (or HyperPod's node recovery) changes in place")),
    "health.max_replacing": _policy(
        Case(NOTHING, "HyperPod's node recovery has no such limit", planes=(HYPERPOD_EKS,)),
        Case(IN_PLACE, "the replacer's limit (EKS node repair's)")),
    "health.deep_check": _policy(
        Case(REPLACE, "the node images carry the deep check: they are built again, and the GPU groups' lifecycle "
                      "scripts change", planes=(PCS,), nodes=(PCS,), resources=("AWS::ImageBuilder::Image",)),
        Case(IN_PLACE, "HyperPod's deep health checks of the nodes it creates from then on",
             planes=HYPERPOD),
        Case(NOTHING, "EKS has no deep check of new nodes")),
    "teams": _policy(
        Case(REFUSED, "Slurm accounting would go off: AWS PCS cannot turn it off, HyperPod cannot detach its "
                      "accounting database", planes=SLURM, when="the last team goes", check=last_team_goes),
        Case(DATA_LOSS, "the team's volume of the home goes", planes=KUBERNETES,
             when="a team goes from a cluster with a shared home", check=team_volume_goes, resources=(VOLUME,)),
        Case(IN_PLACE, "quotas apply to jobs admitted from then on")),
    "teams[].name": _policy(
        Case(DATA_LOSS, "another name is another team: the old one's volume of the home goes", planes=KUBERNETES,
             when="the cluster has a shared home", check=kubernetes_home_with_teams, resources=(VOLUME,)),
        Case(IN_PLACE, "another name is another team: its Slurm account or namespace")),
    "teams[].members": _policy(Case(IN_PLACE, "its account's users (Slurm) or its access entries (Kubernetes)")),
    "teams[].groups": _policy(Case(IN_PLACE)),
    "teams[].gpus": _policy(Case(IN_PLACE, "quotas apply to jobs admitted from then on")),
    "teams[].share": _policy(Case(IN_PLACE, "quotas apply to jobs admitted from then on")),
    "teams[].borrow": _policy(Case(IN_PLACE, "quotas apply to jobs admitted from then on")),
    "teams[].lend": _policy(
        Case(NOTHING, "Slurm has no lending limit", planes=SLURM),
        Case(IN_PLACE, "the lending limit of its ClusterQueue")),
    "teams[].priority": _policy(
        Case(NOTHING, "a job names its priority class itself", planes=KUBERNETES),
        Case(IN_PLACE, "its account's QOSes")),
    "accepted_warnings": _policy(Case(NOTHING, "read by validate")),
    "accepted_warnings[].rule": _policy(Case(NOTHING, "read by validate")),
    "accepted_warnings[].reason": _policy(Case(NOTHING, "read by validate")),
    "accepted_warnings[].path": _policy(Case(NOTHING, "read by validate")),
}


# ---- reading it -------------------------------------------------------------------------------

def policy(path: str) -> Policy:
    """A field's policy, by its dotted path (an index stands for every item: node_groups[2].name is
    node_groups[].name)."""
    return POLICIES[re.sub(r"\[\d+\]", "[]", path)]


def fields(effect: str) -> tuple[str, ...]:
    """The fields that have a case of `effect`, in the table's order."""
    return tuple(path for path, p in POLICIES.items() if any(c.effect == effect for c in p.cases))


def value(spec: BaseModel, path: str) -> Any:
    """The value of a field outside any list (`health.check_minutes`) in a spec."""
    found: Any = spec
    for name in path.split("."):
        found = getattr(found, name)
    return found


def lost_with_data(prefix: str) -> tuple[str, ...]:
    """Every CloudFormation type the data-losing cases of the fields under `prefix` name (what such a
    change replaces or removes, with the data), in the table's order."""
    found: list[str] = []
    for path, p in POLICIES.items():
        if path == prefix or path.startswith(f"{prefix}."):
            found += [t for c in p.cases if c.effect == DATA_LOSS for t in c.resources if t not in found]
    return tuple(found)


def _models(annotation: Any) -> Iterator[tuple[type[BaseModel], bool]]:
    """The models a field's annotation holds, each with whether it is a list's item."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, False
        return
    listed = typing.get_origin(annotation) is list
    for inner in typing.get_args(annotation):
        for model, item in _models(inner):
            yield model, item or listed


def field_paths(model: type[BaseModel] = ClusterSpec, prefix: str = "") -> Iterator[str]:
    """Every field of the spec's models, depth first, by dotted path as the file writes it (aliases;
    `[]` for the items of a list)."""
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        yield path
        for inner, item in _models(info.annotation):
            yield from field_paths(inner, path + ("[]." if item else "."))
