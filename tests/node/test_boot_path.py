"""The boot path, tested by running it: every node script as a real process in a sandboxed node
(tests/support/sandbox.py) whose operating-system commands are recording fakes, scenario by scenario.

The AWS PCS node lifecycle scripts as PCS runs them (fmcluster.node.pcs: the slurmd guard of
the user data, the NodeBootstrapped scripts, slurmd, the NodeReady scripts; tests/support/nodes.py),
the Amazon EKS user data's shell part (fmcluster.node.eks.node_script, as compact as on a node: its
body xz and base85, decoded by the script itself) and the SageMaker HyperPod lifecycle folders
(fmcluster.node.hyperpod: on_init.sh and its hooks), each rendered from a model resolved from the
test spec (tests/support/nodes.py). A node runs on its cluster's image: the
image bake (fmcluster.node.image) really ran, once per Ubuntu release, with the real git, make and
gcc against local stand-ins of the upstream repositories (tests/support/standins.py, and
baked_files in tests/support/sandbox.py), so every test renders its scripts with the stand-ins' commits
as the pins (`standin_pins`; the real pins are checked against upstream by
test_the_container_runtime_pins_are_recorded). The assertions read what the node did (the
recorded commands and their order, its mounts, the files written, the units that came up after
a reboot), never the script text.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from fmcluster.facts import catalog
from fmcluster.facts import kubernetes as k8s
from fmcluster.facts import node as node_facts
from fmcluster.model import node as node_setup
from fmcluster.node import eks as node_eks
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import nccl as node_nccl
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import runtime as node_runtime
from fmcluster.node import shell as node_shell
from fmcluster.node.refs import NodeRefs
from tests.support import nodes, standins
from tests.support.nodes import NO_METRICS, REFS, URL, first_boot, run_stage
from tests.support.sandbox import (
    IMAGE_PCS_SLURM,
    Sandbox,
    Scenario,
    document_script,
    mount_unit_name,
    slurm_headers,
)
from tests.support.sandbox import node_image as sandbox_node_image
from tests.support.stacks import FSX
from tests.support.user_data_size import with_longest_values

GPU_TYPES = [t for t in catalog.known_names(gpu_only=True)]
SLURMD_DROPIN = "/etc/systemd/system/slurmd.service.d/50-fmcluster-node-ready.conf"
READY_METRIC = f"{node_facts.TEXTFILE_DIR}/fmcluster-ready.prom"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
REAL_PINS = {name: getattr(node_runtime, name) for name in ("ENROOT_COMMIT", "ENROOT_SUBMODULES", "PYXIS_COMMIT")}
PCS_SLURM = IMAGE_PCS_SLURM  # the Slurm the sandbox's PCS image has (the model's: tests/support/nodes.py)
# a group of UltraServers beside the group under test: the cluster runs the IMEX prolog
GB200 = {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2, "capacity": {"type": "on-demand"}}


@pytest.fixture(autouse=True)
def standin_pins(request, monkeypatch):
    """The scripts rendered here pin the stand-ins' commits (bootstrap's own settings), except in
    tests marked real_pins."""
    if request.node.get_closest_marker("real_pins") is None:
        for name, value in standins.pristine().pins().items():
            monkeypatch.setattr(node_runtime, name, value)


def world(instance_type: str, **changes) -> Scenario:
    """The node of an instance type as the catalog describes it (an UltraServer's AMI has NVIDIA's
    IMEX packages), changed by `changes`."""
    instance = catalog.get(instance_type)
    return Scenario(**{"gpus": instance.gpu_count, "nvme_disks": instance.nvme_disks,
                       "efa_devices": instance.max_efa_interfaces, "imex": instance.ultraserver, **changes})


def pcs(instance_type="p5.48xlarge", *, metrics=True, **options) -> tuple[pcs_node.LifecycleScript, ...]:
    """The node lifecycle scripts of a PCS group of one node of `instance_type` (tests/support/nodes.py's
    pcs_group, on the sandbox image's Slurm; `metrics`: the cluster is observed)."""
    return pcs_node.node_actions(*nodes.pcs_group(instance_type, **options), REFS if metrics else NO_METRICS)


def boot(tmp_path, instance_type="p5.48xlarge", scenario=None, **render):
    """A PCS node's first boot (tests/support/nodes.py's first_boot): the node and its outcome."""
    node = Sandbox(tmp_path, scenario or world(instance_type))
    return node, first_boot(node, pcs(instance_type, **render))


def index(lines: list[str], prefix: str) -> int:
    """Where the first recorded command starting with `prefix` is."""
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


def ready_metric(node: Sandbox) -> str:
    return node.file(READY_METRIC).splitlines()[-1]


# --- the happy path, every GPU type ---------------------------------------------------------------

@pytest.mark.parametrize("instance_type", GPU_TYPES)
def test_happy_path(tmp_path, instance_type):
    node, result = boot(tmp_path, instance_type)
    assert result.returncode == 0, result.stderr
    instance = catalog.get(instance_type)
    mounts = node.mounts()
    assert mounts["/scratch"].backing == "instance-store"
    assert mounts["/fsx"].fstype == "lustre" and mounts["/fsx"].source == FSX.source
    assert mounts["/fsx"].extra == "lnet=tcp"  # the file system has no EFA: LNet is left alone
    assert not node.calls("lnetctl")
    if instance.nvme_disks > 1:
        (create,) = node.lines("mdadm")
        assert create.startswith(f"mdadm --create /dev/md/scratch --level=0 --raid-devices={instance.nvme_disks} --run")
        assert "--force" not in create
    else:
        assert not node.calls("mdadm")
    nccl = node.file(node_nccl.NCCL_ENV_FILE)
    assert ("export FI_PROVIDER=efa" in nccl) == instance.efa_supported  # g6e below 8xlarge: no EFA
    assert ("export FI_EFA_USE_DEVICE_RDMA=1" in nccl) == instance.device_rdma  # not on the L40S types
    assert ready_metric(node) == 'fmcluster_node_ready{reason=""} 1'
    assert f"node ready: {instance_type}" in result.stderr


def test_steps_in_order(tmp_path):
    """The readiness gate before anything that can fail, unattended upgrades restrained first,
    the node-specific steps (disks, file system), the readiness check, then metrics (the image's
    packages checked) once slurmd runs (NodeReady)."""
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = node.lines()
    gate = index(lines, "install -d -m 0755 /etc/systemd/system/slurmd.service.d")
    protect = index(lines, "install -d -m 0755 /etc/needrestart/conf.d")
    scratch = index(lines, "mdadm --create")
    fsx = index(lines, "mount -t lustre")
    ready = index(lines[fsx:], "nvidia-smi -L") + fsx
    assert gate < protect < scratch < fsx < ready < index(lines, "dpkg-query")
    assert node.exists(SLURMD_DROPIN) and node.exists(f"{node_facts.FMCLUSTER_LIB}/node-ready")


def test_the_eks_node_keeps_its_bootstrap_program(tmp_path):
    """The compact user data (Amazon EKS's) decodes its body to BODY_FILE and runs it: what the
    node keeps is what was rendered, and the verbatim (readable) script is the same program."""
    node = eks_node(tmp_path)
    compact = eks()
    assert node.run(compact).returncode == 0
    assert node.file(node_shell.BODY_FILE) == node_shell.unpack(compact)
    verbatim = eks(compact=False)
    assert "FMCLUSTER_BOOTSTRAP" not in verbatim
    other = eks_node(tmp_path / "verbatim")
    assert other.run(verbatim).returncode == 0
    loader = f"install -d -m 0755 {node_facts.FMCLUSTER_LIB}"  # where the compact script unpacks its body
    assert node.lines()[0] == loader and other.lines() == node.lines()[1:]


# Deploy-time values as the stacks pass them (CDK tokens: the lifecycle scripts' arguments), each
# measured at its longest (tests/support/user_data_size.py).
TOKENS = {"DNSName": "${Token[TOKEN.1]}", "LustreMountName": "${Token[TOKEN.2]}",
          "PrometheusEndpoint": "${Token[TOKEN.3]}"}
TOKEN_REFS = NodeRefs(lustre_dns_name=TOKENS["DNSName"], lustre_mount_name=TOKENS["LustreMountName"],
                      remote_write_url=TOKENS["PrometheusEndpoint"] + "api/v1/remote_write")


def longest_arguments(instance_type: str, *, login: bool = False) -> dict[str, list[str]]:
    """The arguments of the PCS node lifecycle scripts of the largest kind of node of
    `instance_type` (EFA, LNet over EFA, the IMEX prolog, metrics, containers; the login nodes,
    with the Slurm collector), script name -> its arguments, every deploy-time value at its longest."""
    made, group = nodes.pcs_group(instance_type, lustre="efa", name="login" if login else "gpu",
                            edits={"name": "c" * 32, "node_groups[1]": GB200})  # the longest cluster name
    scripts = pcs_node.node_actions(made, group, TOKEN_REFS)
    assert any("setup_containers" in s.text for s in scripts)
    return {s.name: [with_longest_values(a, TOKENS) for a in s.arguments] for s in scripts}


def test_the_lifecycle_scripts_arguments_fit_pcs_limits():
    """AWS PCS takes at most MAX_ARGUMENTS arguments of MAX_ARGUMENT characters a script."""
    for name, arguments in longest_arguments("p6-b300.48xlarge").items():
        assert len(arguments) <= pcs_node.MAX_ARGUMENTS and arguments, name
        assert all(len(a) <= pcs_node.MAX_ARGUMENT for a in arguments), (name, arguments)


# --- the instance store ---------------------------------------------------------------------------

def test_disks_that_appear_late_are_waited_for(tmp_path):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", disks_at=20))
    assert result.returncode == 0, result.stderr
    (create,) = node.calls("mdadm")
    assert create.clock >= 20 and create.args[5:] == tuple(f"/dev/nvme{i}n1" for i in range(1, 9))
    assert node.mounts()["/scratch"].backing == "instance-store"


def test_disks_that_never_appear_leave_the_node_not_ready(tmp_path):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", disks_at=10_000))
    assert result.returncode == 1
    assert "no instance-store NVMe disk found" in result.stderr
    assert "/scratch" not in node.mounts()
    # the container runtime, whose node-local files are on /scratch, is not set up either
    assert ready_metric(node) == ('fmcluster_node_ready{reason="/scratch is not mounted; the Pyxis plugin is not '
                                  'installed; /scratch/enroot/runtime is missing"} 0')
    assert node.run("systemctl start slurmd.service", name="start.sh").returncode != 0
    assert node.unit_state("slurmd.service") == "failed"


def test_dlami_instance_store_is_bound_and_never_rebuilt(tmp_path):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", dlami_nvme=0))
    assert result.returncode == 0, result.stderr
    assert not node.calls("mdadm") and not node.calls("mkfs.ext4")
    scratch = node.mounts()["/scratch"]
    assert scratch.source == node_facts.DLAMI_NVME_PATH and scratch.backing == "instance-store"
    bind = ["/opt/dlami/nvme", "/scratch", "none", "bind,nofail,x-systemd.requires=dlami-nvme.service", "0", "0"]
    assert bind in node.fstab()


def test_dlami_unit_still_running_is_waited_for(tmp_path):
    """The unit is still setting the disks up when the script starts: the script waits for it
    instead of racing it with an array of its own."""
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", dlami_nvme=30))
    assert result.returncode == 0, result.stderr
    assert not node.calls("mdadm")
    polls = [c for c in node.calls("systemctl") if c.args[:1] == ("show",)]
    assert len(polls) > 1 and polls[-1].clock >= 30
    assert node.mounts()["/scratch"].source == node_facts.DLAMI_NVME_PATH


def test_without_instance_store_there_is_no_scratch(tmp_path):
    node, result = boot(tmp_path, "m7i.2xlarge", efa=False)
    assert result.returncode == 0, result.stderr
    assert "/scratch" not in node.mounts() and not node.calls("lsblk") and not node.calls("mdadm")
    assert "REQUIRED_MOUNTS=/fsx" in node.file(f"{node_shell.FMCLUSTER_ETC}/node-ready.env")
    assert "FI_PROVIDER" not in node.file(node_nccl.NCCL_ENV_FILE)


# --- a reboot replays what the first boot left ----------------------------------------------------

@pytest.mark.parametrize("dlami", [None, 0])
def test_reboot_gives_the_same_scratch_on_the_same_disks(tmp_path, dlami):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", dlami_nvme=dlami))
    assert result.returncode == 0, result.stderr
    first = node.mounts()["/scratch"]
    after = node.reboot()
    assert not after.failed, after
    scratch = node.mounts()["/scratch"]
    assert scratch.backing == "instance-store" and scratch.source == first.source
    if dlami is not None:
        assert after.order.index("dlami-nvme.service") < after.order.index("scratch.mount")
    assert not node.calls("mdadm") and not node.calls("mkfs.ext4")  # nothing rebuilt or reformatted
    assert "slurmd.service" in after.started and node.mounts()["/fsx"].fstype == "lustre"


def test_the_boot_simulation_catches_a_bind_that_races_the_ami(tmp_path):
    """The bind line the scripts used to write (no dependency on dlami-nvme.service): after a
    reboot /scratch is the empty directory on the root volume. The simulation must see that, or
    the test above proves nothing."""
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", dlami_nvme=0))
    assert result.returncode == 0, result.stderr
    fstab = node.file("/etc/fstab").replace(",x-systemd.requires=dlami-nvme.service", "")
    (node.root / "etc/fstab").write_text(fstab)
    node.reboot()
    assert node.mounts()["/scratch"].backing == "root"


def test_reboot_configures_lnet_before_mounting(tmp_path):
    node, result = boot(tmp_path, lustre="efa")
    assert result.returncode == 0, result.stderr
    after = node.reboot()
    assert after.order.index(prog.LNET_EFA_UNIT) < after.order.index(mount_unit_name("/fsx"))
    assert node.mounts()["/fsx"].extra == "lnet=efa" and "slurmd.service" in after.started


def test_reboot_with_a_gpu_lost_keeps_slurmd_down(tmp_path):
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    node.set_scenario(gpus=7)
    after = node.reboot()
    assert "slurmd.service" in after.failed
    assert ready_metric(node) == 'fmcluster_node_ready{reason="7 of 8 GPUs visible"} 0'


# --- nothing downloaded at boot ------------------------------------------------------------------

def network_calls(node: Sandbox) -> list[str]:
    """What a node did that needs the internet or builds: git, make, apt-get, curl to a URL."""
    lines = [c.line for c in node.calls() if c.command in ("git", "make", "apt-get")]
    return lines + [c.line for c in node.calls("curl") if any(a.startswith(("https://", "http://")) and
                                                               "169.254.169.254" not in a for a in c.args)]


@pytest.mark.parametrize("name, instance_type", [("gpu", "p5.48xlarge"), ("login", "m7i.2xlarge")])
def test_a_node_on_its_image_boots_ready_without_the_internet(tmp_path, name, instance_type):
    """Every download fails (git, curl to a URL, apt-get: the fakes refuse), and the node on its
    cluster's image (a GPU compute node with the cluster's prolog, a login node with the Slurm
    collector) boots ready all the same, metrics and containers included: nothing is fetched or
    built at boot."""
    scenario = world(instance_type, network=False, dpkg_lock_until=100_000)
    node = Sandbox(tmp_path, scenario)
    made, group = nodes.pcs_group(edits={"node_groups[1]": GB200}, name=name)
    assert group.instance_type == instance_type
    result = first_boot(node, pcs_node.node_actions(made, group, REFS))
    assert result.returncode == 0, result.stderr
    assert ready_metric(node) == 'fmcluster_node_ready{reason=""} 1'
    assert "fmcluster-prometheus-agent.service" in node.enabled() and node.exists(PCS_PLUGSTACK)
    assert network_calls(node) == []


def test_an_image_without_the_exporters_fails_metrics_only(tmp_path):
    """An ami_id without the exporters' packages: the metrics step fails and says what to do;
    nothing is installed, and the node is ready otherwise (metrics are not a job's)."""
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", exporters=False))
    assert result.returncode == 1 and "setup_metrics failed" in result.stderr
    assert "prometheus-node-exporter 1.7.0-1* is not installed" in result.stderr
    assert "bake it into the group's ami_id" in result.stderr
    assert not node.calls("apt-get") and "fmcluster-prometheus-agent.service" not in node.enabled()
    assert node.mounts()["/fsx"].fstype == "lustre" and ready_metric(node).endswith(" 1")


# --- the file system ------------------------------------------------------------------------------

def test_lustre_mount_retries_until_it_works(tmp_path):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", lustre_mount_fails=3))
    assert result.returncode == 0, result.stderr
    attempts = [c for c in node.calls("mount") if c.args[:2] == ("-t", "lustre")]
    assert len(attempts) == 4
    assert node.fstab().count([FSX.source, "/fsx", "lustre", prog.FSX_MOUNT_OPTIONS, "0", "0"]) == 1


def test_lustre_that_never_mounts_keeps_slurmd_down_and_the_node_is_terminated(tmp_path):
    """The storage script goes on (CONTINUE); the readiness check fails the node, which AWS PCS
    terminates (TERMINATE) before slurmd or metrics (NodeReady) ever start."""
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", lustre_mount_fails=-1))
    assert result.returncode == 1 and "mount_lustre failed" in result.stderr
    # the container runtime, whose image cache is on /fsx, is not set up either (CONTINUE)
    assert result.verdict == "terminated" and result.failed == ["fmcluster storage", "fmcluster containers",
                                                                "fmcluster node ready"]
    assert "prometheus-node-exporter.service" not in node.enabled()
    attempts = [c for c in node.calls("mount") if c.args[:2] == ("-t", "lustre")]
    assert len(attempts) == prog.FSX_MOUNT_ATTEMPTS
    assert ready_metric(node) == ('fmcluster_node_ready{reason="/fsx is not mounted; the Pyxis plugin is not '
                                  'installed; /scratch/enroot/runtime is missing"} 0')
    start = node.run("systemctl start slurmd.service", name="start.sh")
    assert start.returncode != 0 and node.unit_state("slurmd.service") == "failed"
    dropin = node.file(SLURMD_DROPIN)
    assert f"ExecStartPre={node_facts.FMCLUSTER_LIB}/node-ready" in dropin and "Restart=on-failure" in dropin


def test_efa_file_system_gets_lnet_over_efa(tmp_path):
    node, result = boot(tmp_path, lustre="efa")
    assert result.returncode == 0, result.stderr
    efa = [c.args for c in node.calls("lnetctl") if c.args[:4] == ("net", "add", "--net", "efa")]
    devices = [f"rdmap{10 + i}s0" for i in range(0, 32, 4)]  # 8 of 32, one per PCIe switch
    assert [a[5] for a in efa] == devices and all(a[-2:] == ("--peer-credits", "32") for a in efa)
    lines = node.lines()
    assert index(lines, "modprobe kefalnd ipif_name=ens32") < index(lines, "lnetctl net add --net efa")
    assert index(lines, "lnetctl udsp add --src efa --priority 0") < index(lines, "mount -t lustre")
    assert node.mounts()["/fsx"].extra == "lnet=efa"
    assert prog.LNET_EFA_UNIT in node.enabled()
    (fsx,) = [line for line in node.fstab() if line[1] == "/fsx"]
    assert f"x-systemd.requires={prog.LNET_EFA_UNIT}" in fsx[3].split(",")
    assert "LNET_EFA=1" in node.file(f"{node_shell.FMCLUSTER_ETC}/node-ready.env")


@pytest.mark.parametrize("instance_type, devices", [("p5en.48xlarge", 16), ("p6-b200.48xlarge", 8),
                                                    ("p6-b300.48xlarge", 16), ("p5.4xlarge", 1)])
def test_lnet_interfaces_follow_the_catalog(tmp_path, instance_type, devices):
    node, result = boot(tmp_path, instance_type, lustre="efa")
    assert result.returncode == 0, result.stderr
    efa = [c.args[5] for c in node.calls("lnetctl") if c.args[:4] == ("net", "add", "--net", "efa")]
    wanted = catalog.get(instance_type).lnet_efa_interfaces
    assert efa == [f"rdmap{10 + i * devices // wanted}s0" for i in range(wanted)]


def test_efa_file_system_on_a_node_group_without_efa_stays_on_tcp(tmp_path):
    node, result = boot(tmp_path, efa=False, lustre="efa")
    assert result.returncode == 0, result.stderr
    assert not node.calls("lnetctl") and node.mounts()["/fsx"].extra == "lnet=tcp"


@pytest.mark.parametrize("change, reason", [
    ({"efa_driver": "2.10.0"}, "older than 2.12.1"),
    ({"lustre_client": False}, "no Lustre client with the EFA LNet driver"),
    ({"efa_devices": 0}, "no EFA device"),
])
def test_lnet_that_cannot_use_efa_leaves_the_node_not_ready(tmp_path, change, reason):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", **change), lustre="efa")
    assert result.returncode == 1 and reason in result.stderr and "setup_lnet_efa failed" in result.stderr
    assert ready_metric(node) == ('fmcluster_node_ready{reason="LNet has no EFA interface: the file system would be '
                                  'read over TCP"} 0')


# --- the GPUs and observability -------------------------------------------------------------------

def test_a_missing_gpu_keeps_slurmd_down(tmp_path):
    node, result = boot(tmp_path, scenario=world("p5.48xlarge", gpus=7))
    assert result.returncode == 1 and "check_node_ready failed" in result.stderr
    assert "node NOT ready: 7 of 8 GPUs visible" in result.stderr
    checks = [c for c in node.calls("nvidia-smi")]
    assert checks[-1].clock - checks[0].clock >= prog.READY_WAIT_SECONDS  # waited for a late GPU
    assert ready_metric(node) == 'fmcluster_node_ready{reason="7 of 8 GPUs visible"} 0'
    assert node.run("systemctl start slurmd.service", name="start.sh").returncode != 0
    node.set_scenario(gpus=8)  # the GPU is back (a driver reload): slurmd's next try starts it
    assert node.run("systemctl start slurmd.service", name="start.sh").returncode == 0


def test_observability_off_installs_nothing(tmp_path):
    node, result = boot(tmp_path, metrics=False)
    assert result.returncode == 0, result.stderr
    assert not node.calls("dpkg-query") and "prometheus-node-exporter.service" not in node.enabled()
    assert ready_metric(node).endswith(" 1")  # the readiness metric is written all the same


def test_metrics_set_up_with_the_pinned_packages(tmp_path):
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    assert not node.calls("apt-get")  # the image's packages, checked
    assert node.lines("dpkg-query") == [f"dpkg-query -W -f=${{Status}} ${{Version}} {package}"
                                        for package in ("prometheus-node-exporter", "prometheus")]
    assert "systemctl disable --now prometheus.service" in node.lines("systemctl")
    config = yaml.safe_load(node.file(f"{node_shell.FMCLUSTER_ETC}/prometheus-agent.yml"))
    assert [j["job_name"] for j in config["scrape_configs"]] == ["node", "dcgm", "efa"]  # Slurm's: the login nodes'
    assert config["remote_write"] == [{"url": URL, "sigv4": {"region": "us-east-1"}}]
    assert config["global"]["external_labels"] == {"cluster": "test-cluster", "node": "ip-10-1-0-42"}
    prom = node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster.prom")
    assert "fmcluster_expected_gpus 8\n" in prom and 'fmcluster_expected_lustre_mount{mountpoint="/fsx"} 1' in prom
    for job in ("dcgm", "efa"):
        assert node.file(f"{node_facts.FMCLUSTER_LIB}/collect-{job}").startswith("#!/bin/bash")
        assert f"fmcluster-collect-{job}.timer" in node.enabled()
    assert not node.exists(f"{node_facts.FMCLUSTER_LIB}/collect-slurm")
    assert "fmcluster-collect-slurm.timer" not in node.enabled()


@pytest.mark.parametrize("release", ["jammy", "focal"])
def test_metrics_per_ubuntu_release(tmp_path, release):
    # a CPU group: no container runtime, whose image is baked for Ubuntu 24.04 and PCS's Slurm here
    node, result = boot(tmp_path, "m7i.2xlarge", scenario=world("m7i.2xlarge", os_release=release))
    if release == "focal":
        assert result.returncode == 1 and "no pinned exporter packages for the Ubuntu release 'focal'" in result.stderr
        assert not node.calls("apt-get") and not node.calls("dpkg-query")
        return
    assert result.returncode == 0, result.stderr
    assert not node.calls("apt-get") and len(node.calls("dpkg-query")) == 2  # jammy's image's packages
    unit = node.file("/etc/systemd/system/fmcluster-prometheus-agent.service")
    assert "--enable-feature=agent" not in unit and "--storage.tsdb.retention.time=2h" in unit


# --- package upgrades -----------------------------------------------------------------------------

def test_unattended_upgrades_restart_nothing_and_leave_the_gpu_stack_alone(tmp_path):
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    needrestart = node.file("/etc/needrestart/conf.d/50-fmcluster.conf")
    assert "$nrconf{restart} = 'l';" in needrestart
    for service in ("slurm", "nvidia", "dcgm", "efa"):
        assert f"$nrconf{{override_rc}}{{qr(^{service})}} = 0;" in needrestart
    blacklist = node.file("/etc/apt/apt.conf.d/51fmcluster-unattended-upgrades")
    for package in ("nvidia-", "libnvidia-", "cuda-", "libnccl", "efa", "libfabric", "lustre-", "linux-"):
        assert f'"{package}";' in blacklist


def test_no_apt_no_unattended_upgrade_settings(tmp_path):
    # a CPU group: no container runtime (Ubuntu's, baked into the image) to set up either
    node, result = boot(tmp_path, "m7i.2xlarge", scenario=world("m7i.2xlarge", os_release="amzn2023"), metrics=False)
    assert result.returncode == 0, result.stderr
    assert not node.exists("/etc/needrestart/conf.d/50-fmcluster.conf")


# --- Amazon EKS: the user data's shell part -------------------------------------------------------

def eks(instance_type="p5en.48xlarge", *, lustre_efa=False, metrics=True, compact=True) -> str:
    """The node script of an Amazon EKS group of the test spec (tests/support/nodes.py) of
    `instance_type`, with an EFA-enabled file system or not, in an observed cluster or not."""
    made, group = nodes.group("eks", instance_type, {"storage.lustre.efa": lustre_efa})
    return node_eks.node_script(made, group, REFS if metrics else NO_METRICS, compact=compact)


def eks_node(tmp_path, instance_type="p5en.48xlarge", **changes) -> Sandbox:
    return Sandbox(tmp_path, world(instance_type, os_release="amzn2023", slurmd=False, **changes))


NOT_READY = "/etc/eks/nodeadm.d/90-fmcluster-not-ready.yaml"


def test_eks_gpu_node_ready_registers_as_usual(tmp_path):
    node = eks_node(tmp_path)
    result = node.run(eks())
    assert result.returncode == 0, result.stderr
    assert not node.exists(NOT_READY)
    assert node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster.prom").splitlines()[-1] == "fmcluster_expected_gpus 8"
    assert ready_metric(node).endswith(" 1")


def test_eks_gpu_missing_registers_with_the_not_ready_taint(tmp_path):
    node = eks_node(tmp_path, gpus=6)
    result = node.run(eks())
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(node.file(NOT_READY))
    assert config["kind"] == "NodeConfig" and config["apiVersion"] == "node.eks.aws/v1alpha1"
    (flag,) = config["spec"]["kubelet"]["flags"]
    # kubelet keeps only the last --register-with-taints: the group's own taint is repeated.
    assert flag == ("--register-with-taints=nvidia.com/gpu=true:NoSchedule,"
                    f"{k8s.NOT_READY_TAINT}=gpus-6-of-8:NoSchedule")
    value = flag.rsplit("=", 1)[1].split(":")[0]
    assert k8s.label_value_valid(value)


def test_eks_efa_file_system_installs_the_client_and_configures_lnet(tmp_path):
    node = eks_node(tmp_path, lustre_client=False)
    result = node.run(eks(lustre_efa=True))
    assert result.returncode == 0, result.stderr
    assert node.lines("dnf") == ["dnf install -y -q lustre-client"]
    efa = [c.args[5] for c in node.calls("lnetctl") if c.args[:4] == ("net", "add", "--net", "efa")]
    assert efa == ["rdmap10s0", "rdmap18s0"]  # 2 of the 16 EFA devices of p5en.48xlarge
    assert prog.LNET_EFA_UNIT in node.enabled() and not node.exists(NOT_READY)


def test_eks_lnet_failure_taints_the_node(tmp_path):
    node = eks_node(tmp_path, lustre_client=False, dnf_lustre=False)
    result = node.run(eks(lustre_efa=True))
    assert result.returncode == 1 and "setup_lnet_efa failed" in result.stderr
    (flag,) = yaml.safe_load(node.file(NOT_READY))["spec"]["kubelet"]["flags"]
    assert flag.endswith(f",{k8s.NOT_READY_TAINT}=lnet-efa:NoSchedule")


def test_eks_cpu_group_needs_no_script_without_observability():
    assert eks("m7i.2xlarge", metrics=False) is None


def test_eks_cpu_group_writes_its_expected_gpus(tmp_path):
    node = eks_node(tmp_path, "m7i.2xlarge")
    result = node.run(eks("m7i.2xlarge"))
    assert result.returncode == 0, result.stderr
    assert node.file(f"{node_facts.TEXTFILE_DIR}/fmcluster.prom").splitlines()[-1] == "fmcluster_expected_gpus 0"
    assert not node.calls("nvidia-smi")


# --- SageMaker HyperPod: lifecycle folders --------------------------------------------------------

def hyperpod_folder(instance_type="p6-b200.48xlarge", *, name="gpu", plane="hyperpod-slurm", metrics=True,
                    lustre_efa=False, edits=None, site_hooks=None) -> hyperpod_node.Bundle:
    """The lifecycle folder of a group of the test spec on SageMaker HyperPod (tests/support/nodes.py:
    its compute group of `instance_type`, or the controller's or login nodes' with `name`), without
    replacements; `site_hooks` besides its own (file name -> script)."""
    made, group = nodes.group(plane, instance_type, {"health.replace": False, "storage.lustre.efa": lustre_efa,
                                                     **(edits or {})}, name=name)
    refs = REFS if metrics else NO_METRICS
    if site_hooks is None:
        return hyperpod_node.bundle(made, group, refs)
    return hyperpod_node.folder(hyperpod_node.entry_script(made, group, refs),
                            {**hyperpod_node.hooks(made, group, refs), **site_hooks})


def run_folder(tmp_path, bundle: hyperpod_node.Bundle, scenario: Scenario, *, fsx_mounted=True):
    node = Sandbox(tmp_path, scenario)
    if fsx_mounted:  # HyperPod mounted the file system (FsxLustreConfig) before OnInitComplete
        (node.root / "fsx").mkdir()
        node.run("mount -t lustre -o relatime,flock fs-1@tcp:/x /fsx", name="hyperpod-mount.sh")
    files = {f"lifecycle/{name}": text for name, text in bundle.files.items() if name != hyperpod_node.ENTRYPOINT}
    result = node.run(bundle.files[hyperpod_node.ENTRYPOINT], name=f"lifecycle/{hyperpod_node.ENTRYPOINT}", files=files)
    return node, result


# The plugstack.conf HyperPod's controller sends to configless slurmd once it registered Pyxis.
CONTROLLER_PLUGSTACK = "include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n"


def hyperpod_world(instance_type="p6-b200.48xlarge", **changes) -> Scenario:
    return world(instance_type, os_release="jammy", dlami_nvme=0, slurmd=False,
                 **{"slurmd_plugstack": CONTROLLER_PLUGSTACK, **changes})


def test_hyperpod_compute_node_ready(tmp_path):
    node, result = run_folder(tmp_path, hyperpod_folder(), hyperpod_world())
    assert result.returncode == 0, result.stderr
    assert not node.calls("scontrol")
    lines = node.lines()
    assert index(lines, "install -d -m 0755 /etc/needrestart/conf.d") < index(lines, "aws ssm get-parameter")
    assert index(lines, "dpkg-query") < index(lines, "systemctl cat dlami-nvme.service")  # metrics first
    assert node.mounts()["/scratch"].source == node_facts.DLAMI_NVME_PATH
    assert "fmcluster-prometheus-agent.service" in node.enabled()


def test_hyperpod_compute_node_missing_a_gpu_is_drained_not_failed(tmp_path):
    node, result = run_folder(tmp_path, hyperpod_folder(), hyperpod_world(gpus=7))
    assert result.returncode == 0, result.stderr
    (drain,) = node.lines("scontrol")
    assert drain == "scontrol update nodename=ip-10-1-0-42 state=drain reason=fmcluster node-ready: 7 of 8 GPUs visible"


def test_hyperpod_compute_node_without_its_file_system_is_drained(tmp_path):
    """The container runtime, whose image cache is on /fsx, is not set up either: the script fails
    (HyperPod's log says why) and the node is drained with the reasons."""
    node, result = run_folder(tmp_path, hyperpod_folder(), hyperpod_world(), fsx_mounted=False)
    assert result.returncode == 1 and "setup_containers failed" in result.stderr
    (drain,) = node.calls("scontrol")
    assert drain.args[-1] == ("reason=fmcluster node-ready: /fsx is not mounted; the Pyxis plugin is not installed; "
                              "/scratch/enroot/runtime is missing")


def test_hyperpod_metrics_failure_does_not_fail_the_node(tmp_path):
    node, result = run_folder(tmp_path, hyperpod_folder(), hyperpod_world(exporters=False))
    assert result.returncode == 0, result.stderr
    assert f"warning: optional hook {hyperpod_node.METRICS_HOOK} failed" in result.stderr
    assert node.mounts()["/scratch"].backing == "instance-store" and not node.calls("scontrol")


def test_hyperpod_node_on_its_image_needs_no_internet(tmp_path):
    node, result = run_folder(tmp_path, hyperpod_folder(), hyperpod_world(network=False))
    assert result.returncode == 0, result.stderr
    assert "fmcluster-prometheus-agent.service" in node.enabled() and not node.calls("scontrol")
    assert network_calls(node) == []


def test_hyperpod_required_hook_failure_fails_the_script(tmp_path):
    folder = hyperpod_folder(metrics=False, site_hooks={"10-site.sh": "exit 3\n", "20-after.sh": "true\n"})
    node, result = run_folder(tmp_path, folder, hyperpod_world())
    assert result.returncode == 1 and "hook 10-site.sh failed" in result.stderr
    assert node.mounts()["/scratch"].backing == "instance-store"  # the other steps still ran


def test_hyperpod_controller_has_no_readiness_drain(tmp_path):
    """The controller sets the container runtime up and registers Pyxis for every configless
    slurmd (scontrol reconfigure), but checks no GPU and drains nothing."""
    folder = hyperpod_folder(name="controller", metrics=False)
    node, result = run_folder(tmp_path, folder, hyperpod_world("m7i.2xlarge", slurmd_plugstack=None))
    assert result.returncode == 0, result.stderr
    assert not node.calls("nvidia-smi") and not [line for line in node.lines("scontrol") if "state=drain" in line]
    assert CONTROLLER_PLUGSTACK.strip() in node.file("/opt/slurm/etc/plugstack.conf").splitlines()


def test_hyperpod_eks_efa_file_system_configures_lnet(tmp_path):
    folder = hyperpod_folder(plane="hyperpod-eks", metrics=False, lustre_efa=True)
    node, result = run_folder(tmp_path, folder, world("p6-b200.48xlarge", os_release="amzn2023", slurmd=False,
                                                      lustre_client=False), fsx_mounted=False)
    assert result.returncode == 0, result.stderr
    assert node.lines("dnf") == ["dnf install -y -q lustre-client"]
    assert [c.args[5] for c in node.calls("lnetctl") if c.args[:4] == ("net", "add", "--net", "efa")] == [
        "rdmap10s0", "rdmap14s0"]
    assert prog.LNET_EFA_UNIT in node.enabled()


# --- containers on Slurm: Enroot and Pyxis, baked into the node's image ----------------------------

PCS_PREFIX = f"/opt/aws/pcs/scheduler/slurm-{PCS_SLURM}"
PCS_PLUGSTACK = f"/etc/aws/pcs/scheduler/slurm-{PCS_SLURM}/plugstack.conf.d/pyxis.conf"
PCS_PLUGIN = f"{PCS_PREFIX}/lib/slurm/spank_pyxis.so"
MIRROR = Path("/work/.mirror/NVIDIA+enroot/repo")  # a git snapshot of github.com/NVIDIA/enroot, where there is one
NOT_INSTALLED = 'fmcluster_node_ready{reason="Enroot 4.1.2 is not installed; the Pyxis plugin is not installed"} 0'


def container_node(tmp_path, instance_type="p5.48xlarge", *, lustre="tcp", name="gpu", **changes):
    """A node on its cluster's image (Scenario.image "baked": the bake really ran, against the
    stand-ins), or as `changes` say, and its scripts (a GPU compute group's, or the login nodes'
    with `name`: both run containers)."""
    node = Sandbox(tmp_path, world(instance_type, **changes))
    made, group = nodes.pcs_group(instance_type, lustre=lustre, name=name)
    assert group.instance_type == instance_type
    return node, pcs_node.node_actions(made, group, NO_METRICS)


def containers_script(scripts) -> str:
    """The script that sets the container runtime up (FIRST_BOOT_ONLY), to run it again."""
    (script,) = [s for s in scripts if s.name == "fmcluster containers"]
    assert script.arguments == ()
    return script.text


def enroot_conf(node: Sandbox) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in node.file("/etc/enroot/enroot.conf").splitlines()
                if line and not line.startswith("#"))


