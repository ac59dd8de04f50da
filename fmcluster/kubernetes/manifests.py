"""What an `eks` cluster runs inside Kubernetes, as pure data: node labels and taints, the node
configuration (AL2023 `nodeadm` NodeConfig), the pinned Helm charts and their values, the Kueue
queues and their quota, the NVLink domains of UltraServer groups (Kueue Topology, the DRA driver's
ComputeDomain), and the Lustre volume manifests.

No aws_cdk here: `fmcluster_cdk/stacks/eks.py` turns these into resources. Values may be CDK token strings
(the file system's id comes from another stack); they are placed as given.

Chart versions are pinned here, never resolved at synth: the kubectl provider installs them at
deploy time. Each pin was read from the chart's own source (see the comments); bump them on
purpose, with `helm search repo CHART --versions` (or `helm show chart oci://...`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

import yaml

if TYPE_CHECKING:
    from fmcluster.facts.catalog import InstanceType
    from fmcluster.model.cluster import ClusterModel, NodeGroup
    from fmcluster.spec.models import ClusterSpec

# --- node labels and taints ---------------------------------------------------------------

LABEL_PREFIX = "fmcluster.dev/"
NODE_GROUP_LABEL = LABEL_PREFIX + "node-group"  # every node: the name of its node group
GPU_LABEL = "nvidia.com/gpu.present"  # GPU nodes; the AL2023 NVIDIA AMI sets it too
EFA_LABEL = "vpc.amazonaws.com/efa.present"  # nodes with EFA interfaces
TRUE = "true"
GPU_TAINT_KEY = "nvidia.com/gpu"  # GPU nodes are tainted NoSchedule: only pods that ask may land
GPU_TAINT_EFFECT = "NoSchedule"
# Label domains a node group's own labels may not use: kubelet may not set labels of the
# kubernetes.io and k8s.io domains (NodeRestriction), and fmcluster.dev labels and the GPU and
# EFA labels fmcluster sets itself.
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", LABEL_PREFIX.rstrip("/"))
RESERVED_LABELS = (GPU_LABEL, EFA_LABEL)

SYSTEM_NODE_GROUP = "system"  # the node group of orchestrator.login: CoreDNS, Kueue, add-on controllers

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def label_value_valid(value: str) -> bool:
    """A Kubernetes label value: empty, or up to 63 alphanumerics, '-', '_', '.', starting and
    ending with an alphanumeric."""
    return value == "" or bool(_LABEL_NAME.fullmatch(value))


def label_key_problem(key: str) -> Optional[str]:
    """Why `key` is not a valid Kubernetes label key (optional DNS-subdomain prefix, '/', name),
    or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"the prefix '{prefix}' is not a DNS subdomain"
    if not _LABEL_NAME.fullmatch(name):
        return f"the name '{name}' is not 1 to 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_reserved(key: str) -> bool:
    """A label key fmcluster or Kubernetes reserves (its domain, or a subdomain of it)."""
    prefix = key.rpartition("/")[0]
    return key in RESERVED_LABELS or any(prefix == d or prefix.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)


# The labels and taints of each node group are derived once, in fmcluster.model.cluster (NodeGroup.labels
# and .taints), from the names above.


GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}


# --- node configuration (AL2023 nodeadm) ------------------------------------------------------

NODECONFIG_MEDIA_TYPE = "application/node.eks.aws"
NODECONFIG_FILE = "fmcluster-nodeconfig.yaml"


@dataclass(frozen=True)
class ClusterDetails:
    """What `nodeadm` needs to join a cluster when EKS does not merge its own user data (a custom
    AMI in the launch template). Values may be CDK tokens."""

    name: str
    endpoint: str
    certificate_authority: str
    service_cidr: str


def node_config(*, raid0: bool, cluster: Optional[ClusterDetails] = None) -> Optional[str]:
    """The NodeConfig document of a node group, or None when it needs none.

    `raid0`: stripe the instance-store NVMe disks into one RAID 0 array that kubelet and
    containerd use (nodeadm `instance.localStorage.strategy: RAID0`). `cluster`: the cluster's
    connection details (custom AMIs only; with the EKS AMI types, EKS adds them itself).
    """
    spec: dict[str, Any] = {}
    if cluster is not None:
        spec["cluster"] = {"name": cluster.name, "apiServerEndpoint": cluster.endpoint,
                           "certificateAuthority": cluster.certificate_authority, "cidr": cluster.service_cidr}
    if raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if not spec:
        return None
    document = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    # block style in this key order, one line per value however long (a CA certificate is)
    return yaml.safe_dump(document, explicit_start=True, sort_keys=False, width=float("inf"))


