"""The table of what runs inside a Kubernetes cluster (fmcluster.kubernetes.charts.INSTALLS): which
rows each example's model gets, what each predicate says, and that the table is well formed."""

from pathlib import Path

import pytest

from fmcluster.facts.kubernetes import SYSTEM_NODE_GROUP
from fmcluster.kubernetes import charts, kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import ClusterModel, resolve
from fmcluster.spec import loader

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLUGINS = ["NvidiaDevicePlugin", "EfaDevicePlugin"]
NVLINK = ["NvidiaDraDriver", "GpuFeatureDiscovery"]
QUEUES = ["Kueue", "KueueQueues", "LeaderWorkerSet"]
TEAMS = ["TeamNamespaces"]  # where the spec has teams, before Kueue
OPERATORS = ["mpi-operator", "training-operators"]
EXPORTERS = ["NodeExporter", "DcgmExporter", "EfaNodeExporter"]
END = ["CapacityEndAccess"]  # a group on a Capacity Block or training plan (fmcluster.kubernetes.capacity_end)


def model(name: str, **edits: dict) -> ClusterModel:
    """The model of examples/NAME.yaml, with top-level sections updated by `edits`."""
    spec = loader.load(EXAMPLES / f"{name}.yaml").spec
    assert spec is not None
    for key, changes in edits.items():
        section = getattr(spec, key)
        spec = spec.model_copy(update={key: section.model_copy(update=changes) if changes else None})
    return resolve(spec)


def names(m: ClusterModel) -> list[str]:
    return [row.construct_id for row in charts.installs(m)]


@pytest.mark.parametrize("example, expected", [
    ("p5en-eks", PLUGINS + TEAMS + QUEUES + OPERATORS + ["LustreVolume", "HomeVolume"] + EXPORTERS + END),
    ("p6e-gb200-eks", PLUGINS + NVLINK + QUEUES + OPERATORS + ["LustreVolume"] + EXPORTERS + END),
    # HyperPod's dependencies chart brings the device plugins and the operators
    ("p5-hyperpod-eks", TEAMS + QUEUES + ["LustreVolume"] + EXPORTERS + END),
    ("p5-pcs", []), ("p5en-reservation-pcs", []), ("p6-b200-hyperpod-slurm", []), ("p6-b300-pcs", []),
    ("p6e-gb200-pcs", []),
])
def test_what_each_example_gets(example, expected):
    assert names(model(example)) == expected


def test_every_example_is_in_the_list_above():
    tested = {"p5en-eks", "p6e-gb200-eks", "p5-hyperpod-eks", "p5-pcs", "p5en-reservation-pcs",
              "p6-b200-hyperpod-slurm", "p6-b300-pcs", "p6e-gb200-pcs"}
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} == tested


def test_without_observability_or_lustre():
    """The exporters only where NAME-observability exists; the volume only with a file system."""
    unobserved = model("p5en-eks", observability={"prometheus": False, "grafana": False})
    assert not unobserved.observed and names(unobserved) == PLUGINS + TEAMS + QUEUES + OPERATORS + [
        "LustreVolume", "HomeVolume"] + END
    spec = model("p5en-eks").spec
    storage = spec.storage.model_copy(update={"lustre": None})
    no_lustre = resolve(spec.model_copy(update={"storage": storage}))
    assert "LustreVolume" not in names(no_lustre) and "LustreVolume" in names(model("p5en-eks"))


@pytest.mark.parametrize("example, on_kubernetes, on_eks, gpus, efa, ultraservers, lustre, observed", [
    ("p5en-eks", True, True, True, True, False, True, True),
    ("p6e-gb200-eks", True, True, True, True, True, True, True),
    ("p5-hyperpod-eks", True, False, True, True, False, True, True),
    ("p5-pcs", False, False, True, True, False, True, True),
    ("p6e-gb200-pcs", False, False, True, True, True, True, True),
])
def test_the_predicates(example, on_kubernetes, on_eks, gpus, efa, ultraservers, lustre, observed):
    m = model(example)
    assert (charts.on_kubernetes(m), charts.on_eks(m), charts.with_gpus(m), charts.with_efa(m),
            charts.with_ultraservers(m), charts.with_lustre(m), charts.observed(m)) == (
        on_kubernetes, on_eks, gpus, efa, ultraservers, lustre, observed)


