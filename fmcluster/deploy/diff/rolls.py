"""The node groups a change reaches: those whose running nodes it replaces, or whose new nodes
only take it (fmcluster.deploy.node_roll, marked on their changes), and those that roll to a new
build of their node image in NAME-images."""

from __future__ import annotations

import re
from typing import Any, Mapping

from fmcluster.deploy import node_roll
from fmcluster.deploy.diff.changes import (
    ADD,
    LABELS,
    MAY_REPLACE,
    REPLACE,
    UPDATE,
    Change,
    Comparison,
    Roll,
    StackDiff,
    Templates,
    resources_of,
)
from fmcluster.deploy.diff.references import Resolver
from fmcluster.facts import images as image_facts
from fmcluster.model import cluster as model


def mark_node_rolls(old: Templates, new: Templates, changes: dict[tuple[str, str], Change], stacks: list[StackDiff],
                resolver: Resolver) -> list[node_roll.NodeRoll]:
    """The node groups whose running nodes the change replaces, or whose new nodes only take it
    (fmcluster.deploy.node_roll), each marked on its change. A group whose own text is the same
    but whose launch template gets a new version (CloudFormation's LatestVersionNumber), or whose
    scripts' arguments name a replaced resource, is an update of the group too: it is added, with
    what changes at deploy among its paths."""
    replaced = {key for key, c in changes.items() if c.action in (REPLACE, MAY_REPLACE)}
    rolls = node_roll.find(old, new, changes, replaced, resolver.targets)
    by_stack = {s.name: s for s in stacks}
    for roll in rolls:
        change = changes.get((roll.stack, roll.logical_id))
        if change is None:
            resource = resources_of(new[roll.stack])[roll.logical_id]
            change = Change(roll.stack, roll.logical_id, resource["Type"], UPDATE)
            changes[(roll.stack, roll.logical_id)] = change
            by_stack[roll.stack].changes.append(change)
            by_stack[roll.stack].changes.sort(key=lambda c: c.logical_id)
            by_stack[roll.stack].status = "changed"
        change.paths += [p for p in roll.implied if p not in change.paths]
        if change.nodes != node_roll.REPLACED:  # a HyperPod cluster holds several groups: the strongest
            change.nodes = roll.effect
    return rolls


IMAGE = "AWS::ImageBuilder::Image"
CDK_PATH = "aws:cdk:path"


def _construct_token(key: str) -> str:
    """How a construct id appears in CDK's logical ids: its letters and digits ('pcs-x86_64' ->
    'pcsx8664')."""
    return re.sub(r"[^A-Za-z0-9]", "", key)


def _of_image(key: str, lid: str, resource: Mapping[str, Any]) -> bool:
    """Whether a resource of NAME-images belongs to the node image `key`: it sits under the construct
    of that key (its construct path where the template keeps it, else its logical id)."""
    path = str(resource.get("Metadata", {}).get(CDK_PATH, ""))
    if path:
        return f"/{key}/" in path
    return _construct_token(key) in lid


PCS_ROLL = ("AWS PCS takes the new AMI as the compute node groups' AMI ({images} hands it to {cluster} by "
            "a cross-stack reference; the groups carry the image's identity, so {cluster} changes with it and "
            "its deploy reads the new AMI); instances launched after the "
            "update (new dynamic nodes, replaced static ones) boot from it, running instances keep the image they "
            "booted from until they are replaced")
HYPERPOD_ROLL = ("SageMaker HyperPod takes the new AMI as the instance groups' ImageId ({images} hands it to "
                 "{cluster} by a cross-stack reference; the cluster carries the image's identity, so {cluster} "
                 "changes with it and its deploy reads the new AMI); running "
                 "nodes keep their image until UpdateClusterSoftware moves them to it: aws sagemaker "
                 "update-cluster-software --cluster-name {name} --image-id AMI (every instance group unless "
                 "--instance-groups names them; it may affect the cluster's availability: plan it around jobs)")
FIRST_ROLL = "the image is new to the deployed cluster: the groups leave the plain base image for the baked one; "
# A weak cross-stack reference is resolved when the consuming stack is created or updated, and a
# later change of the output does not update the consumer (AWS CloudFormation Template Reference,
# "Fn::GetStackOutput"); `cdk deploy` also skips a stack whose template is unchanged.
STILL = ("; caution: {cluster} itself does not change, and CloudFormation reads {images}' AMI only when "
         "{cluster} is updated, so the groups keep the old AMI until then")


def image_rolls(m: model.ClusterModel, comparison: Comparison, old: Templates, new: Templates) -> list[Roll]:
    """The node groups of `m` (the NEW spec's model) that roll to a new build of their node image: the
    image's resources in NAME-images are replaced or new while NAME-cluster is deployed already.
    Derived from NAME-images' changes and the model, as NAME-cluster reads the AMI through a
    cross-stack reference whose text does not change."""
    stacks = {s.key: s.name for s in m.stacks}
    images, cluster = stacks.get(model.IMAGES), stacks.get(model.CLUSTER)
    if images is None or images not in new or cluster not in old:
        return []  # no images, the images stack not synthesized, or nothing deployed to roll
    diff = next(s for s in comparison.stacks if s.name == images)
    consumer_changes = any(s.changes for s in comparison.stacks
                           if s.name == cluster or s.name.startswith(f"{cluster}/"))
    resources = {**resources_of(old.get(images)), **resources_of(new.get(images))}
    rolls = []
    for image in m.images:
        mine = [c for c in diff.changes if c.logical_id in resources
                and _of_image(image.key, c.logical_id, resources[c.logical_id])]
        built = [c for c in mine if c.type == IMAGE and c.action in (ADD, REPLACE, MAY_REPLACE)]
        if not built:
            continue
        first = not any(r["Type"] == IMAGE and _of_image(image.key, lid, r)
                        for lid, r in resources_of(old.get(images)).items())
        note = (PCS_ROLL if image.plane == image_facts.PCS else HYPERPOD_ROLL)
        if not consumer_changes:
            note += STILL
        note = note.format(images=images, cluster=cluster, name=m.name)
        rolls.append(Roll(image.key, image.plane, list(image.groups),
                          [f"{c.type} {c.logical_id} ({LABELS[c.action].lower()})" for c in mine],
                          first=first, note=(FIRST_ROLL if first else "") + note))
    return rolls
