"""The deep check of a new GPU node (fmcluster/node/scripts/boot/programs/deep-check.sh, run by
node-ready once per instance), in the boot-path harness (tests/support/sandbox.py): the AWS PCS
node lifecycle scripts of a model with health.deep_check (tests/support/nodes.py), run as AWS PCS
runs them (`first_boot`) as real processes on a sandboxed p5.48xlarge whose only
stand-ins are the GPU tools (tests/support/gpu_standins: dcgmi prints a real `dcgmi diag -r 2 -j`
output, all_reduce_perf nccl-tests' table), put where the Deep Learning AMI has them. The
assertions read what the node did: its readiness verdict and reasons, the metrics, the marker,
whether slurmd's gate lets slurmd start, and the tools it ran (`timeout` records each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.facts import catalog, health
from fmcluster.facts import node as node_facts
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import runtime as node_runtime
from tests.support import nodes, standins
from tests.support.nodes import NO_METRICS, REFS, Outcome, first_boot
from tests.support.sandbox import Sandbox, Scenario

STANDINS = Path(__file__).parents[1] / "support" / "gpu_standins"
NCCL_DIR = "/usr/local/cuda-13.2/efa/test-cuda-13.2"  # the DLAMI's nccl-tests, for its CUDA 13.2
TAG = "/sys/devices/virtual/dmi/id/board_asset_tag"
INSTANCE = "i-0123456789abcdef0"
DEEP_METRIC = f"{node_facts.TEXTFILE_DIR}/fmcluster-deep-check.prom"
READY_METRIC = f"{node_facts.TEXTFILE_DIR}/fmcluster-ready.prom"
TYPE = "p5.48xlarge"


@pytest.fixture(autouse=True)
def standin_pins(monkeypatch):
    """The scripts rendered here pin the stand-ins' commits (as tests/node/test_boot_path.py): the
    node's image is baked from them, and its container runtime is checked against the pins."""
    for name, value in standins.pristine().pins().items():
        monkeypatch.setattr(node_runtime, name, value)


def world(instance_type: str) -> Scenario:
    """The node of an instance type as the catalog describes it."""
    instance = catalog.get(instance_type)
    return Scenario(gpus=instance.gpu_count, nvme_disks=instance.nvme_disks, efa_devices=instance.max_efa_interfaces)


def scripts(deep_check: bool = True, instance_type: str = TYPE) -> tuple[pcs_node.LifecycleScript, ...]:
    """A PCS group of `instance_type` without a file system, with health.deep_check as asked."""
    made, gpu = nodes.pcs_group(instance_type, {"health.deep_check": deep_check}, lustre=None)
    return pcs_node.node_actions(made, gpu, NO_METRICS)


def boot(node: Sandbox, deep_check: bool = True, **env: str) -> Outcome:
    """The node's first boot as AWS PCS runs it, the GPU stand-ins set by `env`."""
    return first_boot(node, scripts(deep_check), env=env)


def deep_node(tmp_path, *, nccl: bool = True) -> Sandbox:
    """A new p5.48xlarge instance with DCGM and nccl-tests where the Deep Learning AMI has them."""
    node = Sandbox(tmp_path, world(TYPE))
    (node.bin / "dcgmi").unlink(missing_ok=True)
    (node.bin / "dcgmi").symlink_to(STANDINS / "dcgmi")
    new_instance(node, INSTANCE)
    if nccl:
        binary = node.root / NCCL_DIR.lstrip("/") / "all_reduce_perf"
        binary.parent.mkdir(parents=True)
        binary.symlink_to(STANDINS / "all_reduce_perf")
    return node


def new_instance(node: Sandbox, instance_id: str) -> None:
    tag = node.root / TAG.lstrip("/")
    tag.parent.mkdir(parents=True, exist_ok=True)
    tag.write_text(instance_id + "\n")


def tools_run(node: Sandbox) -> list[str]:
    """The deep check's tools this boot ran (each under `timeout`)."""
    return [Path(call.args[1]).name for call in node.calls("timeout")
            if len(call.args) > 1 and Path(call.args[1]).name != "deep-check"]


def metrics(node: Sandbox) -> dict[str, str]:
    return dict(line.rsplit(" ", 1) for line in node.file(DEEP_METRIC).splitlines() if not line.startswith("#"))


def start_slurmd(node: Sandbox, **env: str) -> int:
    return node.run("systemctl start slurmd.service", name="start.sh", env=env).returncode


