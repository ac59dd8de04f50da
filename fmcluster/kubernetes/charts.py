"""What runs inside a Kubernetes cluster, as one table (INSTALLS): each Helm chart pinned, its
values from the model, when a cluster gets it and what it comes after, with the manifests that
follow it. Pins are read from each chart's source (the comments); bump them on purpose. No
aws_cdk here: `fmcluster_cdk/stacks/eks.py` installs the table's rows, in its order."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from fmcluster.facts.kubernetes import (
    EFA_LABEL,
    GPU_LABEL,
    GPU_TOLERATION,
    NODE_GROUP_LABEL,
    NOT_READY_TOLERATION,
    SYSTEM_NODE_GROUP,
    TRUE,
    system_node_selector,
)
from fmcluster.facts.node import TEXTFILE_DIR
from fmcluster.kubernetes import kueue
from fmcluster.kubernetes.capacity_end import rbac_manifests, with_kubernetes_ends
from fmcluster.kubernetes.manifests import FSX_CSI, FileSystem, home_manifests, lustre_manifests
from fmcluster.model.cluster import ClusterModel

TEXTFILE_MOUNT = "/host/fmcluster-textfile"  # where the node exporter's container sees it


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

# The pinned charts of the workloads, by group (INSTALLS says which cluster gets each, and when):
# the device plugins and Kueue and LWS; the exporters; the UltraServer charts.
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
METRICS_CHARTS = (NODE_EXPORTER, DCGM_EXPORTER, EFA_NODE_EXPORTER)
ULTRASERVER_CHARTS = (DRA_DRIVER, GPU_FEATURE_DISCOVERY)

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


def lws_values() -> dict[str, Any]:
    """The LWS controller manager on the system nodes (charts/lws/values.yaml at kubernetes-sigs/lws
    v0.10.0: `nodeSelector`; no toleration needed there). `image.manager` is left alone: the source
    values.yaml says `tag: main` (pullPolicy Always), but hack/push-chart.sh publishes the chart with
    the tag of its version (v0.10.0, IfNotPresent), which `helm install --version 0.10.0` gets."""
    return {"nodeSelector": system_node_selector()}


@dataclass(frozen=True)
class Subchart:
    """A sub-chart of HyperPod's dependencies chart (OPERATOR_SUBCHARTS, at the commit
    fmcluster_cdk pins) as a release of its own. `node_selector`, where the chart has no value
    that places its controller, is set by the installer on the release's Deployments."""

    chart: str
    release: str
    namespace: str
    node_selector: Optional[Mapping[str, str]] = None


