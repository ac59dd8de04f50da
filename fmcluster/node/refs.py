"""What the node renderers take besides the model and a group: the values of the cluster's other
resources that exist only once they are deployed (CDK tokens at synth: the file systems' names,
the Prometheus workspace's remote-write URL, the EKS cluster's endpoint), which the stacks hand
down. Everything else a node runs comes from the model (`ClusterModel.node`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class ClusterDetails:
    """What `nodeadm` needs to join a cluster when EKS does not merge its own user data (a custom
    AMI in the launch template). Values may be CDK tokens."""

    name: str
    endpoint: str
    certificate_authority: str
    service_cidr: str


@dataclass(frozen=True)
class NodeRefs:
    """The deploy-time values a node script names (each may be a CDK token): the FSx for Lustre
    file system's DNS and mount names and the shared home's DNS name (AWS PCS nodes mount them),
    the workspace's remote-write URL (None: the cluster has no NAME-observability, the nodes
    collect no metrics), the node replacer's queue (health.replace) and the EKS cluster a node of a
    custom AMI joins."""

    lustre_dns_name: str = ""
    lustre_mount_name: str = ""
    home_dns_name: str = ""
    remote_write_url: Optional[str] = None
    replacement_queue: str = ""
    eks_cluster: Optional[ClusterDetails] = None

    @property
    def metrics(self) -> bool:
        """The nodes collect metrics (the cluster has a Prometheus workspace)."""
        return self.remote_write_url is not None
