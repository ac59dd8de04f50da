"""The spec's sections of how the cluster is run: the baked node `images`, `observability` and
node `health`.

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""

from typing import Optional

from pydantic import Field

from fmcluster.facts import health
from fmcluster.spec.models.base import Model
from fmcluster.spec.models.formats import Email


class ImagesSpec(Model):
    """The node images of the Slurm control planes (NAME-images): built with EC2 Image Builder from
    the control plane's base image, with the software every node needs installed once."""

    revision: int = Field(default=0, ge=0, le=9999, description=(
        "raise it to bake new node images from the newest base image (pcs, hyperpod-slurm); node groups "
        "roll to them as their nodes are replaced. Images are also rebuilt when fmcluster's software "
        "pins or the Slurm version change; a new revision also builds the reference GPU image again"))
    reference: bool = Field(default=True, description=(
        "build the reference GPU image (CUDA, EFA, NCCL, nccl-tests, fio: the acceptance kit's jobs run it) "
        "in NAME-images with EC2 Image Builder, for each architecture of the GPU node groups, into an ECR "
        "repository of the stack's; false leaves it out (about an hour of a first deploy), and the kit's "
        "jobs then need IMAGE set to an image of yours"))


class ObservabilitySpec(Model):
    """Metrics, dashboards and alerts, in NAME-observability."""

    prometheus: bool = Field(default=True, description=(
        "an Amazon Managed Service for Prometheus workspace with the GPU-health alert rules"))
    grafana: bool = Field(default=False, description=(
        "an Amazon Managed Grafana workspace with fmcluster's dashboards (sign-in through IAM Identity Center)"))
    alert_email: Optional[Email] = Field(default=None, description=(
        "who is paged by the alerts: an e-mail subscription of the alert topic (confirm it after the first deploy)"))


class HealthSpec(Model):
    """Node health while the cluster runs: a check on every GPU node in service, faulty nodes drained
    and replaced without a person, and a deep check of new capacity before its first job."""

    check_minutes: int = Field(default=health.CHECK_MINUTES, ge=health.CHECK_MINUTES_RANGE[0],
                               le=health.CHECK_MINUTES_RANGE[1], description=(
        "how often each GPU node in service is checked (GPUs, XID errors, ECC, NVLink, EFA, file "
        "systems; a DCGM diagnostic when it is idle), in minutes"))
    replace: bool = Field(default=True, description=(
        "replace a node drained for a hardware fault once its jobs have ended (false: it stays drained "
        "for a person to look at)"))
    max_replacing: int = Field(default=health.MAX_REPLACING, ge=1, le=100, description=(
        "at most this many nodes of the cluster are being replaced at once; a replacement counts for "
        f"{health.REPLACE_WINDOW_MINUTES} minutes"))
    deep_check: bool = Field(default=True, description=(
        "a new node (a new Capacity Block, a scale-out, a replacement) runs a DCGM diagnostic and a "
        "node-local NCCL test before it takes jobs"))
