"""The AWS PCS node program as node lifecycle scripts (fmcluster.node.pcs), run as PCS runs them.

A sandboxed node (tests/support/sandbox.py) boots as PCS boots it: cloud-init runs the user data
(the slurmd guard), PCS runs the NodeBootstrapped scripts in order (`bash SCRIPT ARG...`, each
script's OnError deciding what a failure does), starts slurmd, then runs the NodeReady scripts;
after a reboot only the EVERY_BOOT scripts run again. The deploy-time settings (CDK tokens when
rendered) reach the scripts as their arguments, filled in as CloudFormation fills them in. The
assertions read what the node did, never the script text.
"""

from __future__ import annotations

import pytest

from fmcluster.facts import node as node_facts
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import runtime as node_runtime
from fmcluster.node import shell as node_shell
from fmcluster.node.refs import NodeRefs
from tests.support import nodes, standins
from tests.support.nodes import NO_METRICS, URL, first_boot, run_stage
from tests.support.sandbox import IMAGE_PCS_SLURM, Sandbox, Scenario, user_data_parts
from tests.support.stacks import FS_DNS, FS_MOUNT, FSX
from tests.support.tools import assert_shellcheck_clean
from tests.support.user_data_size import PCS_USER_DATA_BUDGET

# What the cluster stack hands the node program: other stacks' outputs, CDK tokens until deployed.
TOKENS = {"${Token[TOKEN.101]}": FS_DNS, "${Token[TOKEN.102]}": FS_MOUNT, "${Token[TOKEN.103]}": URL}
TOKEN_REFS = NodeRefs(lustre_dns_name="${Token[TOKEN.101]}", lustre_mount_name="${Token[TOKEN.102]}",
                      remote_write_url="${Token[TOKEN.103]}")
READY_METRIC = f"{node_facts.TEXTFILE_DIR}/fmcluster-ready.prom"
SLURM_VERSION = IMAGE_PCS_SLURM  # the Slurm the sandbox's image has
SLURMD = f"slurmd-{SLURM_VERSION}.service"  # as AWS PCS's Slurm installer names it
SLURMD_DROPIN = f"/etc/systemd/system/{SLURMD}.d/{pcs_node.GATE_DROP_IN}"
# a group of UltraServers beside the group under test: the cluster runs the IMEX prolog
GB200 = {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2, "capacity": {"type": "on-demand"}}


@pytest.fixture(autouse=True)
def standin_pins(monkeypatch):
    """The scripts rendered here pin the stand-ins' commits (as tests/node/test_boot_path.py)."""
    for name, value in standins.pristine().pins().items():
        monkeypatch.setattr(node_runtime, name, value)


def group(instance_type="p5.48xlarge", *, prolog=False, network_features=False, edits=None):
    """The model of a PCS cluster on the sandbox's Slurm, and its group of `instance_type`: one
    node (two with `network_features`: a multi-node EFA group publishes its place in the network),
    with the UltraServer group GB200 beside it with `prolog`; no deep check, no replacements."""
    changes = {"orchestrator.version": SLURM_VERSION, "node_groups[0].count": 2 if network_features else 1,
               "health.deep_check": False, "health.replace": False, **({"node_groups[1]": GB200} if prolog else {})}
    return nodes.group("pcs", instance_type, {**changes, **(edits or {})})


def render(instance_type="p5.48xlarge", *, refs=TOKEN_REFS, **options) -> tuple[pcs_node.LifecycleScript, ...]:
    return pcs_node.node_actions(*group(instance_type, **options), refs)


def first_boot_of(node: Sandbox, scripts):
    return first_boot(node, scripts, values=TOKENS)


def world(**changes) -> Scenario:
    """A node of the PCS-ready DLAMI: its slurmd unit as PCS's Slurm installer names it."""
    return Scenario(**{"gpus": 8, "nvme_disks": 8, "efa_devices": 32, "slurmd_unit": SLURMD, **changes})


def ready_metric(node: Sandbox) -> str:
    return node.file(READY_METRIC).splitlines()[-1]


# --- the split -----------------------------------------------------------------------------------

