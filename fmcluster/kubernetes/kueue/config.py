"""Kueue's API versions, its controller Configuration (the chart's default, and fmcluster's where it
adds the ComputeDomain channels or fair sharing between teams) and the chart's values."""

from __future__ import annotations

from typing import Any, Optional

import yaml

from fmcluster.facts.kubernetes import LABEL_PREFIX, system_node_selector
from fmcluster.model.cluster import ClusterModel

KUEUE_API = "kueue.x-k8s.io/v1beta2"

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


# Fair sharing (config.kueue.x-k8s.io/v1beta2 Configuration.fairSharing, at 0.18.3): on when the
# field is set (cmd/kueue/main.go), which needs preemptionStrategies, one of the sets
# pkg/config/validation.go accepts. Both strategies, as the Kueue documentation's example has
# them (site/content/en/docs/concepts/preemption.md, "Fair Sharing"): first preempt only where
# the preempting team ends no further above its share than the preempted one, then where it is
# below the other's share at the start.
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def kueue_configuration(model: ClusterModel) -> Optional[dict[str, Any]]:
    """Kueue's Configuration where fmcluster needs more than the chart's default, else None: with an
    UltraServer node group, the chart's default and the ComputeDomain channel class mapped to
    IMEX_CHANNEL_RESOURCE (the quota of kueue_manifests); with teams, fair sharing between their
    ClusterQueues."""
    if not model.ultraserver_groups and not model.teams:
        return None
    configuration = kueue_chart_configuration()
    if model.ultraserver_groups:
        configuration["resources"] = {"deviceClassMappings": [
            {"name": IMEX_CHANNEL_RESOURCE, "deviceClassNames": [COMPUTE_DOMAIN_CHANNEL_CLASS]}]}
    if model.teams:
        configuration["fairSharing"] = {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}
    return configuration


def kueue_values(model: ClusterModel) -> dict[str, Any]:
    """The Kueue controller on the system nodes; its Configuration (kueue_configuration) where
    fmcluster sets one."""
    values: dict[str, Any] = {"controllerManager": {"nodeSelector": system_node_selector()}}
    configuration = kueue_configuration(model)
    if configuration is not None:
        values["managerConfig"] = {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)}
    return values