# The node's textfile metrics (with observability on): written by the node's user data (managed
# node groups) or lifecycle hook (HyperPod), read by the node exporter chart through a hostPath
# mount (node_exporter_values). The same directory as on the Slurm nodes (bootstrap/metrics.sh).
TEXTFILE_DIR = "/var/lib/fmcluster/textfile-node"
TEXTFILE_MOUNT = "/host/fmcluster-textfile"  # where the node exporter's container sees it
EXPECTED_GPUS_SCRIPT = "fmcluster-expected-gpus.sh"
NODE_SCRIPT = "fmcluster-node.sh"
# A node whose readiness check fails at boot (GPUs missing, LNet without EFA) registers with this
# taint (bootstrap/gate-kubelet.sh): no job lands there; the exporters tolerate it.
NOT_READY_TAINT = LABEL_PREFIX + "not-ready"
NOT_READY_TOLERATION = {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoSchedule"}
EXPECTED_GPUS_COMMENT = """\
# fmcluster: the GPUs of this node's instance type (fmcluster instance catalog), for the alert
# GpuMissing; the node exporter's textfile collector reads this directory.
"""
NODE_SCRIPT_COMMENT = """\
# fmcluster Amazon EKS node script (AL2023), rendered by fmcluster.kubernetes.manifests for one node group.
# It runs from cloud-init before nodeadm starts kubelet; its output is in
# /var/log/cloud-init-output.log.
"""


def expected_gpus_script(instance: InstanceType) -> str:
    """A shell script that writes the textfile metric `fmcluster_expected_gpus` of a node of
    `instance` (bootstrap/textfile.sh; the HyperPod EKS hook)."""
    from fmcluster.node import bootstrap  # not needed by validation: keep `validate` light

    program = bootstrap.NodeProgram(instance)
    program.add("textfile.sh", "write_expected_gpus", EXPECTED_GPUS=instance.gpu_count or 0,
                TEXTFILE_DIR=TEXTFILE_DIR)
    return program.render(bootstrap.header(EXPECTED_GPUS_COMMENT))


def taint_flag(taints: Iterable[Mapping[str, str]]) -> str:
    """Taints as kubelet's --register-with-taints value (KEY=VALUE:EFFECT, comma-separated)."""
    return ",".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints)


def node_script(instance: InstanceType, *, taints: Iterable[Mapping[str, str]] = (), lnet_efa: bool = False,
                efa: bool = False, observability: bool = False, compact: bool = True) -> Optional[str]:
    """The shell part of a managed node group's user data (bootstrap fragments), or None when the
    node needs none: `observability`, the textfile metric fmcluster_expected_gpus; `lnet_efa`
    (an EFA-enabled file system) on an EFA node, LNet over EFA for the FSx CSI driver's mounts;
    on GPU nodes (and LNet ones) the readiness check, whose failure registers the node with the
    NOT_READY_TAINT besides the group's `taints` (bootstrap/gate-kubelet.sh)."""
    from fmcluster.node import bootstrap

    lnet = bootstrap.lnet_efa_interfaces(instance, efa=efa, lustre_efa=lnet_efa)
    program = bootstrap.NodeProgram(instance)
    if observability:
        program.add("textfile.sh", "write_expected_gpus", EXPECTED_GPUS=instance.gpu_count or 0,
                    TEXTFILE_DIR=TEXTFILE_DIR)
    if lnet:
        program.lnet(lnet)
    if instance.is_gpu or lnet:
        program.readiness(mounts=(), lnet_efa=lnet > 0)
        program.add("gate-kubelet.sh", "gate_kubelet", REGISTER_TAINTS=taint_flag(taints),
                    NOT_READY_TAINT=NOT_READY_TAINT)
    if not program.steps:
        return None
    return program.render(bootstrap.header(NODE_SCRIPT_COMMENT), compact=compact)


def node_user_data(instance: InstanceType, *, raid0: bool, cluster: Optional[ClusterDetails] = None,
                   taints: Iterable[Mapping[str, str]] = (), lnet_efa: bool = False, efa: bool = False,
                   observability: bool = False) -> Optional[str]:
    """The node group's user data: MIME multipart with the NodeConfig part (EKS merges it with
    its own for managed node groups) and the node script (`node_script`); None when there is
    neither."""
    from fmcluster.node.bootstrap import mime_multipart  # not needed by validation: keep `validate` light

    parts: list[tuple[str, str, str]] = []  # (media type, file name, content)
    document = node_config(raid0=raid0, cluster=cluster)
    if document is not None:
        parts.append((NODECONFIG_MEDIA_TYPE, NODECONFIG_FILE, document))
    script = node_script(instance, taints=taints, lnet_efa=lnet_efa, efa=efa, observability=observability)
    if script is not None:
        parts.append(("text/x-shellscript", NODE_SCRIPT, script))
    if not parts:
        return None
    return mime_multipart(parts)


SERVICE_CIDRS = ("10.100.0.0/16", "172.20.0.0/16")  # what EKS itself would choose from