Predicate = Callable[[ClusterModel], bool]
Values = Callable[[ClusterModel], dict[str, Any]]
Documents = Callable[[ClusterModel, Optional[FileSystem]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Release:
    """A row of INSTALLS: a Helm release of a pinned chart (Chart) or of a HyperPod sub-chart
    (Subchart), installed when every predicate of `when` holds for the model, with `values` made
    from the model, after the node groups, add-ons and earlier rows named in `after`; `wait`: the
    install waits for its resources (a webhook that must serve before the stack goes on).
    `construct_id` names it in the cluster stack (its logical IDs)."""

    construct_id: str
    chart: Union[Chart, Subchart]
    values: Values
    when: tuple[Predicate, ...]
    after: tuple[str, ...] = ()
    wait: bool = False

    @property
    def release(self) -> str:
        return self.chart.release

    @property
    def namespace(self) -> str:
        return self.chart.namespace

    def wanted(self, model: ClusterModel) -> bool:
        return all(predicate(model) for predicate in self.when)


@dataclass(frozen=True)
class Manifests:
    """A row of INSTALLS: Kubernetes objects applied with kubectl in orchestrator.namespace (made
    first where Kubernetes has not got it), when every predicate of `when` holds, after what
    `after` names. `documents` are made from the model and the storage stack's file system."""

    construct_id: str
    documents: Documents
    when: tuple[Predicate, ...]
    after: tuple[str, ...] = ()

    def wanted(self, model: ClusterModel) -> bool:
        return all(predicate(model) for predicate in self.when)


Install = Union[Release, Manifests]


def on_kubernetes(model: ClusterModel) -> bool:
    """A Kubernetes plane: `eks` or `hyperpod-eks`."""
    return model.control_plane.scheduler == "kubernetes"


def on_eks(model: ClusterModel) -> bool:
    """`eks` itself: on `hyperpod-eks` the HyperPod dependencies chart brings the device plugins and
    the MPI and training operators."""
    return on_kubernetes(model) and not model.control_plane.hyperpod


def with_gpus(model: ClusterModel) -> bool:
    return any(g.instance.is_gpu for g in model.node_groups)


def with_efa(model: ClusterModel) -> bool:
    return any(g.efa_interfaces for g in model.node_groups)


def with_ultraservers(model: ClusterModel) -> bool:
    return bool(model.ultraserver_groups)


def with_lustre(model: ClusterModel) -> bool:
    return model.spec.storage.lustre is not None


def with_home(model: ClusterModel) -> bool:
    return model.spec.storage.home is not None


def observed(model: ClusterModel) -> bool:
    """NAME-observability exists: the exporters feed its managed scraper."""
    return model.observed


def efa_instance_types(model: ClusterModel) -> list[str]:
    return [g.instance_type for g in model.node_groups if g.efa_interfaces]


def ultraserver_group_names(model: ClusterModel) -> list[str]:
    return [g.name for g in model.ultraserver_groups]


def lustre_volume(model: ClusterModel, file_system: Optional[FileSystem]) -> list[dict[str, Any]]:
    """The Lustre file system's PersistentVolume and claim (lustre_manifests)."""
    if file_system is None:
        raise ValueError(f"{model.name} has a Lustre file system, but no id, DNS or mount name for it")
    return lustre_manifests(model.spec, file_system_id=file_system.id, dns_name=file_system.dns_name,
                            mount_name=file_system.mount_name,
                            team_namespaces=kueue.team_namespaces(model))


def with_teams(model: ClusterModel) -> bool:
    return bool(model.teams)


def team_namespaces(model: ClusterModel) -> list[dict[str, Any]]:
    """The teams' Namespaces and RoleBindings, the ClusterRole that adds the kits' job kinds to
    `edit` (kueue.team_namespace_manifests, kueue.job_kinds_role), and the admission policy that
    keeps GPU Pods there in the queues (kueue.gpu_pod_policy_manifests): before every other
    manifest, which may place objects in them."""
    documents = [kueue.job_kinds_role(), *kueue.gpu_pod_policy_manifests()]
    for team in model.teams:
        # a team named like orchestrator.namespace: that Namespace is the stack's own manifest
        documents += [d for d in kueue.team_namespace_manifests(team)
                      if not (d["kind"] == "Namespace" and d["metadata"]["name"] == model.spec.orchestrator.namespace)]
    return documents


def home_volume(model: ClusterModel, file_system: Optional[FileSystem]) -> list[dict[str, Any]]:
    """The shared home's PersistentVolume and claim (home_manifests)."""
    if file_system is None or not file_system.home_dns_name:
        raise ValueError(f"{model.name} has a shared home, but no DNS name for it")
    return home_manifests(model.spec, dns_name=file_system.home_dns_name,
                          team_namespaces=kueue.team_namespaces(model))


MPI_OPERATOR, TRAINING_OPERATORS = (
    # mpi-operator's `mpiOperator.nodeSelector` places it (its default tolerations, HyperPod's
    # node-health taint, are kept); training-operators has no placement value (values.yaml: image,
    # createNamespace, schemes; its Deployment template sets no nodeSelector, affinity or
    # tolerations), so its defaults stay (the schemes without mpijob, which the MPI operator
    # serves) and the installer places it. See OPERATORS_NAMESPACE.
    Subchart(OPERATOR_SUBCHARTS[0], OPERATOR_SUBCHARTS[0], OPERATORS_NAMESPACE),
    Subchart(OPERATOR_SUBCHARTS[1], OPERATOR_SUBCHARTS[1], OPERATORS_NAMESPACE,
             node_selector=MappingProxyType(system_node_selector())))

TEAM_NAMESPACES = "TeamNamespaces"  # the row every later manifest comes after, where there are teams

# Everything fmcluster installs inside a Kubernetes cluster, in install order (which is also the
# order of the cluster stack's resources). `after` names a node group (the system nodes the
# controllers run on), an EKS add-on or an earlier row's construct id.
INSTALLS: tuple[Install, ...] = (
    Release("NvidiaDevicePlugin", NVIDIA_DEVICE_PLUGIN, lambda m: nvidia_device_plugin_values(),
            when=(on_eks, with_gpus)),
    Release("EfaDevicePlugin", EFA_DEVICE_PLUGIN, lambda m: efa_device_plugin_values(efa_instance_types(m)),
            when=(on_eks, with_efa)),
    Release("NvidiaDraDriver", DRA_DRIVER, lambda m: dra_driver_values(ultraserver_group_names(m)),
            when=(on_kubernetes, with_ultraservers)),
    Release("GpuFeatureDiscovery", GPU_FEATURE_DISCOVERY,
            lambda m: gpu_feature_discovery_values(ultraserver_group_names(m)),
            when=(on_kubernetes, with_ultraservers)),
    Manifests(TEAM_NAMESPACES, lambda m, _: team_namespaces(m), when=(on_kubernetes, with_teams)),
    Release("Kueue", KUEUE, kueue.kueue_values, when=(on_kubernetes,), after=(SYSTEM_NODE_GROUP,), wait=True),
    Manifests("KueueQueues", lambda m, _: kueue.kueue_manifests(m), when=(on_kubernetes,), after=("Kueue",)),
    Release("LeaderWorkerSet", LWS, lambda m: lws_values(), when=(on_kubernetes,), after=(SYSTEM_NODE_GROUP,),
            wait=True),
    Release(MPI_OPERATOR.release, MPI_OPERATOR, lambda m: {"mpiOperator": {"nodeSelector": system_node_selector()}},
            when=(on_eks,), after=(SYSTEM_NODE_GROUP,)),
    Release(TRAINING_OPERATORS.release, TRAINING_OPERATORS, lambda m: {}, when=(on_eks,), after=(SYSTEM_NODE_GROUP,)),
    Manifests("LustreVolume", lustre_volume, when=(on_kubernetes, with_lustre), after=(FSX_CSI.name,)),
    Manifests("HomeVolume", home_volume, when=(on_kubernetes, with_home)),
    Release("NodeExporter", NODE_EXPORTER, lambda m: node_exporter_values(), when=(on_kubernetes, observed)),
    Release("DcgmExporter", DCGM_EXPORTER, lambda m: dcgm_exporter_values(), when=(on_kubernetes, observed)),
    Release("EfaNodeExporter", EFA_NODE_EXPORTER, lambda m: efa_node_exporter_values(),
            when=(on_kubernetes, observed)),
    # what the functions that handle the end of a Capacity Block or training plan may do (capacity_end)
    Manifests("CapacityEndAccess", lambda m, _: rbac_manifests(m), when=(on_kubernetes, with_kubernetes_ends)),
)


def installs(model: ClusterModel) -> tuple[Install, ...]:
    """The rows of INSTALLS a cluster of this model gets, in order."""
    return tuple(row for row in INSTALLS if row.wanted(model))