@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "p6e-gb200.36xlarge"])  # x86_64, arm64: the same
def test_containers_happy_path(tmp_path, instance_type):
    node, scripts = container_node(tmp_path, instance_type)
    result = first_boot(node, scripts)
    assert result.returncode == 0, result.stderr
    assert network_calls(node) == []  # the image's Enroot and Pyxis: nothing cloned, built or installed
    assert "enroot version" in node.lines("enroot")
    assert node.file(PCS_PLUGSTACK) == f"required {PCS_PLUGIN}\n"
    # srun's PMI hook runs scontrol under slurmd: the cluster's Slurm on its PATH
    assert node.file("/etc/default/slurmd").startswith(f"PATH={PCS_PREFIX}/bin:")
    assert ready_metric(node) == 'fmcluster_node_ready{reason=""} 1'
    lines = node.lines()
    assert index(lines, "mount -t lustre") < index(lines, "enroot version")  # after the file system


def test_containers_enroot_conf_scratch_and_shared_cache(tmp_path):
    node, scripts = container_node(tmp_path)
    assert first_boot(node, scripts).returncode == 0
    conf = enroot_conf(node)  # fmcluster's, not the default the image's `make install` wrote
    assert conf["ENROOT_RUNTIME_PATH"] == "/scratch/enroot/runtime/user-$(id -u)"
    assert conf["ENROOT_DATA_PATH"] == "/scratch/enroot/data/user-$(id -u)"
    assert conf["ENROOT_TEMP_PATH"] == "/scratch/enroot/tmp"
    assert conf["ENROOT_CACHE_PATH"] == "/fsx/enroot/cache/user-$(id -u)"
    for directory in ("/scratch/enroot/runtime", "/scratch/enroot/data", "/scratch/enroot/tmp", "/fsx/enroot/cache"):
        assert (node.root / directory.lstrip("/")).stat().st_mode & 0o7777 == 0o1777, directory
    hooks = node.root / "etc/enroot/hooks.d"
    assert sorted(p.name for p in hooks.iterdir()) == ["50-slurm-pmi.sh", "50-slurm-pytorch.sh", "98-nvidia.sh"]
    assert (hooks / "50-slurm-pmi.sh").readlink() == Path("/usr/share/enroot/hooks.d/50-slurm-pmi.sh")