def service_cidr(vpc_cidr: str) -> str:
    """The Kubernetes service CIDR: the first of EKS's two defaults that does not overlap the VPC."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    return next(c for c in SERVICE_CIDRS if not ipaddress.IPv4Network(c).overlaps(vpc))


# --- Helm charts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Chart:
    """A Helm chart pinned to one version. `repository` is a Helm repository URL, or for an OCI
    chart the full `oci://` reference (the kubectl provider pulls it with `helm pull`)."""

    release: str
    chart: str
    repository: str
    version: str
    namespace: str


# NVIDIA k8s-device-plugin: 0.19.3 reverted the GDRCopy/MOFED defaults of 0.19.0-0.19.2; MOFED
# is still switched off explicitly below (it would hand /dev/infiniband to GPU pods, which is
# the EFA device plugin's job). Source: NVIDIA/k8s-device-plugin tag v0.19.3; Amazon EKS User
# Guide, "Install the NVIDIA Kubernetes device plugin".
NVIDIA_DEVICE_PLUGIN = Chart("nvidia-device-plugin", "nvidia-device-plugin",
                             "https://nvidia.github.io/k8s-device-plugin", "0.19.3", "nvidia")
# AWS EFA device plugin. Source: aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml
# (version v0.5.30, app v0.5.20, 2026-07-21; its values changed only the image tag and the
# instance-type list since v0.5.20); Amazon EKS User Guide, "Manage EFA devices on Amazon EKS" and
# "Use P6e-GB200 UltraServers with Amazon EKS" (the device plugin 0.5.14 or later for p6e-gb200:
# chart v0.5.20 carried app v0.5.13).
EFA_DEVICE_PLUGIN = Chart("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts",
                          "v0.5.30", "kube-system")
# Kueue, from its OCI registry. 0.18 serves kueue.x-k8s.io/v1beta2 (the API used below).
# Source: kubernetes-sigs/kueue charts/kueue/README.md (`helm install kueue oci://...`).
KUEUE = Chart("kueue", "kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.18.3", "kueue-system")
KUEUE_API = "kueue.x-k8s.io/v1beta2"
# --- metrics collection (with observability on): exporters the AMP managed scraper reads ---
# Release names and ports are the scrape configuration's contract
# (fmcluster/observability/scraper.yaml keeps pods by release label and port).
MONITORING_NAMESPACE = "monitoring"
NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
EFA_EXPORTER_PORT = 9109
# Prometheus node exporter. Source: prometheus-community/helm-charts
# charts/prometheus-node-exporter/Chart.yaml (version 4.45.3, app 1.9.1).
NODE_EXPORTER = Chart("node-exporter", "prometheus-node-exporter",
                      "https://prometheus-community.github.io/helm-charts", "4.45.3", MONITORING_NAMESPACE)
# NVIDIA DCGM exporter. Source: NVIDIA/dcgm-exporter deployment/Chart.yaml (version 4.8.3).
DCGM_EXPORTER = Chart("dcgm-exporter", "dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts",
                      "4.8.3", MONITORING_NAMESPACE)
# EFA counters (node_amazonefa_*): there is no maintained EFA exporter chart. AWS's own recipe
# (aws-samples/awsome-distributed-training 4.validation_and_observability/3.efa-node-exporter/EKS)
# installs the node exporter chart with the EFA node exporter image (a node exporter fork with
# the `amazonefa` collector); so does fmcluster, as a second release on EFA nodes only, with
# only that collector, on its own port. The image is published only as `latest`
# (public.ecr.aws/hpc-cloud/efa-node-exporter); mirror it and pin a digest for production.
EFA_NODE_EXPORTER = Chart("efa-node-exporter", "prometheus-node-exporter",
                          "https://prometheus-community.github.io/helm-charts", "4.45.3", MONITORING_NAMESPACE)
EFA_NODE_EXPORTER_IMAGE = {"registry": "public.ecr.aws", "repository": "hpc-cloud/efa-node-exporter",
                           "tag": "latest"}
# --- UltraServers (P6e-GB200): only with an UltraServer node group (ClusterModel.ultraserver_groups) ---
# The NVIDIA DRA driver for GPUs, for its ComputeDomains only (an IMEX domain that follows each
# job across the nodes of one NVLink domain); the NVIDIA device plugin still allocates the GPUs.
# Version, repository and the two `resources` values: the Amazon EKS User Guide, "Use P6e-GB200
# UltraServers with Amazon EKS" (Install NVIDIA DRA driver); the chart at NVIDIA/k8s-dra-driver-gpu
# tag v25.8.0 (deployments/helm/nvidia-dra-driver-gpu/Chart.yaml: version 25.8.0, kubeVersion
# >=1.32; resource.nvidia.com/v1beta1 ComputeDomain CRD in crds/).
DRA_DRIVER = Chart("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu", "https://helm.ngc.nvidia.com/nvidia", "25.8.0",
                   "nvidia-dra-driver-gpu")
# NVIDIA GPU feature discovery (GFD), which labels each node with its NVLink domain
# (NVLINK_CLIQUE_LABEL = <GPU fabric cluster UUID>.<clique id>, from NVML: k8s-device-plugin v0.19.3
# internal/lm/imex.go) through Node Feature Discovery (NFD: GFD writes the label to the node's
# features.d, the NFD worker reads it, the NFD master sets it). The DRA driver does not set it
# (v25.8.0 reads the clique id from NVML itself); the EKS User Guide page above names GFD for it.
# GFD and NFD come with the device plugin's own chart (gfd.enabled; NFD 0.17.3 is its dependency,
# condition nfd.enabled,gfd.enabled): a second release of the pinned chart with the device plugin
# off, so the same release serves EKS and HyperPod EKS (HyperPod's dependencies chart brings its
# own device plugin, 0.16.1, whose GFD has no clique label: it came in 0.17.0).
GPU_FEATURE_DISCOVERY = Chart("gpu-feature-discovery", NVIDIA_DEVICE_PLUGIN.chart, NVIDIA_DEVICE_PLUGIN.repository,
                              NVIDIA_DEVICE_PLUGIN.version, NVIDIA_DEVICE_PLUGIN.namespace)
# --- jobs and serving: the operators the acceptance and serving kits (fmcluster.kits.jobs) run on ---
# The MPI operator (MPIJob: nccl-tests across nodes) and the Kubeflow training operator
# (PyTorchJob: the torchrun smoke test). HyperPod on EKS installs both with its dependencies chart
# (aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart: sub-charts charts/mpi-operator, image
# mpioperator/mpi-operator 0.5, and charts/training-operators, image kubeflow/training-operator
# v1-855e096, its MPIJob scheme off so the two never both claim mpijobs.kubeflow.org); fmcluster
# installs the same two sub-charts, from the same pinned commit, on `eks` clusters, so a kit runs the
# same on both. Kueue 0.18.3 integrates both kinds by default (charts/kueue/values.yaml
# integrations.frameworks: kubeflow.org/mpijob, kubeflow.org/pytorchjob, batch/job,
# leaderworkerset.x-k8s.io/leaderworkerset) and waits for a CRD installed after it
# (pkg/controller/jobframework/setup.go waitForAPI).
MPIJOB_API = "kubeflow.org/v2beta1"
PYTORCHJOB_API = "kubeflow.org/v1"
OPERATOR_SUBCHARTS = ("mpi-operator", "training-operators")  # under helm_chart/HyperPodHelmChart/charts
# LeaderWorkerSet (multi-node serving: one leader and its workers per replica), from its OCI
# registry. Source: kubernetes-sigs/lws tag v0.10.0 (site/content/en/docs/installation/_index.md:
# `helm install lws oci://registry.k8s.io/lws/charts/lws --version=0.10.0 --namespace lws-system`;
# hack/push-chart.sh publishes the chart with the image tag of its version; CRD
# leaderworkerset.x-k8s.io/v1 in charts/lws/crds).
LWS = Chart("lws", "lws", "oci://registry.k8s.io/lws/charts/lws", "0.10.0", "lws-system")
LWS_API = "leaderworkerset.x-k8s.io/v1"
# The charts every Kubernetes plane may get from the kubectl provider (the device plugins only on
# `eks` and only where their devices are; Kueue and LWS everywhere, HyperPod EKS included).
CHARTS = (NVIDIA_DEVICE_PLUGIN, EFA_DEVICE_PLUGIN, KUEUE, LWS)
# On `eks`, each operator sub-chart is a release of its own (fmcluster_cdk/stacks/eks.py, with the handler of
# fmcluster_cdk/constructs/hyperpod/dependencies.py), named after the sub-chart so that its templates' full
# names are the chart's (Deployment mpi-operator, training-operators). The release namespace is
# kube-system, as HyperPod's: neither sub-chart can own a namespace of its own, since each creates one
# itself (mpi-operator's templates/rbac.yaml a Namespace mpi-operator, always, its Deployment in the
# release namespace; training-operators' a Namespace kubeflow when createNamespace, the default, and
# every object of it in kubeflow), and the handler creates no release namespace. Values and
# templates read from a mirror of aws/sagemaker-hyperpod-cli: git log shows both sub-charts
# unchanged from f365f57 (2024-09-09, where that history starts) to its HEAD 011ca92 (2026-06-22);
# the pinned commit itself is not in that history, so they are taken to be the same there.
OPERATORS_NAMESPACE = "kube-system"
METRICS_CHARTS = (NODE_EXPORTER, DCGM_EXPORTER, EFA_NODE_EXPORTER)  # only with observability on
ULTRASERVER_CHARTS = (DRA_DRIVER, GPU_FEATURE_DISCOVERY)  # only with an UltraServer node group
# The DCGM fields the alert rules and dashboards read (fmcluster/observability), as the
# exporter's counters CSV (field, Prometheus type, help).
DCGM_COUNTERS = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in us)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in us)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
)

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def nvidia_device_plugin_values() -> dict[str, Any]:
    """On GPU nodes only (their label), tolerating their taint and the not-ready one (a node
    held back shows the GPUs it has); MOFED off (see the pin)."""
    return {"nodeSelector": {GPU_LABEL: TRUE}, "tolerations": [GPU_TOLERATION, NOT_READY_TOLERATION],
            "mofedEnabled": False}


def efa_device_plugin_values(instance_types: list[str]) -> dict[str, Any]:
    """On EFA nodes only, so it never crash-loops on nodes without EFA: their label, and the
    chart's own instance-type affinity narrowed to (and so including) this cluster's EFA types
    (the chart's built-in list may lag new types such as p6-b300)."""
    return {"nodeSelector": {EFA_LABEL: TRUE}, "tolerations": [GPU_TOLERATION],
            "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": sorted(set(instance_types))}}