def test_every_row_needs_a_kubernetes_plane():
    """A Slurm plane gets nothing, whatever else holds (p5-pcs has GPUs, EFA, Lustre, observability)."""
    for row in charts.INSTALLS:
        assert charts.on_kubernetes in row.when or charts.on_eks in row.when, row.construct_id


def test_the_table_is_well_formed():
    """Unique construct ids and releases; `after` names the system nodes, an EKS add-on or an
    earlier row; the groups of charts that tests and docs name are the table's rows."""
    ids = [row.construct_id for row in charts.INSTALLS]
    assert len(ids) == len(set(ids))
    releases = [row.release for row in charts.INSTALLS if isinstance(row, charts.Release)]
    assert len(releases) == len(set(releases))
    addons = {addon.name for addon in kubernetes.ADDONS}
    for index, row in enumerate(charts.INSTALLS):
        for name in row.after:
            assert name == SYSTEM_NODE_GROUP or name in addons or name in ids[:index], (row.construct_id, name)
    pinned = [row.chart for row in charts.INSTALLS if isinstance(row, charts.Release)
              and isinstance(row.chart, charts.Chart)]
    assert sorted(pinned, key=str) == sorted(charts.CHARTS + charts.ULTRASERVER_CHARTS + charts.METRICS_CHARTS,
                                             key=str)
    subcharts = [row.chart.chart for row in charts.INSTALLS if isinstance(row, charts.Release)
                 and isinstance(row.chart, charts.Subchart)]
    assert tuple(subcharts) == charts.OPERATOR_SUBCHARTS
    exporters = [row.chart for row in charts.INSTALLS if charts.observed in row.when]
    assert tuple(exporters) == charts.METRICS_CHARTS
    nvlink = [row.chart for row in charts.INSTALLS if charts.with_ultraservers in row.when]
    assert tuple(nvlink) == charts.ULTRASERVER_CHARTS


def test_the_controllers_wait_for_the_system_nodes():
    """Kueue and LWS (their webhooks serve before the stack goes on) and the operators come after
    the system nodes their controllers run on; the queues after Kueue; the volume after the CSI driver."""
    rows = {row.construct_id: row for row in charts.INSTALLS}
    waited = [row.construct_id for row in charts.INSTALLS if isinstance(row, charts.Release) and row.wait]
    assert waited == ["Kueue", "LeaderWorkerSet"]
    for name in ["Kueue", "LeaderWorkerSet", *OPERATORS]:
        assert rows[name].after == (SYSTEM_NODE_GROUP,)
    assert rows["KueueQueues"].after == ("Kueue",)
    assert rows["LustreVolume"].after == (kubernetes.FSX_CSI.name,)


def test_values_and_documents_come_from_the_model():
    m = model("p6e-gb200-eks")
    rows = {row.construct_id: row for row in charts.INSTALLS}
    groups = [g.name for g in m.ultraserver_groups]
    efa_types = [g.instance_type for g in m.node_groups if g.efa_interfaces]
    assert rows["EfaDevicePlugin"].values(m) == charts.efa_device_plugin_values(efa_types)
    assert rows["NvidiaDraDriver"].values(m) == charts.dra_driver_values(groups)
    assert rows["GpuFeatureDiscovery"].values(m) == charts.gpu_feature_discovery_values(groups)
    assert rows["Kueue"].values(m) == kueue.kueue_values(m)
    assert rows["KueueQueues"].documents(m, None) == kueue.kueue_manifests(m)
    file_system = kubernetes.FileSystem("fs-0123", "fs-0123.fsx.us-east-1.amazonaws.com", "abcdef")
    assert rows["LustreVolume"].documents(m, file_system) == kubernetes.lustre_manifests(
        m.spec, file_system_id="fs-0123", dns_name="fs-0123.fsx.us-east-1.amazonaws.com", mount_name="abcdef")
    with pytest.raises(ValueError, match="no id, DNS or mount name"):
        rows["LustreVolume"].documents(m, None)


# --- the shared home (storage.home) ------------------------------------------------------------

def test_the_home_volume_only_with_a_home():
    assert "HomeVolume" in names(model("p5en-eks"))
    assert "HomeVolume" not in names(model("p6e-gb200-eks")) and "HomeVolume" not in names(model("p6-b300-pcs"))


