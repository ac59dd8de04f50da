"""The Kubernetes objects and EKS add-ons of a cluster, as pure data: the service CIDR, the
namespace, the FSx for Lustre volume and claim, the DRA driver's ComputeDomain, and the EKS
add-ons. Values may be CDK token strings (the file system's id comes from another stack); they
are placed as given. `fmcluster_cdk/stacks/eks.py` turns them into resources."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from fmcluster.facts import openzfs
from fmcluster.facts.kubernetes import object_name_valid
from fmcluster.spec.models import ClusterSpec

SERVICE_CIDRS = ("10.100.0.0/16", "172.20.0.0/16")  # what EKS itself would choose from


def service_cidr(vpc_cidr: str) -> str:
    """The Kubernetes service CIDR: the first of EKS's two defaults that does not overlap the VPC."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    return next(c for c in SERVICE_CIDRS if not ipaddress.IPv4Network(c).overlaps(vpc))


# The DRA driver's ComputeDomain (NVIDIA/k8s-dra-driver-gpu v25.8.0
# deployments/helm/nvidia-dra-driver-gpu/crds/resource.nvidia.com_computedomains.yaml: namespaced;
# spec.numNodes and spec.channel.resourceClaimTemplate.name required; spec immutable).
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"


def channel_claim_template(domain: str) -> str:
    """The name of the ResourceClaimTemplate a ComputeDomain `domain` makes by default."""
    return f"{domain}-channel"


def compute_domain_manifest(name: str, *, namespace: str, num_nodes: int = 0,
                            claim_template: Optional[str] = None) -> dict[str, Any]:
    """A ComputeDomain for one job (the EKS User Guide: one per job): the driver makes the
    ResourceClaimTemplate `claim_template` (default NAME-channel) that the job's pods claim
    (`spec.resourceClaims[].resourceClaimTemplateName`), and runs an IMEX daemon on each node they
    land on. `num_nodes`: 0 lets the domain grow with the job (DRA driver 25.8.0, feature gate
    IMEXDaemonsWithDNSNames on by default: the count only sets when the status reads Ready)."""
    claim = claim_template or channel_claim_template(name)
    for value in (name, claim):
        if not object_name_valid(value):
            raise ValueError(f"'{value}' is not a Kubernetes object name (a DNS subdomain)")
    if num_nodes < 0:
        raise ValueError(f"numNodes must be 0 or more, not {num_nodes}")
    return {"apiVersion": COMPUTE_DOMAIN_API, "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"numNodes": num_nodes, "channel": {"resourceClaimTemplate": {"name": claim}}}}


BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
FSX_CSI_DRIVER = "fsx.csi.aws.com"
LUSTRE_CLAIM = "fsx-lustre"
HOME_CLAIM = "home"  # the shared home's claim (storage.home)


def namespace_manifest(namespace: str) -> Optional[dict[str, Any]]:
    """The Namespace object, unless Kubernetes already has it."""
    if namespace in BUILTIN_NAMESPACES:
        return None
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


@dataclass(frozen=True)
class FileSystem:
    """The file systems as the storage stack gives them at deploy time: the Lustre one
    (lustre_manifests; "" without one) and the shared home's DNS name (home_manifests; "" without
    one)."""

    id: str
    dns_name: str
    mount_name: str
    home_dns_name: str = ""


def lustre_volume_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-fsx-lustre"


def _claimed(spec: ClusterSpec, volume: str, team_namespaces: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(namespace, PersistentVolume name) of each namespace that gets a claim on a file system:
    orchestrator.namespace with `volume`, then each team namespace with VOLUME-NAMESPACE of its own
    (a claim binds one volume); each namespace once."""
    for namespace in dict.fromkeys((spec.orchestrator.namespace, *team_namespaces)):
        yield namespace, volume if namespace == spec.orchestrator.namespace else f"{volume}-{namespace}"


def lustre_manifests(spec: ClusterSpec, *, file_system_id: str, dns_name: str, mount_name: str,
                     team_namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A static PersistentVolume of the FSx for Lustre file system (FSx CSI driver, retained:
    deleting the claim never touches the data) and a ReadWriteMany claim bound to it in
    orchestrator.namespace; and the same in each of `team_namespaces` (a claim binds one volume,
    so each namespace's claim has a volume of its own, NAME-fsx-lustre-NAMESPACE, all of them the
    one file system)."""
    lustre = spec.storage.lustre
    if lustre is None:
        raise ValueError(f"{spec.name} has no Lustre file system (storage.lustre)")
    capacity = f"{lustre.storage_capacity_gib}Gi"
    documents: list[dict[str, Any]] = []
    for namespace, volume in _claimed(spec, lustre_volume_name(spec), team_namespaces):
        documents += _volume_and_claim(volume, namespace, LUSTRE_CLAIM, capacity, ["relatime", "flock"], {
            "csi": {"driver": FSX_CSI_DRIVER, "volumeHandle": file_system_id,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name}}})
    return documents


def _volume_and_claim(volume: str, namespace: str, claim: str, capacity: str, mount_options: list[str],
                      source: dict[str, Any]) -> list[dict[str, Any]]:
    """A static ReadWriteMany PersistentVolume `volume` of a file system (`source`: its `csi` or `nfs`;
    retained: deleting the claim never touches the data) and the claim `claim` bound to it in
    `namespace`, both of `capacity`."""
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
          "spec": {"capacity": {"storage": capacity}, "volumeMode": "Filesystem", "accessModes": ["ReadWriteMany"],
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "mountOptions": mount_options,
                   **source}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": claim, "namespace": namespace},
           "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume,
                    "resources": {"requests": {"storage": capacity}}}}
    return [pv, pvc]