def test_containers_without_instance_store_or_file_system(tmp_path):
    """A type without instance store (a login node's) keeps Enroot's files in /tmp; without a
    file system the image cache is node-local too."""
    assert catalog.get("m7i.2xlarge").nvme_disks == 0
    node, scripts = container_node(tmp_path, "m7i.2xlarge", lustre=None, name="login")
    result = first_boot(node, scripts)
    assert result.returncode == 0, result.stderr
    conf = enroot_conf(node)
    assert conf["ENROOT_DATA_PATH"] == "/tmp/enroot/data/user-$(id -u)"
    assert conf["ENROOT_RUNTIME_PATH"] == "/tmp/enroot/runtime/user-$(id -u)"
    assert conf["ENROOT_CACHE_PATH"] == "/tmp/enroot/cache/user-$(id -u)"
    assert not node.calls("nvidia-container-cli") and ready_metric(node).endswith(" 1")


def assert_not_ready_for_the_image(node: Sandbox, result, *messages: str,
                                   metric: str = NOT_INSTALLED) -> None:
    """The image lacks a piece: the step says which and what to do, nothing is fetched or built,
    the node is not ready and slurmd stays down."""
    assert result.returncode == 1 and "setup_containers failed" in result.stderr
    for message in messages:
        assert message in result.stderr
    assert "launch the node from its cluster's node image (NAME-images), or bake Enroot 4.1.2" in result.stderr
    assert network_calls(node) == [] and not node.exists(PCS_PLUGSTACK)
    assert ready_metric(node) == metric
    assert node.run("systemctl start slurmd.service", name="start.sh").returncode != 0
    assert node.unit_state("slurmd.service") == "failed"