def test_each_step_runs_once_in_the_programs_order():
    """Every step of the program in exactly one script, a script's in the program's order: the
    configure steps first (the health check's install among them), metrics last (NodeReady)."""
    program = pcs_node.node_program(*group(prolog=True), TOKEN_REFS)
    scripts = pcs_node.scripts(program)
    steps = [line.strip().removeprefix("step ") for s in scripts for line in s.text.splitlines()
             if line.startswith("  step ")]
    phase = {step: i for i, p in enumerate(pcs_node.PHASES) for step in p.steps}
    assert steps == sorted(program.steps, key=phase.__getitem__)  # sorted() is stable: the program's order
    assert steps.index("install_node_health") < steps.index("setup_scratch") and steps[-1] == "setup_metrics"
    stages = [s.stage for s in scripts]
    assert stages == sorted(stages, key=pcs_node.STAGES.index)
    assert [s.name for s in scripts] == ["fmcluster configure", "fmcluster storage", "fmcluster containers",
                                         "fmcluster node ready", "fmcluster metrics"]


def test_policies_of_the_phases():
    policies = {s.name: (s.stage, s.execution_policy, s.on_error) for s in render()}
    assert policies["fmcluster configure"] == (pcs_node.NODE_BOOTSTRAPPED, pcs_node.FIRST_BOOT_ONLY, pcs_node.TERMINATE)
    assert policies["fmcluster storage"] == (pcs_node.NODE_BOOTSTRAPPED, pcs_node.EVERY_BOOT, pcs_node.CONTINUE)
    assert policies["fmcluster node ready"] == (pcs_node.NODE_BOOTSTRAPPED, pcs_node.EVERY_BOOT, pcs_node.TERMINATE)
    assert policies["fmcluster metrics"] == (pcs_node.NODE_READY, pcs_node.FIRST_BOOT_ONLY, pcs_node.CONTINUE)


def test_a_step_without_a_phase_is_refused():
    program = pcs_node.node_program(*group("c7i.8xlarge"), NO_METRICS)
    program.steps.append("something_new")
    with pytest.raises(ValueError, match="something_new"):
        pcs_node.scripts(program)


def test_groups_without_storage_or_metrics_leave_those_scripts_out():
    names = [s.name for s in render("c7i.8xlarge", refs=NodeRefs(), edits={"storage.lustre": None})]
    assert names == ["fmcluster configure", "fmcluster node ready"]


def test_tokens_are_arguments_and_never_in_the_published_text():
    for script in render():
        assert not node_shell.TOKEN_MARK.search(script.text)
        assert [a.split("=", 1)[0] for a in script.arguments] == ["REMOTE_WRITE_URL", "FSX_SOURCE"]
        assert script.checksum == __import__("hashlib").sha256(script.text.encode()).hexdigest()
    plain = render(refs=NO_METRICS)
    assert all(s.arguments == () for s in plain)


def test_the_user_data_is_a_few_hundred_bytes():
    data = pcs_node.user_data()
    assert len(data.encode()) <= PCS_USER_DATA_BUDGET
    assert [t for t, _ in user_data_parts(data).values()] == ["text/x-shellscript"]


def test_the_guard_writes_the_gates_drop_in():
    """The guard's drop-in has the name gate-slurmd.sh writes, so the full gate replaces it."""
    assert pcs_node.GATE_DROP_IN in (node_shell.SCRIPTS / "gate-slurmd.sh").read_text()


def test_the_scripts_and_the_guard_are_shellcheck_clean(tmp_path):
    scripts = {s.file_name: s.text for s in render(prolog=True)}
    (_, guard), = user_data_parts(pcs_node.user_data()).values()
    assert_shellcheck_clean(tmp_path, {**scripts, "guard": guard})


# --- arguments --------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, message", [
    ([], "argument REMOTE_WRITE_URL=VALUE missing"),
    (["REMOTE_WRITE_URL=x"], "argument FSX_SOURCE=VALUE missing"),
    (["REMOTE_WRITE_URL=x", "FSX_SOURCE=a", "FSX_SOURCE=b"], "argument FSX_SOURCE given twice"),
    (["REMOTE_WRITE_URL=x", "FSX_SOURCE=a", "OTHER=1"], "unexpected argument 'OTHER=1'"),
    (["REMOTE_WRITE_URL=x", "FSX_SOURCE=a", "--debug"], "unexpected argument '--debug'"),
])
def test_wrong_arguments_stop_the_script_before_any_step(tmp_path, arguments, message):
    node = Sandbox(tmp_path, world())
    configure = render()[0]
    result = node.run(configure.text, *arguments)
    assert result.returncode != 0 and message in result.stderr
    assert node.calls() == [] and not node.exists(SLURMD_DROPIN)