def node_exporter_values() -> dict[str, Any]:
    """On every node (the chart's own `NoSchedule` toleration covers the GPU taint), host
    network on 9100; no ServiceMonitor (the managed scraper finds the pods itself); the textfile
    collector reads the node's TEXTFILE_DIR (fmcluster_expected_gpus), mounted read-only."""
    return {"service": {"port": NODE_EXPORTER_PORT, "targetPort": NODE_EXPORTER_PORT},
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "prometheus": {"monitor": {"enabled": False}},
            "extraArgs": [f"--collector.textfile.directory={TEXTFILE_MOUNT}"],
            "extraHostVolumeMounts": [{"name": "fmcluster-textfile", "hostPath": TEXTFILE_DIR,
                                       "mountPath": TEXTFILE_MOUNT, "readOnly": True,
                                       "mountPropagation": "HostToContainer"}]}


def dcgm_exporter_values() -> dict[str, Any]:
    """On GPU nodes only (their label), tolerating their taint and the not-ready one (the GPUs of a
    node held back still report); service on 9400; the counters the rules need; no ServiceMonitor
    (no Prometheus operator here)."""
    counters = "\n".join(f"{field}, {kind}, {text}" for field, kind, text in DCGM_COUNTERS) + "\n"
    return {"nodeSelector": {GPU_LABEL: TRUE}, "tolerations": [GPU_TOLERATION, NOT_READY_TOLERATION],
            "service": {"port": DCGM_EXPORTER_PORT, "address": f":{DCGM_EXPORTER_PORT}"},
            "serviceMonitor": {"enabled": False}, "customMetrics": counters}


