"""What runs on each node group's nodes (fmcluster.model.node), resolved once by `resolve`: the
setup every node renderer reads, per control plane."""

from __future__ import annotations

import dataclasses
import re

import pytest

from fmcluster.facts import catalog
from fmcluster.model import node
from fmcluster.model.cluster import resolve
from fmcluster.model.node import Containers, HealthCheck, Home, SlurmPaths
from tests.support.specs import base_spec, on, validated, with_
from tests.support.stacks import example_spec

EXAMPLES = ("p5-hyperpod-eks.yaml", "p5-pcs.yaml", "p5en-eks.yaml", "p5en-reservation-pcs.yaml",
            "p6-b200-hyperpod-slurm.yaml", "p6-b300-pcs.yaml", "p6e-gb200-eks.yaml", "p6e-gb200-pcs.yaml")


def resolved(plane: str = "pcs", **paths):
    spec = on(plane) if plane != "pcs" else base_spec()
    for path, value in paths.items():
        spec = with_(spec, re.sub(r"\.(\d+)", r"[\1]", path.replace("__", ".")), value)
    return resolve(validated(spec))


@pytest.mark.parametrize("file", EXAMPLES)
def test_every_group_of_every_example_has_its_setup(file):
    m = resolve(example_spec(file))
    assert set(m.nodes) == {g.name for g in m.all_groups}
    for g in m.all_groups:
        setup = m.node(g)
        assert setup.efa == g.efa and setup.efa_devices == g.efa_interfaces
        assert (setup.containers is not None) == m.runs_containers(g)
        assert setup.deep_check == m.deep_checks(g)
        assert (setup.health is not None and setup.health.runner == node.TIMER) == m.checks_health(g)
        assert setup.slurm_prolog == (m.imex_prolog and g.role == node.COMPUTE and m.control_plane.type == "pcs")
        assert (setup.slurm is None) == (m.control_plane.scheduler == "kubernetes")


def test_the_setup_is_immutable():
    m = resolved()
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.node(m.group("gpu")).efa = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.nodes["gpu"] = m.nodes["gpu"]  # type: ignore[index]


def test_a_pcs_gpu_group():
    m = resolved(orchestrator__version="25.05", node_groups=[
        {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": {"type": "on-demand"}}])
    gpu = m.group("gpu")
    setup = m.node(gpu)
    assert setup.efa and setup.efa_devices == 32 and setup.lnet_efa_interfaces == 0  # the file system has no EFA
    assert (setup.scratch_path, setup.lustre_path, setup.mounts) == ("/scratch", "/fsx", ("/fsx", "/scratch"))
    assert setup.slurm == SlurmPaths("25.05", "/opt/aws/pcs/scheduler/slurm-25.05/bin",
                                     "slurmd-25.05.service slurmd.service")
    assert setup.containers == Containers.pcs("25.05", "/fsx")
    assert setup.health == HealthCheck(300, True, "timer", "pcs") and setup.deep_check
    assert setup.network_features and not setup.slurm_prolog and not setup.imex and not setup.slurm_metrics
    login = m.node(m.login)
    assert login.slurm_metrics and login.health is None and not login.deep_check and not login.network_features
    assert login.mounts == ("/fsx",) and login.containers == Containers.pcs("25.05", "/fsx")  # no instance store


def test_lnet_over_efa_where_the_node_puts_it():
    """An EFA-enabled file system: LNet on the catalog's EFA devices of an EFA node, where the
    node's script configures it (not on HyperPod Slurm, whose own Lustre mount does)."""
    for plane in ("pcs", "eks", "hyperpod-eks"):
        m = resolved(plane, storage__lustre__efa=True)
        assert m.node(m.group("gpu")).lnet_efa_interfaces == catalog.get("p5.48xlarge").lnet_efa_interfaces == 8
    m = resolved("hyperpod-slurm", storage__lustre__efa=True)
    assert m.group("gpu").lnet_efa_interfaces == 8 and m.node(m.group("gpu")).lnet_efa_interfaces == 0
    m = resolved(storage__lustre__efa=True, node_groups__0__efa=False)
    assert m.node(m.group("gpu")).lnet_efa_interfaces == 0


def test_the_shared_home_on_each_plane():
    m = resolved(storage__home={})
    assert m.node(m.group("gpu")).home == Home("openzfs") and m.node(m.group("gpu")).mounts == (
        "/fsx", "/home", "/scratch")
    m = resolved(storage__lustre__mount_path="/home")
    setup = m.node(m.group("gpu"))
    assert setup.home == Home("lustre") and setup.lustre_path == "/home" and setup.mounts == ("/home", "/scratch")
    assert setup.containers is not None and setup.containers.shared_path == "/home"
    m = resolved("eks", storage__home={})
    assert m.node(m.group("gpu")).home is None and m.node(m.group("gpu")).mounts == ()


def test_hyperpod_slurm_groups():
    m = resolved("hyperpod-slurm")
    controller, gpu = m.node(m.controller), m.node(m.group("gpu"))
    assert controller.slurm_metrics and not gpu.slurm_metrics
    assert controller.containers == gpu.containers == Containers.hyperpod("/fsx")
    assert gpu.slurm == SlurmPaths("", "/opt/slurm/bin") and gpu.health == HealthCheck(300, True, "timer",
                                                                                       "hyperpod-slurm")
    assert not gpu.deep_check and not gpu.slurm_prolog and not gpu.network_features  # HyperPod's own
    assert gpu.mounts == ("/fsx", "/scratch")


def test_kubernetes_groups_mount_nothing_themselves():
    m = resolved("eks")
    gpu = m.node(m.group("gpu"))
    assert (gpu.scratch_path, gpu.lustre_path, gpu.mounts, gpu.containers, gpu.slurm) == ("", "", (), None, None)
    assert gpu.health == HealthCheck(300, False, "metrics", "eks")  # its metrics, where the cluster is observed
    assert m.node(m.login).health is None
    hyperpod = resolved("hyperpod-eks")
    assert hyperpod.node(hyperpod.group("gpu")).scratch_path == "/scratch"  # its lifecycle script makes it
    assert hyperpod.node(hyperpod.group("gpu")).health is None


def test_the_imex_prolog_on_every_compute_group_of_a_pcs_cluster_with_ultraservers():
    m = resolve(example_spec("p6e-gb200-pcs.yaml"))
    gb200 = m.node(m.group("gb200"))
    assert gb200.slurm_prolog and gb200.imex and not gb200.network_features  # PCS's block topology places them
    assert not m.node(m.login).slurm_prolog
    mixed = resolved(orchestrator__version="25.05", node_groups=[
        {"name": "gpu", "instance_type": "p6e-gb200.36xlarge", "count": 2, "capacity": {"type": "on-demand"}},
        {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 1, "capacity": {"type": "on-demand"}}])
    cpu = mixed.node(mixed.group("cpu"))
    assert cpu.slurm_prolog and not cpu.imex  # Prolog= is cluster-wide: a prolog that does nothing


def test_health_follows_the_spec():
    m = resolved(health={"check_minutes": 2, "replace": False, "deep_check": False})
    setup = m.node(m.group("gpu"))
    assert setup.health == HealthCheck(120, False, "timer", "pcs") and not setup.deep_check
    cpu = resolved(node_groups__0__instance_type="c7i.8xlarge")
    assert cpu.node(cpu.group("gpu")).health is None and cpu.node(cpu.group("gpu")).containers is None