# --- the boot path ----------------------------------------------------------------------------

def test_a_node_boots_ready_and_a_reboot_reruns_only_every_boot_scripts(tmp_path):
    node = Sandbox(tmp_path, world())
    scripts = render()
    outcome = first_boot_of(node, scripts)
    assert (outcome.verdict, outcome.failed) == ("done", []), outcome
    assert outcome.ran == [s.name for s in scripts]
    assert node.mounts()["/fsx"].source == FSX.source and node.mounts()["/scratch"].backing == "instance-store"
    assert ready_metric(node) == 'fmcluster_node_ready{reason=""} 1'
    assert node.unit_state(SLURMD) == "active"
    gate = node.file(SLURMD_DROPIN)
    assert "Restart=on-failure" in gate  # the full gate replaced the guard

    after = node.reboot()
    assert SLURMD in after.started, after
    again = run_stage(node, scripts, pcs_node.NODE_BOOTSTRAPPED, reboot=True, values=TOKENS)
    assert (again.verdict, again.ran) == ("done", ["fmcluster storage", "fmcluster node ready"])
    assert not node.calls("mdadm") and not node.calls("mkfs.ext4") and not node.calls("git")
    assert ready_metric(node) == 'fmcluster_node_ready{reason=""} 1'


def test_a_mount_lost_at_reboot_is_made_again(tmp_path):
    """The file system's fstab mount fails at boot (not reachable yet): the storage script, run
    on every boot, mounts it before the readiness check. (slurmd, whose gate would mount it too,
    is left to PCS here: PCS starts it after the NodeBootstrapped scripts.)"""
    node = Sandbox(tmp_path, world())
    scripts = render()
    assert first_boot_of(node, scripts).verdict == "done"
    node.set_scenario(lustre_mount_fails=1, slurmd=False)
    assert "fsx.mount" in node.reboot().failed
    assert "/fsx" not in node.mounts()
    again = run_stage(node, scripts, pcs_node.NODE_BOOTSTRAPPED, reboot=True, values=TOKENS)
    assert again.verdict == "done" and node.mounts()["/fsx"].fstype == "lustre"


def test_a_node_that_is_not_ready_is_terminated_before_slurmd_starts(tmp_path):
    node = Sandbox(tmp_path, world(gpus=7))
    outcome = first_boot_of(node, render())
    assert outcome.verdict == "terminated" and outcome.failed == ["fmcluster node ready"]
    assert node.unit_state(SLURMD) != "active"


def test_a_gpu_lost_at_reboot_terminates_the_node(tmp_path):
    node = Sandbox(tmp_path, world())
    scripts = render()
    assert first_boot_of(node, scripts).verdict == "done"
    node.set_scenario(gpus=7)
    after = node.reboot()
    assert SLURMD in after.failed  # the gate keeps slurmd down meanwhile
    again = run_stage(node, scripts, pcs_node.NODE_BOOTSTRAPPED, reboot=True, values=TOKENS)
    assert again.verdict == "terminated"


def test_without_the_lifecycle_scripts_the_guard_keeps_slurmd_down(tmp_path):
    """A node whose lifecycle scripts never ran (an older PCS agent): slurmd never starts."""
    node = Sandbox(tmp_path, world())
    (_, guard), = user_data_parts(pcs_node.user_data()).values()
    assert node.run(guard).returncode == 0
    assert node.run(f"systemctl start {SLURMD}\n", name="start.sh").returncode != 0
    assert SLURMD in node.reboot().failed


def test_the_guard_never_replaces_the_full_gate(tmp_path):
    """cloud-init may run the user data after the lifecycle scripts: the gate stays as written."""
    node = Sandbox(tmp_path, world())
    assert run_stage(node, render(), pcs_node.NODE_BOOTSTRAPPED, values=TOKENS).verdict == "done"
    gate = node.file(SLURMD_DROPIN)
    (_, guard), = user_data_parts(pcs_node.user_data()).values()
    assert node.run(guard).returncode == 0
    assert node.file(SLURMD_DROPIN) == gate


# --- slurmd's unit, whatever its name ------------------------------------------------------------