def efa_node_exporter_values() -> dict[str, Any]:
    """The EFA node exporter on EFA nodes only, tolerating the GPU taint, on 9109 (the regular
    node exporter has 9100 on the same host network), with only the `amazonefa` collector."""
    return {"image": dict(EFA_NODE_EXPORTER_IMAGE), "nodeSelector": {EFA_LABEL: TRUE},
            "tolerations": [GPU_TOLERATION],
            "service": {"port": EFA_EXPORTER_PORT, "targetPort": EFA_EXPORTER_PORT},
            "extraArgs": ["--collector.disable-defaults", "--collector.amazonefa"],
            "prometheus": {"monitor": {"enabled": False}}}


# Kueue's controller configuration (config.kueue.x-k8s.io/v1beta2 Configuration): the chart takes
# it whole, as the YAML string managerConfig.controllerManagerConfigYaml (charts/kueue/values.yaml
# at kubernetes-sigs/kueue v0.18.3; templates/manager/manager-config.yaml parses it, adds
# internalCertManagement when absent, and the Deployment's config-checksum annotation restarts the
# controller when it changes). Kueue decodes it strictly (pkg/config/config.go: EnableStrict): an
# unknown field stops the controller. tests/kubernetes/test_kueue_config.py checks it against a schema made
# from apis/config/v1beta2/configuration_types.go at that tag.
KUEUE_CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
# The chart's default Configuration at 0.18.3 (values.yaml, managerConfig.controllerManagerConfigYaml),
# as data: fmcluster's replaces it only where it adds to it (kueue_configuration).
KUEUE_CHART_FRAMEWORKS = (
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice", "ray.io/raycluster",
    "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob", "workload.codeflare.dev/appwrapper",
    "pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")
# Dynamic Resource Allocation in Kueue 0.18.3: the feature gate KueueDRAIntegration is Beta and on by
# default (pkg/features/kube_features.go), and a workload whose pods use a ResourceClaimTemplate is
# Inadmissible ("DeviceClass ... is not mapped in DRA configuration") unless each DeviceClass of the
# template is mapped to a logical resource in resources.deviceClassMappings
# (site/content/en/docs/tasks/manage/setup_dra.md; pkg/dra/claims.go), which the ClusterQueue then
# covers with a quota. A ComputeDomain's ResourceClaimTemplate (NVIDIA/k8s-dra-driver-gpu v25.8.0
# templates/compute-domain-workload-claim-template.tmpl.yaml) requests one device, `exactly`, of the
# class below, without a count (ExactCount, 1): Kueue counts 1 a pod (pkg/dra/claims.go
# countDevicesPerClass; pkg/workload/workload.go multiplies by the pod set's count).
COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
IMEX_CHANNEL_RESOURCE = LABEL_PREFIX + "imex-channel"  # the logical resource Kueue charges for it