def test_a_passing_deep_check_makes_the_node_ready_once(tmp_path):
    node = deep_node(tmp_path)
    result = boot(node, STANDIN_BUSBW_NODE="455")
    assert result.returncode == 0, result.stderr
    assert tools_run(node) == ["dcgmi", "all_reduce_perf"]
    dcgm = next(c for c in node.calls("timeout") if c.args[1] == "dcgmi")
    lines = node.lines()
    assert lines.index("systemctl start nvidia-dcgm.service") < lines.index(dcgm.line)
    assert dcgm.args[2:] == ("diag", "-r", str(health.DEEP_DCGM_LEVEL), "-j")
    nccl = next(c for c in node.calls("timeout") if c.args[1].endswith("/all_reduce_perf"))
    assert nccl.args[1] == f"{NCCL_DIR}/all_reduce_perf" and nccl.args[2:] == ("-b", "8", "-e", "1G", "-f", "2",
                                                                                 "-g", "8")
    assert node.file(health.DEEP_CHECK_MARKER) == INSTANCE + "\n"
    found = metrics(node)
    assert found["fmcluster_node_deep_check_passed"] == "1"
    assert found["fmcluster_node_deep_check_busbw_gbps"] == "455.00"
    assert int(found["fmcluster_node_deep_check_duration_seconds"]) >= 0
    assert node.file(READY_METRIC).splitlines()[-1] == 'fmcluster_node_ready{reason=""} 1'
    assert "DCGM GPU Diagnostic" in node.file(health.DEEP_CHECK_LOG)
    # slurmd's gate runs node-ready again: the verdict is read back, the tools do not run again
    assert start_slurmd(node) == 0 and node.unit_state("slurmd.service") == "active"
    assert tools_run(node) == ["dcgmi", "all_reduce_perf"]


def test_all_reduce_runs_as_one_rank_under_the_efa_installers_mpirun(tmp_path):
    node = deep_node(tmp_path)
    mpirun = node.root / health.DEEP_MPIRUN.lstrip("/")
    mpirun.parent.mkdir(parents=True)
    mpirun.write_text('#!/bin/bash\n# records its arguments, runs the one rank\n'
                      'printf "%s\\n" "$*" >"$FAKE_SANDBOX/state/mpirun"\nshift 5\nexec "$@"\n')
    mpirun.chmod(0o755)
    assert boot(node, STANDIN_BUSBW_NODE="455").returncode == 0
    launched = (node.state / "mpirun").read_text().split()
    assert launched[:5] == ["--allow-run-as-root", "-np", "1", "-x", "LD_LIBRARY_PATH"]
    assert launched[5].endswith(f"{NCCL_DIR}/all_reduce_perf") and launched[-2:] == ["-g", "8"]
    assert metrics(node)["fmcluster_node_deep_check_passed"] == "1"


def test_a_failed_dcgm_diagnostic_keeps_slurmd_down(tmp_path):
    node = deep_node(tmp_path)
    result = boot(node, STANDIN_DCGM="fail")
    assert result.returncode == 1
    reason = "DCGM diagnostic level 2 failed: GPU Memory"
    assert reason in result.stderr
    assert node.file(READY_METRIC).splitlines()[-1] == f'fmcluster_node_ready{{reason="{reason}"}} 0'
    assert node.file(health.DEEP_CHECK_MARKER) == f"{INSTANCE}\ndeep-dcgm {reason}\n"
    assert metrics(node)["fmcluster_node_deep_check_passed"] == "0"
    # the fault is kept: slurmd's gate holds slurmd down, even if the diagnostic would pass now
    assert start_slurmd(node) != 0 and node.unit_state("slurmd.service") == "failed"
    out = node.run(f'"$FMCLUSTER_ROOT{node_facts.FMCLUSTER_LIB}/node-ready"', name="ready.sh")
    assert out.stdout == f"deep-dcgm {reason}\n"


def replacement_standin(node: Sandbox, rc: int = 0) -> Path:
    """The node's request-replacement (the health check's way to the replacer), a stand-in that
    records its arguments in state/replacements and exits `rc`."""
    request = node.root / node_facts.FMCLUSTER_LIB.lstrip("/") / "request-replacement"
    request.parent.mkdir(parents=True, exist_ok=True)
    request.write_text(f'#!/bin/sh\necho "$*" >>"$FAKE_SANDBOX/state/replacements"\nexit {rc}\n')
    request.chmod(0o755)
    return node.state / "replacements"


def test_a_node_that_fails_its_deep_check_asks_for_its_replacement_once(tmp_path):
    """slurmd never starts on it, so the health check (which needs slurmd's configless slurm.conf)
    never would: node-ready asks, once per instance."""
    node = deep_node(tmp_path)
    asked = replacement_standin(node)
    assert boot(node, STANDIN_DCGM="fail").returncode == 1
    assert asked.read_text() == "deep-dcgm DCGM diagnostic level 2 failed: GPU Memory\n"
    assert node.file(health.DEEP_CHECK_MARKER + ".replacement") == INSTANCE + "\n"
    request = next(c for c in node.calls("timeout") if c.args[1].endswith("/request-replacement"))
    assert request.args[0] == "45"  # bounded
    # slurmd's gate reads the verdict back: not asked again
    assert start_slurmd(node) != 0
    assert asked.read_text().count("\n") == 1