@pytest.mark.parametrize("started", [SLURMD, "slurmd.service"], ids=["installer-unit", "plain-unit"])
def test_whichever_slurmd_unit_pcs_starts_is_gated(tmp_path, started):
    """The PCS-ready DLAMI has the installer's slurmd-VERSION.service, and PCS's agent is seen
    starting slurmd.service: which one it starts is not documented, so both carry the readiness
    and prolog drop-ins, and whichever starts stays down while the node is not ready."""
    node = Sandbox(tmp_path, world())
    (node.root / "usr/lib/systemd/system").mkdir(parents=True, exist_ok=True)
    (node.root / "usr/lib/systemd/system/slurmd.service").write_text(node.file(f"/etc/systemd/system/{SLURMD}"))
    scripts = render(prolog=True)
    assert run_stage(node, scripts, pcs_node.NODE_BOOTSTRAPPED, values=TOKENS).verdict == "done"
    for unit in (SLURMD, "slurmd.service"):
        drop_ins = sorted(p.name for p in (node.root / f"etc/systemd/system/{unit}.d").iterdir())
        assert drop_ins == ["40-fmcluster-prolog.conf", pcs_node.GATE_DROP_IN], unit
    assert node.run(f"systemctl start {started}\n", name="start.sh").returncode == 0
    node.set_scenario(gpus=7)  # not ready: the gate of the started unit holds it
    assert node.run(f"systemctl restart {started}\n", name="restart.sh").returncode != 0
    verified = node.verify_units()
    assert verified.returncode == 0 and verified.stdout == "", verified.stdout


def test_a_node_of_ones_own_with_slurmd_service_is_gated_there(tmp_path):
    """An ami_id whose Slurm came from packages: the same scripts gate slurmd.service."""
    node = Sandbox(tmp_path, world(slurmd_unit="slurmd.service"))
    assert first_boot_of(node, render()).verdict == "done"
    assert node.exists(f"/etc/systemd/system/slurmd.service.d/{pcs_node.GATE_DROP_IN}")
    node.set_scenario(gpus=7)
    assert "slurmd.service" in node.reboot().failed


def test_the_guard_guards_every_slurmd_unit_the_image_has(tmp_path):
    """The user data cannot know the cluster's release: slurmd.service, and every
    slurmd-VERSION.service of the image."""
    node = Sandbox(tmp_path, world())
    (node.root / "etc/systemd/system/slurmd-26.05.service").write_text(node.file(f"/etc/systemd/system/{SLURMD}"))
    (_, guard), = user_data_parts(pcs_node.user_data()).values()
    assert node.run(guard).returncode == 0
    for unit in (SLURMD, "slurmd-26.05.service", "slurmd.service"):
        assert node.exists(f"/etc/systemd/system/{unit}.d/{pcs_node.GATE_DROP_IN}"), unit
    for unit in (SLURMD, "slurmd-26.05.service"):
        assert node.run(f"systemctl start {unit}\n", name="start.sh").returncode != 0


def test_network_features_are_cleared_by_slurmds_unit_not_by_a_script_before_slurmd(tmp_path):
    """Before slurmd no Slurm command works on AWS PCS (auth/slurm: a client's credential comes from
    slurmd's SACK socket; configless), so no lifecycle script clears an earlier instance's network
    features before slurmd: the configure script (first boot, before slurmd first starts) writes
    the drop-in of slurmd's unit that clears them after each start, and the group's scripts are
    the program's phases alone."""
    scripts = render(network_features=True)
    assert [s.name for s in scripts] == ["fmcluster configure", "fmcluster storage", "fmcluster containers",
                                         "fmcluster node ready", "fmcluster metrics", "fmcluster network features"]
    node = Sandbox(tmp_path, world())
    outcome = first_boot_of(node, scripts)
    assert (outcome.verdict, outcome.failed) == ("done", []), outcome
    for unit in (SLURMD, "slurmd.service"):
        dropin = node.file(f"/etc/systemd/system/{unit}.d/60-fmcluster-network-features.conf")
        assert "ExecStartPost=-/usr/bin/timeout " in dropin and " --clear " in dropin
        # slurmd's start bound: the gate's (readiness wait, 60 s) with the clear's added
        gate = f"TimeoutStartSec={prog.READY_WAIT_SECONDS + 60}\n"
        assert gate in node.file(f"/etc/systemd/system/{unit}.d/{pcs_node.GATE_DROP_IN}")
        assert (f"TimeoutStartSec={prog.READY_WAIT_SECONDS + 60 + prog.NETWORK_FEATURES_CLEAR_SECONDS}\n"
                in dropin)
    verified = node.verify_units()
    assert verified.returncode == 0 and not verified.stdout.strip(), verified.stdout