def kueue_chart_configuration() -> dict[str, Any]:
    """The Kueue chart's own default Configuration (KUEUE, values.yaml), a fresh copy."""
    return {"apiVersion": KUEUE_CONFIG_API, "kind": "Configuration",
            "health": {"healthProbeBindAddress": ":8081"}, "metrics": {"bindAddress": ":8443"},
            "webhook": {"port": 9443},
            "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
            "controller": {"groupKindConcurrency": {
                "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": list(KUEUE_CHART_FRAMEWORKS)}}


def kueue_configuration(model: ClusterModel) -> Optional[dict[str, Any]]:
    """Kueue's Configuration where fmcluster needs more than the chart's default, else None: with an
    UltraServer node group, the chart's default and the ComputeDomain channel class mapped to
    IMEX_CHANNEL_RESOURCE (the quota of kueue_manifests)."""
    if not model.ultraserver_groups:
        return None
    configuration = kueue_chart_configuration()
    configuration["resources"] = {"deviceClassMappings": [
        {"name": IMEX_CHANNEL_RESOURCE, "deviceClassNames": [COMPUTE_DOMAIN_CHANNEL_CLASS]}]}
    return configuration


def kueue_values(model: ClusterModel) -> dict[str, Any]:
    """The Kueue controller on the system nodes; its Configuration (kueue_configuration) where
    fmcluster sets one."""
    values: dict[str, Any] = {"controllerManager": {"nodeSelector": system_node_selector()}}
    configuration = kueue_configuration(model)
    if configuration is not None:
        values["managerConfig"] = {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)}
    return values