def home_volume_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-home"


def home_manifests(spec: ClusterSpec, *, dns_name: str, team_namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The shared home (FSx for OpenZFS) as a static NFS PersistentVolume (Kubernetes' own nfs
    volume: the node mounts it with its NFS client; retained: deleting the claim never touches the
    data) and the ReadWriteMany claim `home` bound to it in orchestrator.namespace. Pods mount the
    claim where they want their home, such as /home. Each of `team_namespaces` has a claim `home`
    too, bound to NAME-home-NAMESPACE, of the team's own OpenZFS volume (openzfs.team_volume_path,
    root squashed; the storage stack makes it): a team's pods reach only their team's homes, while
    orchestrator.namespace (the admins') has the root volume, every team's volume under it."""
    home = spec.storage.home
    if home is None:
        raise ValueError(f"{spec.name} has no shared home (storage.home)")
    capacity = f"{home.storage_capacity_gib}Gi"
    documents: list[dict[str, Any]] = []
    for namespace, volume in _claimed(spec, home_volume_name(spec), team_namespaces):
        path = openzfs.ROOT_VOLUME_PATH if namespace == spec.orchestrator.namespace \
            else openzfs.team_volume_path(namespace)
        documents += _volume_and_claim(volume, namespace, HOME_CLAIM, capacity, list(openzfs.MOUNT_OPTIONS),
                                       {"nfs": {"server": dns_name, "path": path}})
    return documents


@dataclass(frozen=True)
class Addon:
    """An EKS add-on; `service_account` names the one that gets a Pod Identity role."""

    name: str
    service_account: Optional[str] = None
    needs_nodes: bool = False  # a Deployment: becomes healthy only once nodes can run it


POD_IDENTITY_AGENT = Addon("eks-pod-identity-agent")
VPC_CNI = Addon("vpc-cni", service_account="aws-node")  # AmazonEKS_CNI_Policy by Pod Identity, not on the node role
KUBE_PROXY = Addon("kube-proxy")
COREDNS = Addon("coredns", needs_nodes=True)
FSX_CSI = Addon("aws-fsx-csi-driver", service_account="fsx-csi-controller-sa", needs_nodes=True)
NODE_MONITORING_AGENT = Addon("eks-node-monitoring-agent")
ADDONS = (POD_IDENTITY_AGENT, VPC_CNI, KUBE_PROXY, COREDNS, FSX_CSI, NODE_MONITORING_AGENT)