def test_containers_on_an_image_without_them_leave_the_node_not_ready(tmp_path):
    """An ami_id of one's own without Enroot and Pyxis: nothing is installed at boot."""
    node, scripts = container_node(tmp_path, image="bare")
    result = first_boot(node, scripts)
    assert_not_ready_for_the_image(node, result, "Enroot 4.1.2 is not installed (enroot version: 'none')",
                                   f"no Pyxis plugin {PCS_PLUGIN} (Pyxis v0.24.0 built against {PCS_PREFIX})")


def test_containers_pyxis_built_against_another_slurm_is_refused(tmp_path):
    """The image's Pyxis was built against another Slurm (its manifest says which): this
    cluster's plugin is missing, and the manifest's prefix is named."""
    node, scripts = container_node(tmp_path)
    manifest = node.root / node_runtime.IMAGE_MANIFEST.lstrip("/")
    manifest.write_text(manifest.read_text().replace(PCS_PREFIX, "/opt/aws/pcs/scheduler/slurm-25.11"))
    (node.root / PCS_PLUGIN.lstrip("/")).unlink()
    result = first_boot(node, scripts)
    assert_not_ready_for_the_image(
        node, result, f"no Pyxis plugin {PCS_PLUGIN}",
        f"the image's SLURM_PREFIX is '/opt/aws/pcs/scheduler/slurm-25.11', not {PCS_PREFIX}",
        metric='fmcluster_node_ready{reason="the Pyxis plugin is not installed"} 0')