def node_group_affinity(groups: Iterable[str]) -> dict[str, Any]:
    """A pod affinity (core/v1 Affinity) to the nodes of the named node groups (their
    NODE_GROUP_LABEL). As a chart value it replaces the chart's default nodeSelectorTerms (Helm
    merges maps, but replaces lists)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": NODE_GROUP_LABEL, "operator": "In", "values": sorted(set(groups))}]}]}}}


def dra_driver_values(groups: Iterable[str]) -> dict[str, Any]:
    """The DRA driver with ComputeDomains only (`resources.gpus.enabled: false`: its GPU plugin is
    experimental, the chart refuses it without gpuResourcesEnabledOverride); its controller on the
    system nodes, its kubelet plugin on the UltraServer node groups `groups`, tolerating their GPU
    taint. Keys from the chart's values.yaml at NVIDIA/k8s-dra-driver-gpu v25.8.0: `resources.gpus`,
    `resources.computeDomains`; `controller.affinity` (its default requires
    node-role.kubernetes.io/control-plane, which EKS nodes never carry: replaced here);
    `kubeletPlugin.affinity` (default: NVIDIA PCI devices or nvidia.com/gpu.present) and
    `kubeletPlugin.tolerations` (default none: the GPU taint would keep it off every GPU node)."""
    return {"resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
            "controller": {"affinity": node_group_affinity([SYSTEM_NODE_GROUP])},
            "kubeletPlugin": {"affinity": node_group_affinity(groups), "tolerations": [GPU_TOLERATION]}}


def gpu_feature_discovery_values(groups: Iterable[str]) -> dict[str, Any]:
    """GFD and the NFD worker on the UltraServer node groups `groups` only, tolerating their GPU
    taint; the NFD master and garbage collector on the system nodes; no device plugin (the
    NVIDIA_DEVICE_PLUGIN release, or HyperPod's, has it). Keys from the chart's values.yaml at
    NVIDIA/k8s-device-plugin v0.19.3: `devicePlugin.enabled`, `gfd.enabled`, `affinity` and
    `tolerations` (shared by its DaemonSets: default affinity any NVIDIA node, tolerations
    CriticalAddonsOnly and nvidia.com/gpu), `nfd.worker.tolerations` (default nvidia.com/gpu=present
    only, not fmcluster's nvidia.com/gpu=true: replaced); and from the NFD chart it depends on
    (kubernetes-sigs/node-feature-discovery v0.17.3 deployment/helm/node-feature-discovery/values.yaml):
    `worker.affinity`, `master.nodeSelector`, `gc.nodeSelector`. The parent chart's
    `nfd.master.config.extraLabelNs: [nvidia.com]` (which lets NFD set GFD's nvidia.com labels)
    is kept: Helm merges the maps."""
    affinity, system = node_group_affinity(groups), system_node_selector()
    return {"devicePlugin": {"enabled": False}, "gfd": {"enabled": True},
            "affinity": affinity, "tolerations": [GPU_TOLERATION],
            "nfd": {"worker": {"affinity": affinity, "tolerations": [GPU_TOLERATION]},
                    "master": {"nodeSelector": dict(system)}, "gc": {"nodeSelector": dict(system)}}}


def system_node_selector() -> dict[str, str]:
    """A nodeSelector for the system nodes (the `system` node group's NODE_GROUP_LABEL)."""
    return {NODE_GROUP_LABEL: SYSTEM_NODE_GROUP}


@dataclass(frozen=True)
class Operator:
    """An OPERATOR_SUBCHARTS sub-chart as a release of its own on `eks`: its Helm `values` over the
    chart's defaults, and `node_selector`, where the chart has no value that places its controller,
    which the installer sets on the release's Deployments after the install."""

    subchart: str
    release: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    node_selector: Optional[Mapping[str, str]] = None


def operators() -> tuple[Operator, ...]:
    """The MPI operator and the training operator, their controllers on the system nodes. Keys from
    the sub-charts' values.yaml and templates (aws/sagemaker-hyperpod-cli
    helm_chart/HyperPodHelmChart/charts, see OPERATORS_NAMESPACE): mpi-operator's
    `mpiOperator.nodeSelector` (its default tolerations, HyperPod's node-health taint, are kept);
    training-operators has no placement value (values.yaml: image, createNamespace, schemes; its
    Deployment template sets no nodeSelector, affinity or tolerations), so its defaults stay (the
    schemes without mpijob, which the MPI operator serves) and the installer places it."""
    mpi, training = OPERATOR_SUBCHARTS
    return (Operator(mpi, mpi, OPERATORS_NAMESPACE, values={"mpiOperator": {"nodeSelector": system_node_selector()}}),
            Operator(training, training, OPERATORS_NAMESPACE, node_selector=system_node_selector()))


def lws_values() -> dict[str, Any]:
    """The LWS controller manager on the system nodes (charts/lws/values.yaml at kubernetes-sigs/lws
    v0.10.0: `nodeSelector`; no toleration needed there). `image.manager` is left alone: the source
    values.yaml says `tag: main` (pullPolicy Always), but hack/push-chart.sh publishes the chart with
    the tag of its version (v0.10.0, IfNotPresent), which `helm install --version 0.10.0` gets."""
    return {"nodeSelector": system_node_selector()}


# --- Kueue queues -----------------------------------------------------------------------------

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
COVERED_RESOURCES = ("cpu", "memory", GPU_RESOURCE, EFA_RESOURCE)
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class FlavorQuota:
    """One node group as a Kueue ResourceFlavor: its nodes' label, the toleration Kueue adds to
    pods it admits there, and the group's capacity at its maximum size."""

    name: str
    cpu: int
    memory_gib: int
    gpus: int
    efa: int
    node_labels: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    topology: Optional[str] = None  # the Kueue Topology of its nodes (UltraServer groups: NVLINK_TOPOLOGY)
    # IMEX_CHANNEL_RESOURCE: None where the ClusterQueue does not cover it (no UltraServer group in the
    # cluster); else one a node of an UltraServer group, 0 elsewhere (channel_quota)
    imex_channels: Optional[int] = None

    def covered(self) -> tuple[str, ...]:
        return COVERED_RESOURCES + ((IMEX_CHANNEL_RESOURCE,) if self.imex_channels is not None else ())

    def resources(self) -> list[dict[str, Any]]:
        quota = {"cpu": self.cpu, "memory": f"{self.memory_gib}Gi", GPU_RESOURCE: self.gpus, EFA_RESOURCE: self.efa,
                 IMEX_CHANNEL_RESOURCE: self.imex_channels}
        return [{"name": name, "nominalQuota": quota[name]} for name in self.covered()]


def channel_quota(model: ClusterModel, group: NodeGroup) -> Optional[int]:
    """The IMEX channels a group's flavor offers (FlavorQuota.imex_channels): one a node on an
    UltraServer group. The DRA driver (v25.8.0) offers each node one device of
    COMPUTE_DOMAIN_CHANNEL_CLASS (its DeviceClass selects channel id 0), and allocates it to one
    claim at a time (cmd/compute-domain-kubelet-plugin/device_state.go assertImexChannelNotAllocated;
    a DRA device without shared allocation): one pod a node holds a channel, so Kueue admits no
    more claims than the scheduler could place."""
    if not model.ultraserver_groups:
        return None
    return group.max_count if group.ultraserver else 0


def flavor_quotas(model: ClusterModel) -> list[FlavorQuota]:
    """A flavor per spec node group of the model (fmcluster.model.cluster; not the system nodes), CPU
    groups first: Kueue tries flavors in order, so a job without GPUs lands on CPU nodes, and a
    GPU job, finding no GPU quota there, moves on to the GPU groups."""
    quotas: list[FlavorQuota] = []
    for group in model.node_groups:
        nodes, instance = group.max_count, group.instance
        quotas.append(FlavorQuota(
            name=group.name, cpu=instance.vcpus * nodes, memory_gib=instance.memory_gib * nodes,
            gpus=instance.gpu_count * nodes, efa=group.efa_interfaces * nodes,
            node_labels=flavor_labels(group), tolerations=flavor_tolerations(group),
            topology=NVLINK_TOPOLOGY if group.ultraserver else None, imex_channels=channel_quota(model, group)))
    return sorted(quotas, key=lambda q: q.gpus > 0)


def flavor_labels(group: NodeGroup) -> dict[str, str]:
    """The node labels of a group's ResourceFlavor: its own group label."""
    return {NODE_GROUP_LABEL: group.name}


def flavor_tolerations(group: NodeGroup) -> tuple[dict[str, str], ...]:
    """The tolerations of a group's ResourceFlavor: the GPU taint's, on GPU groups."""
    return (GPU_TOLERATION,) if group.instance.is_gpu else ()


def flavor_placement(group: NodeGroup) -> dict[str, Any]:
    """A pod spec's nodeSelector and tolerations for the nodes of `group`, as its ResourceFlavor
    has them (so Kueue assigns the pod set that flavor and no other)."""
    return {"nodeSelector": flavor_labels(group), "tolerations": [dict(t) for t in flavor_tolerations(group)]}


def total_gpus(model: ClusterModel) -> int:
    """GPUs of every node group at its maximum size: the ClusterQueue's nvidia.com/gpu quota."""
    return sum(q.gpus for q in flavor_quotas(model))


def queue_names(spec: ClusterSpec) -> tuple[str, str]:
    """(ClusterQueue, LocalQueue): both named after the cluster."""
    return spec.name, spec.name


# --- NVLink domains: Kueue topology-aware scheduling and ComputeDomains -----------------------

NVLINK_CLIQUE_LABEL = "nvidia.com/gpu.clique"  # one value per NVLink domain (GFD: GPU_FEATURE_DISCOVERY)
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The Kueue Topology of the UltraServer flavors: NVLink domain, then node. Kueue 0.18 serves
# Topology as v1beta1 and v1beta2 (KUEUE_API; kubernetes-sigs/kueue v0.18.3
# config/components/crd/bases/kueue.x-k8s.io_topologies.yaml: levels 1 to 16 nodeLabels, unique,
# kubernetes.io/hostname only last); topology-aware scheduling is on by default (beta since 0.14).
# A job asks for one domain with the pod template annotation
# kueue.x-k8s.io/podset-required-topology: nvidia.com/gpu.clique.
NVLINK_TOPOLOGY = "nvlink-domain"
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"  # on a pod template
NVLINK_TOPOLOGY_LEVELS = (NVLINK_CLIQUE_LABEL, HOSTNAME_LABEL)


def topology_manifest() -> dict[str, Any]:
    """The Kueue Topology NVLINK_TOPOLOGY (cluster-scoped)."""
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": NVLINK_TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in NVLINK_TOPOLOGY_LEVELS]}}


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
        if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError(f"'{value}' is not a Kubernetes object name (a DNS subdomain)")
    if num_nodes < 0:
        raise ValueError(f"numNodes must be 0 or more, not {num_nodes}")
    return {"apiVersion": COMPUTE_DOMAIN_API, "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"numNodes": num_nodes, "channel": {"resourceClaimTemplate": {"name": claim}}}}


def kueue_manifests(model: ClusterModel) -> list[dict[str, Any]]:
    """ResourceFlavors (one per node group of the model), the ClusterQueue over all of them, and
    the LocalQueue in orchestrator.namespace that jobs name with the kueue.x-k8s.io/queue-name label;
    with an UltraServer node group, the Topology of its flavor first, and IMEX_CHANNEL_RESOURCE covered
    (the ComputeDomain channels its jobs claim: channel_quota)."""
    spec = model.spec
    cluster_queue, local_queue = queue_names(spec)
    quotas = flavor_quotas(model)
    topologies = [topology_manifest()] if model.ultraserver_groups else []
    flavors: list[dict[str, Any]] = []
    for q in quotas:
        flavor_spec: dict[str, Any] = {"nodeLabels": dict(q.node_labels)}
        if q.tolerations:
            flavor_spec["tolerations"] = [dict(t) for t in q.tolerations]
        if q.topology:
            flavor_spec["topologyName"] = q.topology
        flavors.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": q.name},
                        "spec": flavor_spec})
    queue = {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": list(quotas[0].covered() if quotas else COVERED_RESOURCES),
                 "flavors": [{"name": q.name, "resources": q.resources()} for q in quotas]}]}}
    local = {"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": local_queue, "namespace": spec.orchestrator.namespace},
             "spec": {"clusterQueue": cluster_queue}}
    return [*topologies, *flavors, queue, local]


