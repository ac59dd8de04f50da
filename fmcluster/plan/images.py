"""NAME-images and NAME-reference in the plan: the node images a Slurm plane's groups launch from,
the reference GPU images the acceptance kit's jobs run (every plane), and what a group's own image
must have; the plan's records of them (fmcluster.plan.shape.estimates) made from the cluster model,
and their rows and lines for the text and markdown plans (fmcluster.plan.render lays them out)."""

from __future__ import annotations

from typing import Callable, Optional

from fmcluster.facts import images as image_facts
from fmcluster.facts import prices
from fmcluster.model import cluster as model
from fmcluster.model.node import SPOT_NOTICE
from fmcluster.node import image as node_image
from fmcluster.plan.shape.estimates import ImagePlan, ImagesPlan, OwnImagePlan, ReferenceImagePlan, ReferenceImagesPlan
from fmcluster.text.table import Table

IMAGES_NOTE = ("an estimate: an Image Builder build and test each (a build instance, the install, the AMI "
               "snapshot, a test instance from the new AMI), in parallel, before {cluster}; a later deploy "
               "rebuilds an image only when its recipe changes (fmcluster's software pins, the Slurm version, "
               "images.revision)")
REFERENCES_NOTE = ("an estimate: an Image Builder container build each (a build instance, the CUDA base pulled, "
                   "NCCL and nccl-tests compiled, the image pushed to its ECR repository), in parallel, after "
                   "{cluster}, which does not wait for them: a failed build leaves the cluster as it is; a later "
                   "deploy rebuilds an image, into a new repository, only when its recipe changes (fmcluster's "
                   "version pins, images.revision)")


def own_images(m: model.ClusterModel) -> list[OwnImagePlan]:
    cp = m.control_plane
    if cp.type not in (image_facts.PCS, image_facts.HYPERPOD_SLURM):
        return []
    prefix = image_facts.slurm_prefix(cp.type, m.spec.orchestrator.version or "")
    return [OwnImagePlan(group=g.name, ami_id=g.ami_id, needs=list(node_image.own_image_needs(
        cp.type, prefix, containers=m.runs_containers(g), metrics=m.observed, aws_cli=_reads_its_end(m, g))))
            for g in m.all_groups if g.ami_id]


def _reads_its_end(m: model.ClusterModel, group: model.NodeGroup) -> bool:
    """The group's nodes read their capacity's end with the AWS CLI (capacity-end; not a spot notice,
    which comes from the instance metadata service)."""
    end = m.node(group).capacity_end
    return end is not None and end.source != SPOT_NOTICE


def _stack(m: model.ClusterModel, key: str) -> str:
    return next(s.name for s in m.stacks if s.key == key)


def images(m: model.ClusterModel, table: prices.PriceTable) -> Optional[ImagesPlan]:
    if not m.images:
        return None
    return ImagesPlan(
        stack=_stack(m, model.IMAGES), first_deploy_minutes=image_facts.BUILD_MINUTES_ESTIMATE,
        note=IMAGES_NOTE.format(cluster=_stack(m, model.CLUSTER)),
        images=[ImagePlan(key=i.key, plane=i.plane, architecture=i.architecture, base_parameter=i.base.parameter,
                          slurm_version=i.slurm_version or None, slurm_prefix=i.slurm_prefix,
                          build_instance_type=i.build_instance_type,
                          build_instance_hourly_usd=table.instance_hourly(i.build_instance_type),
                          revision=i.revision, encrypted=i.encrypted, groups=list(i.groups))
                for i in m.images])


def reference_images(m: model.ClusterModel, table: prices.PriceTable) -> Optional[ReferenceImagesPlan]:
    if not m.reference_images:
        return None
    return ReferenceImagesPlan(
        stack=_stack(m, model.REFERENCE), build_minutes=image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE,
        note=REFERENCES_NOTE.format(cluster=_stack(m, model.CLUSTER)),
        images=[ReferenceImagePlan(architecture=r.architecture, repository=r.repository, tag=r.tag,
                                   build_instance_type=r.build_instance_type,
                                   build_instance_hourly_usd=table.instance_hourly(r.build_instance_type),
                                   groups=list(r.groups))
                for r in m.reference_images])


# ---- rows and lines (fmcluster.plan.render) ---------------------------------------------------

def _instance(instance_type: str, hourly: Optional[float], usd: Callable[[Optional[float]], str]) -> str:
    return f"{instance_type} ({usd(hourly)}/h)" if hourly is not None else instance_type


def image_rows(plan: Optional[ImagesPlan], usd: Callable[[Optional[float]], str]) -> Table:
    """A row per node image of NAME-images: what it is baked from, on what, for which groups."""
    rows = [["image", "base image (SSM parameter)", "Slurm", "build instance", "node groups", "encrypted"]]
    for i in plan.images if plan else []:
        version = i.slurm_version or "the base image's,"
        rows.append([i.key, i.base_parameter, f"{version} at {i.slurm_prefix}",
                     _instance(i.build_instance_type, i.build_instance_hourly_usd, usd), ", ".join(i.groups),
                     "yes (storage key)" if i.encrypted else "no"])
    return rows


def reference_rows(plan: Optional[ReferenceImagesPlan], usd: Callable[[Optional[float]], str]) -> Table:
    """A row per reference GPU image: its architecture, repository and tag, build instance, groups."""
    rows = [["reference image", "ECR repository:tag", "build instance", "node groups"]]
    for r in plan.images if plan else []:
        rows.append([f"reference-{r.architecture}", f"{r.repository}:{r.tag}",
                     _instance(r.build_instance_type, r.build_instance_hourly_usd, usd), ", ".join(r.groups)])
    return rows


def images_line(plan: Optional[ImagesPlan]) -> str:
    """What the images add to a first deploy, in a line."""
    if plan is None:
        return ""
    count = len(plan.images)
    return (f"a first deploy takes about {plan.first_deploy_minutes} min more for {count} "
            f"image{'s' if count != 1 else ''} ({plan.note})")


def reference_line(plan: Optional[ReferenceImagesPlan]) -> str:
    """How long the reference images' builds take, and that the cluster does not wait, in a line."""
    if plan is None:
        return ""
    count = len(plan.images)
    return f"about {plan.build_minutes} min for {count} image{'s' if count != 1 else ''} ({plan.note})"


def own_image_lines(own: list[OwnImagePlan]) -> list[str]:
    """What each group's own image must have, a line each."""
    return [f"node group {o.group} launches from its own {o.ami_id}, which must have: {'; '.join(o.needs)}; "
            "a node without them never takes a job" for o in own]