def test_containers_image_with_other_commits_is_refused(tmp_path):
    """Enroot 4.1.2 from another commit than the pinned one (the manifest says so): not used."""
    node, scripts = container_node(tmp_path)
    manifest = node.root / node_runtime.IMAGE_MANIFEST.lstrip("/")
    manifest.write_text(manifest.read_text().replace(node.upstream.enroot_commit, "0" * 40))
    result = first_boot(node, scripts)
    assert_not_ready_for_the_image(node, result, f"the image's ENROOT_COMMIT is '{'0' * 40}', not "
                                                 f"{node.upstream.enroot_commit}",
                                   metric='fmcluster_node_ready{reason="the Pyxis plugin is not installed"} 0')


def test_containers_without_the_manifest_check_enroot_and_the_plugin(tmp_path):
    """An ami_id baked another way (no fmcluster manifest) with the pinned Enroot and a Pyxis
    for this Slurm is used as it is."""
    node, scripts = container_node(tmp_path)
    (node.root / node_runtime.IMAGE_MANIFEST.lstrip("/")).unlink()
    result = first_boot(node, scripts)
    assert result.returncode == 0, result.stderr
    assert ready_metric(node).endswith(" 1")


def test_containers_gpu_node_without_the_container_toolkit_is_not_ready(tmp_path):
    node, scripts = container_node(tmp_path, nvidia_container_cli=False)
    assert first_boot(node, scripts).returncode == 1
    assert ready_metric(node) == ('fmcluster_node_ready{reason="nvidia-container-cli is missing: containers '
                                  'would see no GPU"} 0')