# --- namespace and Lustre volume ---------------------------------------------------------------

BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
FSX_CSI_DRIVER = "fsx.csi.aws.com"
LUSTRE_CLAIM = "fsx-lustre"


def namespace_manifest(namespace: str) -> Optional[dict[str, Any]]:
    """The Namespace object, unless Kubernetes already has it."""
    if namespace in BUILTIN_NAMESPACES:
        return None
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def lustre_volume_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-fsx-lustre"


def lustre_manifests(spec: ClusterSpec, *, file_system_id: str, dns_name: str, mount_name: str
                     ) -> list[dict[str, Any]]:
    """A static PersistentVolume of the FSx for Lustre file system (FSx CSI driver, retained:
    deleting the claim never touches the data) and a ReadWriteMany claim bound to it in
    orchestrator.namespace."""
    lustre = spec.storage.lustre
    if lustre is None:
        raise ValueError(f"{spec.name} has no Lustre file system (storage.lustre)")
    capacity = f"{lustre.storage_capacity_gib}Gi"
    volume = lustre_volume_name(spec)
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
          "spec": {"capacity": {"storage": capacity}, "volumeMode": "Filesystem", "accessModes": ["ReadWriteMany"],
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                   "mountOptions": ["relatime", "flock"],
                   "csi": {"driver": FSX_CSI_DRIVER, "volumeHandle": file_system_id,
                           "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name}}}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": LUSTRE_CLAIM, "namespace": spec.orchestrator.namespace},
           "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume,
                    "resources": {"requests": {"storage": capacity}}}}
    return [pv, pvc]


# --- EKS add-ons ----------------------------------------------------------------------------


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