def test_a_replacement_request_the_queue_did_not_take_is_asked_again(tmp_path):
    node = deep_node(tmp_path)
    asked = replacement_standin(node, rc=1)
    boot(node, STANDIN_BUSBW_NODE="200")
    assert not node.exists(health.DEEP_CHECK_MARKER + ".replacement")
    start_slurmd(node)
    assert asked.read_text().splitlines() == ["deep-nccl all_reduce busbw 200.00 GB/s on 8 GPUs, below 270 GB/s"] * 2


def test_without_the_request_installed_nothing_is_asked(tmp_path):
    node = deep_node(tmp_path)
    assert boot(node, STANDIN_DCGM="fail").returncode == 1
    assert not (node.state / "replacements").exists()
    assert not node.exists(health.DEEP_CHECK_MARKER + ".replacement")


def test_dcgm_that_cannot_run_fails_the_deep_check(tmp_path):
    node = deep_node(tmp_path)
    result = boot(node, STANDIN_DCGM="down")
    assert result.returncode == 1
    assert "dcgmi diag -r 2 could not run (exit 1): Error: unable to establish a connection" in result.stderr
    assert node.file(health.DEEP_CHECK_MARKER).splitlines()[1].startswith("deep-dcgm ")


def test_a_slow_all_reduce_is_deep_nccl(tmp_path):
    floor = prog.deep_nccl_floor(nodes.pcs_group(TYPE)[1])
    assert floor == "270"  # 0.6 x H100's 450 GB/s NVLink per direction: fmcluster verify's FAIL line
    node = deep_node(tmp_path)
    result = boot(node, STANDIN_BUSBW_NODE="200")
    assert result.returncode == 1
    reason = "all_reduce busbw 200.00 GB/s on 8 GPUs, below 270 GB/s"
    assert node.file(health.DEEP_CHECK_MARKER) == f"{INSTANCE}\ndeep-nccl {reason}\n"
    assert node.file(READY_METRIC).splitlines()[-1] == f'fmcluster_node_ready{{reason="{reason}"}} 0'
    assert metrics(node)["fmcluster_node_deep_check_busbw_gbps"] == "200.00"
    assert start_slurmd(node) != 0


def test_an_image_without_nccl_tests_is_deep_nccl(tmp_path):
    node = deep_node(tmp_path, nccl=False)
    result = boot(node)
    assert result.returncode == 1
    (line,) = node.file(health.DEEP_CHECK_MARKER).splitlines()[1:]
    assert line.startswith("deep-nccl nccl-tests' all_reduce_perf is not installed")


def test_a_reboot_reads_the_verdict_back_and_a_new_instance_runs_it_again(tmp_path):
    node = deep_node(tmp_path)
    assert boot(node).returncode == 0
    after = node.reboot()
    assert "slurmd.service" in after.started
    assert tools_run(node) == []  # the reboot's node-ready (slurmd's gate) ran no tool
    # the same root volume on another instance (an image made from this one): checked again
    new_instance(node, "i-0fedcba9876543210")
    after = node.reboot()
    assert "slurmd.service" in after.started and tools_run(node) == ["dcgmi", "all_reduce_perf"]
    assert node.file(health.DEEP_CHECK_MARKER) == "i-0fedcba9876543210\n"


def test_the_deep_check_is_off_by_default_and_on_gpu_types_only(tmp_path):
    node = deep_node(tmp_path)
    assert boot(node, deep_check=False).returncode == 0
    assert tools_run(node) == [] and not node.exists(health.DEEP_CHECK_MARKER)
    cpu = nodes.pcs_group("c7i.2xlarge", {"health.deep_check": True}, efa=False)
    assert not cpu[0].node(cpu[1]).deep_check and "deep_check" not in pcs_node.node_program(*cpu, REFS).programs


def test_slurmds_start_timeout_covers_the_deep_check(tmp_path):
    node = deep_node(tmp_path)
    assert boot(node).returncode == 0
    dropin = node.file("/etc/systemd/system/slurmd.service.d/50-fmcluster-node-ready.conf")
    seconds = prog.READY_WAIT_SECONDS + prog.DEEP_CHECK_SECONDS + 60
    assert f"TimeoutStartSec={seconds}\n" in dropin
    assert prog.DEEP_CHECK_SECONDS > health.DEEP_DCGM_TIMEOUT_SECONDS + health.DEEP_NCCL_TIMEOUT_SECONDS


@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "p6-b200.48xlarge"])
def test_the_lifecycle_scripts_run_the_deep_check_before_slurmd(instance_type):
    """On PCS's node lifecycle actions, the deep check is node-ready's: in the configure phase's
    settings and the every-boot readiness phase (TERMINATE: a node that fails it is replaced)."""
    made, gpu = nodes.pcs_group(instance_type, {"health.deep_check": True})
    made_scripts = pcs_node.node_actions(made, gpu, REFS)
    configure = next(s for s in made_scripts if s.name == "fmcluster configure")
    assert "program_deep_check()" in configure.text and "DEEP_CHECK=1" in configure.text
    ready = next(s for s in made_scripts if s.name == "fmcluster node ready")
    assert ready.on_error == pcs_node.TERMINATE and ready.execution_policy == pcs_node.EVERY_BOOT