def test_containers_rerun_gives_the_same_node(tmp_path):
    node, scripts = container_node(tmp_path)
    assert first_boot(node, scripts).returncode == 0
    first = node.file("/etc/enroot/enroot.conf"), node.file(PCS_PLUGSTACK), node.file("/etc/default/slurmd")
    result = node.run(containers_script(scripts), name="lifecycle/again.sh")
    assert result.returncode == 0, result.stderr
    assert "ready; image cache" in result.stderr and network_calls(node) == []
    assert (node.file("/etc/enroot/enroot.conf"), node.file(PCS_PLUGSTACK), node.file("/etc/default/slurmd")) == first
    assert node.file("/etc/default/slurmd").count("# fmcluster") == 1


def test_containers_reboot_keeps_slurmd_gated_on_the_runtime(tmp_path):
    node, scripts = container_node(tmp_path)
    assert first_boot(node, scripts).returncode == 0
    (node.root / PCS_PLUGSTACK.lstrip("/")).unlink()  # someone removed the plugin's configuration
    after = node.reboot()
    assert "slurmd.service" in after.failed
    assert ready_metric(node) == 'fmcluster_node_ready{reason="the Pyxis plugin is not installed"} 0'


@pytest.mark.real_pins
def test_the_container_runtime_pins_are_recorded():
    """Enroot's and Pyxis's commits, and Enroot's submodules' commits in `git submodule status`'s
    (path) order; where a snapshot of NVIDIA/enroot is at hand, they are the tag's."""
    from fmcluster.node import image as node_image

    commit = re.compile(r"[0-9a-f]{40}")
    assert all(commit.fullmatch(c) for c in (node_runtime.ENROOT_COMMIT, node_runtime.PYXIS_COMMIT,
                                             *node_runtime.ENROOT_SUBMODULES.values()))
    assert list(node_runtime.ENROOT_SUBMODULES) == sorted(node_runtime.ENROOT_SUBMODULES) == [
        "deps/linux-headers", "deps/makeself", "deps/musl"]
    assert node_runtime.ENROOT_TAG == f"v{node_runtime.ENROOT_VERSION}"
    body = containers_script(pcs(metrics=False))
    assert f"ENROOT_COMMIT='{node_runtime.ENROOT_COMMIT}'" in body.splitlines()
    bake = document_script(node_image.documents(sandbox_node_image("noble")).build)
    assert f"ENROOT_COMMIT='{node_runtime.ENROOT_COMMIT}'" in bake.splitlines()
    assert f"ENROOT_SUBMODULES='{' '.join(node_runtime.ENROOT_SUBMODULES.values())}'" in bake.splitlines()
    if not MIRROR.is_dir():
        pytest.skip(f"no snapshot of NVIDIA/enroot at {MIRROR}")
    git = ["git", "-C", str(MIRROR)]
    assert subprocess.run([*git, "rev-parse", f"{node_runtime.ENROOT_TAG}^{{commit}}"], capture_output=True, text=True,
                          check=True).stdout.strip() == node_runtime.ENROOT_COMMIT
    tree = subprocess.run([*git, "ls-tree", node_runtime.ENROOT_COMMIT, "deps/"], capture_output=True, text=True,
                          check=True).stdout
    gitlinks = {line.split("\t")[1]: line.split()[2] for line in tree.splitlines() if line.startswith("160000 commit")}
    assert gitlinks == node_runtime.ENROOT_SUBMODULES
    makefile = subprocess.run([*git, "show", f"{node_runtime.ENROOT_COMMIT}:Makefile"], capture_output=True, text=True,
                              check=True).stdout
    assert re.search(rf"^VERSION\s*:= {re.escape(node_runtime.ENROOT_VERSION)}$", makefile, re.MULTILINE)