def test_home_volume_is_a_retained_nfs_volume_and_its_claim():
    m = model("p5en-eks")
    rows = {row.construct_id: row for row in charts.INSTALLS}
    dns = "fs-0aaaaaaaaaaaaaaaa.fsx.us-east-2.amazonaws.com"
    pv, pvc, *teams = rows["HomeVolume"].documents(m, kubernetes.FileSystem("", "", "", dns))
    assert len(teams) == 2 * len(m.teams)  # a volume and a claim per team namespace
    assert pv["kind"] == "PersistentVolume" and pv["metadata"]["name"] == f"{m.name}-home"
    assert pv["spec"]["nfs"] == {"server": dns, "path": "/fsx"}
    assert "nfsvers=4.1" in pv["spec"]["mountOptions"] and "hard" in pv["spec"]["mountOptions"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"] and pv["spec"]["capacity"] == {"storage": "512Gi"}
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["metadata"] == {"name": "home",
                                                                         "namespace": m.spec.orchestrator.namespace}
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] and pvc["spec"]["storageClassName"] == ""
    with pytest.raises(ValueError, match="no DNS name"):
        rows["HomeVolume"].documents(m, kubernetes.FileSystem("fs-1", "dns", "mnt"))


def test_home_objects_are_valid_kubernetes_objects():
    """Names Kubernetes accepts (DNS subdomain for the volume, label for the claim), the API's
    field names, and a claim that fits its volume."""
    from fmcluster.facts.kubernetes import object_name_valid
    m = model("p5en-eks")
    pv, pvc = kubernetes.home_manifests(m.spec, dns_name="fs-0aaaaaaaaaaaaaaaa.fsx.us-east-2.amazonaws.com")
    assert object_name_valid(pv["metadata"]["name"]) and object_name_valid(pvc["metadata"]["name"])
    assert set(pv["spec"]) == {"capacity", "volumeMode", "accessModes", "persistentVolumeReclaimPolicy",
                               "storageClassName", "mountOptions", "nfs"}
    assert set(pvc["spec"]) == {"accessModes", "storageClassName", "volumeName", "resources"}
    assert pvc["spec"]["resources"]["requests"] == pv["spec"]["capacity"]


def test_each_team_namespace_gets_its_home_claim():
    """A claim binds one volume: each team's namespace has a home claim of its own, its volume the
    one file system."""
    from fmcluster.kubernetes.manifests import home_manifests

    spec = loader.load(EXAMPLES / "p5en-eks.yaml").spec
    documents = home_manifests(spec, dns_name="fs-1.fsx.us-east-2.amazonaws.com",
                               team_namespaces=("pretrain", "research"))
    claims = {d["metadata"]["namespace"]: d["spec"]["volumeName"] for d in documents
              if d["kind"] == "PersistentVolumeClaim"}
    assert claims == {spec.orchestrator.namespace: "p5en-eks-home", "pretrain": "p5en-eks-home-pretrain",
                      "research": "p5en-eks-home-research"}
    servers = {d["spec"]["nfs"]["server"] for d in documents if d["kind"] == "PersistentVolume"}
    assert servers == {"fs-1.fsx.us-east-2.amazonaws.com"}


def test_each_team_namespace_mounts_only_its_own_volume():
    """A team member can run a pod as root: a team's claim is its own root-squashed OpenZFS volume
    (/fsx/TEAM, the storage stack's), never the root volume that holds every team's homes; the
    cluster's namespace (the admins') keeps the root volume."""
    from fmcluster.kubernetes.manifests import home_manifests

    spec = loader.load(EXAMPLES / "p5en-eks.yaml").spec
    documents = home_manifests(spec, dns_name="fs-1.fsx.us-east-2.amazonaws.com",
                               team_namespaces=("pretrain", "data-eng"))
    paths = {d["metadata"]["name"]: d["spec"]["nfs"]["path"] for d in documents if d["kind"] == "PersistentVolume"}
    assert paths == {"p5en-eks-home": "/fsx", "p5en-eks-home-pretrain": "/fsx/pretrain",
                     "p5en-eks-home-data-eng": "/fsx/data_eng"}