@pytest.mark.parametrize("instance_type, login", [(t, False) for t in GPU_TYPES] + [("m7i.2xlarge", True)])
def test_every_pcs_node_with_the_container_runtime_fits_the_arguments_limits(instance_type, login):
    """Every PCS node that gets the container runtime (the GPU compute groups, with the IMEX
    prolog, and the login nodes, with the Slurm collector), with the longest values any region and
    id can have: at most MAX_ARGUMENTS arguments of at most MAX_ARGUMENT characters a script."""
    for name, arguments in longest_arguments(instance_type, login=login).items():
        assert len(arguments) <= pcs_node.MAX_ARGUMENTS, name
        assert all(len(a) <= pcs_node.MAX_ARGUMENT for a in arguments), (name, arguments)


def test_hyperpod_gpu_node_gets_containers(tmp_path):
    folder = hyperpod_folder()
    node, result = run_folder(tmp_path, folder, hyperpod_world(), fsx_mounted=True)
    assert result.returncode == 0, result.stderr
    assert not node.calls("scontrol")  # ready: not drained
    assert network_calls(node) == []
    assert node.file("/opt/slurm/etc/plugstack.conf.d/pyxis.conf") == "required /opt/slurm/lib/slurm/spank_pyxis.so\n"
    # by name, never a wildcard (configless Slurm); what slurmd reads is the controller's
    assert node.file("/opt/slurm/etc/plugstack.conf") == CONTROLLER_PLUGSTACK
    conf = enroot_conf(node)
    assert conf["ENROOT_CACHE_PATH"] == "/fsx/enroot/cache/user-$(id -u)"
    assert conf["ENROOT_DATA_PATH"] == "/scratch/enroot/data/user-$(id -u)"
    lines = node.lines()
    assert index(lines, "systemctl cat dlami-nvme.service") < index(lines, "enroot version")


def test_hyperpod_gpu_node_on_an_image_without_enroot_is_drained(tmp_path):
    node, result = run_folder(tmp_path, hyperpod_folder(), hyperpod_world(image="bare"))
    assert result.returncode == 1 and "setup_containers failed" in result.stderr
    assert "built against /opt/slurm into the group's ami_id" in result.stderr
    assert [line for line in network_calls(node) if "169.254" not in line] == []
    (drain,) = node.calls("scontrol")
    assert drain.args[-1] == ("reason=fmcluster node-ready: Enroot 4.1.2 is not installed; "
                              "the Pyxis plugin is not installed")


# --- Pyxis' build line, with the real make and gcc ----------------------------------------------

def pyxis_checkout(node: Sandbox) -> Path:
    """A clone of the Pyxis stand-in at its tag (the real git, through the sandbox's insteadOf)."""
    src = node.root / "src/pyxis"
    clone = f"git clone -q --branch {node_runtime.PYXIS_TAG} {node_runtime.PYXIS_REPOSITORY} {src}"
    result = node.run(clone, name="c.sh")
    assert result.returncode == 0, result.stderr
    return src


def test_pyxis_build_line_needs_cppflags_in_the_environment(tmp_path):
    """The image bake's Pyxis build, run as the build instance runs it (real make and gcc,
    spank.h from libslurm-dev under the Slurm prefix), compiles and installs the plugin; the old
    form, CPPFLAGS on make's command line, replaces the Makefile's own (-D_GNU_SOURCE,
    -DPYXIS_VERSION) and fails as it did on a real node."""
    node = Sandbox(tmp_path, world("p5.48xlarge", image="bare"))
    src = pyxis_checkout(node)
    old = node.run(f'make -C {src} CPPFLAGS="-I$FMCLUSTER_ROOT{PCS_PREFIX}/include"', name="old.sh")
    assert old.returncode != 0
    assert "'PYXIS_VERSION' undeclared" in old.stderr.replace("‘", "'").replace("’", "'")
    assert "'CLONE_NEWUSER' undeclared" in old.stderr.replace("‘", "'").replace("’", "'")
    # bake.sh's own build_pyxis, on that checkout
    fragment = (node_shell.IMAGE_SCRIPTS / "bake.sh").read_text()
    script = "\n".join(["set -euo pipefail", "ROOT=$FMCLUSTER_ROOT", 'log() { echo "$*" >&2; }', fragment,
                        f"SLURM_PREFIX={PCS_PREFIX} BUILD_DIR=/src",
                        "PYXIS_COMMIT=x PYXIS_TAG=x PYXIS_REPOSITORY=x",
                        "clone() { :; }  # the checkout is there", "build_pyxis"])
    new = node.run(script, name="new.sh")
    assert new.returncode == 0, new.stderr
    plugin = node.root / PCS_PREFIX.lstrip("/") / "lib/slurm/spank_pyxis.so"
    assert plugin.read_bytes().startswith(b"\x7fELF")
    assert b"0.24.0" in plugin.read_bytes()  # PYXIS_VERSION, from the Makefile's CPPFLAGS


def test_pyxis_plugin_of_the_image_is_a_spank_plugin(tmp_path):
    """The plugin the image bake built: loadable, a SPANK plugin named pyxis for the Slurm release
    of the headers it was built against (what slurmd checks before it loads it: "Incompatible
    plugin version" otherwise), with the --container-image option (srun loads it in
    tests/node/test_node_image.py)."""
    import ctypes

    node, scripts = container_node(tmp_path)
    assert first_boot(node, scripts).returncode == 0
    plugin = ctypes.CDLL(str(node.root / PCS_PLUGIN.lstrip("/")))
    name = (ctypes.c_char * 6).in_dll(plugin, "plugin_name").value
    assert name == b"pyxis"
    header = (slurm_headers(PCS_PREFIX) / "slurm_version.h").read_text()  # the headers it was built against
    number = int(re.search(r"#define SLURM_VERSION_NUMBER (0x[0-9a-fA-F]+)", header).group(1), 16)
    assert ctypes.c_uint.in_dll(plugin, "plugin_version").value == number
    option = ctypes.c_char_p.from_address(ctypes.addressof(ctypes.c_void_p.in_dll(plugin, "spank_options")))
    assert option.value == b"container-image"


# --- SageMaker HyperPod: Pyxis where configless slurmd reads it ----------------------------------

def test_hyperpod_controller_registers_pyxis_by_name_and_reconfigures(tmp_path):
    """The controller group checks and configures the image's runtime too, includes pyxis.conf by name in the
    plugstack.conf slurmctld sends to every configless slurmd (a wildcard include becomes explicit
    includes of what it matches, kept as a comment: the other plugins still load), and runs
    scontrol reconfigure so that running slurmd get it, then looks for nodes drained before it."""
    bundle = hyperpod_folder(name="controller", metrics=False)
    node = Sandbox(tmp_path, hyperpod_world("m7i.2xlarge", slurmd_plugstack=None))
    (node.root / "fsx").mkdir()
    node.run("mount -t lustre -o relatime,flock fs-1@tcp:/x /fsx", name="hyperpod-mount.sh")
    (node.root / "opt/slurm/etc/plugstack.conf.d").mkdir(parents=True)
    (node.root / "opt/slurm/etc/plugstack.conf.d/other.conf").write_text("optional /opt/other.so\n")
    (node.root / "opt/slurm/etc/plugstack.conf").write_text("include /opt/slurm/etc/plugstack.conf.d/*.conf\n")
    (node.state / "units/slurmctld.service").write_text("active\n")
    result = node.run(bundle.files[hyperpod_node.ENTRYPOINT], name=f"lifecycle/{hyperpod_node.ENTRYPOINT}")
    assert result.returncode == 0, result.stderr
    assert node.file("/opt/slurm/etc/plugstack.conf").splitlines() == [
        "# fmcluster: explicit includes below: include /opt/slurm/etc/plugstack.conf.d/*.conf",
        "include /opt/slurm/etc/plugstack.conf.d/other.conf", CONTROLLER_PLUGSTACK.strip()]
    assert node.file("/opt/slurm/etc/plugstack.conf.d/pyxis.conf") == "required /opt/slurm/lib/slurm/spank_pyxis.so\n"
    assert node.exists("/opt/slurm/lib/slurm/spank_pyxis.so")
    assert node.lines("scontrol") == ["scontrol reconfigure", "scontrol -o show nodes"]
    lines = node.lines()
    assert index(lines, "enroot version") < index(lines, "scontrol reconfigure")


def test_hyperpod_login_node_gets_the_runtime_without_reconfiguring(tmp_path):
    bundle = hyperpod_folder(name="login", metrics=False, edits={"storage.lustre": None})  # no image cache to share
    node = Sandbox(tmp_path, hyperpod_world("m7i.2xlarge", slurmd_plugstack=None))
    result = node.run(bundle.files[hyperpod_node.ENTRYPOINT], name=f"lifecycle/{hyperpod_node.ENTRYPOINT}")
    assert result.returncode == 0, result.stderr
    assert node.exists("/opt/slurm/lib/slurm/spank_pyxis.so") and not node.calls("scontrol")
    assert node.file("/opt/slurm/etc/plugstack.conf") == CONTROLLER_PLUGSTACK


@pytest.mark.parametrize("controller_plugstack", [None, "include /opt/slurm/etc/plugstack.conf.d/*.conf\n", ""])
def test_hyperpod_gpu_node_whose_slurmd_does_not_load_pyxis_is_drained(tmp_path, controller_plugstack):
    """Pyxis installed on the node, but the plugstack.conf configless slurmd got from the
    controller (conf-cache) does not include pyxis.conf by name: --container-image would be an
    unknown option, so the node is drained."""
    world_ = hyperpod_world(slurmd_plugstack=controller_plugstack)
    node, result = run_folder(tmp_path, hyperpod_folder(), world_)
    assert result.returncode == 0, result.stderr
    assert node.exists("/opt/slurm/lib/slurm/spank_pyxis.so")
    (drain,) = node.calls("scontrol")
    assert drain.args[-1] == ("reason=fmcluster node-ready: slurmd's plugstack.conf does not load Pyxis: "
                              "the controller's must include /opt/slurm/etc/plugstack.conf.d/pyxis.conf")


def test_a_running_slurmd_under_two_names_is_restarted_once(tmp_path, monkeypatch):
    """containers.sh's restart of a running slurmd (RESTART_SLURMD) restarts it once to load Pyxis,
    even where its unit answers to two names (AWS PCS's slurmd-VERSION.service with an
    Alias=slurmd.service: both names are active, and restarting each would restart slurmd twice)."""
    import dataclasses

    pcs = node_setup.Containers.pcs
    monkeypatch.setattr(node_setup.Containers, "pcs", lambda *a, **k: dataclasses.replace(pcs(*a, **k),
                                                                                          restart_slurmd=True))
    node, scripts = container_node(tmp_path)
    units = node_setup.slurmd_units(PCS_SLURM).split()
    assert units == [f"slurmd-{PCS_SLURM}.service", "slurmd.service"]
    for unit in units:  # one unit, active under both of its names
        (node.state / "units" / unit).write_text("active\n")
    result = run_stage(node, scripts, pcs_node.NODE_BOOTSTRAPPED)  # slurmd runs: PCS started it earlier
    assert result.returncode == 0, result.stderr
    restarts = [c.args for c in node.calls("systemctl") if c.args[:1] == ("restart",)]
    assert restarts == [("restart", units[0])]
