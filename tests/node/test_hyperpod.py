"""SageMaker HyperPod lifecycle scripts (fmcluster.node.hyperpod): pure, no CDK. What they do is tested
by running them (tests/node/test_boot_path.py); here: what they are made of. Each variant is an
instance group of a model resolved from the test spec on HyperPod (tests/support/nodes.py).

shellcheck runs on every rendered variant; like tests/node/test_program.py, a missing shellcheck
skips locally and fails when CI=true.
"""

from __future__ import annotations

import subprocess

import pytest

from fmcluster.model import node as node_setup
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import shell as node_shell
from tests.support import nodes
from tests.support.nodes import NO_METRICS, REFS
from tests.support.tools import assert_shellcheck_clean

VARIANTS = {  # name: (plane, instance type, edits of the test spec, the group)
    "b200": ("hyperpod-slurm", "p6-b200.48xlarge", {"node_groups[0].name": "train"}, "train"),
    "b200-kept": ("hyperpod-slurm", "p6-b200.48xlarge", {"health.replace": False}, "gpu"),  # no replacements
    "p5-no-efa": ("hyperpod-slurm", "p5.48xlarge", {"node_groups[0].efa": False}, "gpu"),
    "cpu": ("hyperpod-slurm", "c7i.8xlarge", {}, "gpu"),
    "p5-4xl": ("hyperpod-eks", "p5.4xlarge", {}, "gpu"),
    "b300-eks-efa-lustre": ("hyperpod-eks", "p6-b300.48xlarge", {"storage.lustre.efa": True}, "gpu"),
    "controller": ("hyperpod-slurm", "p6-b200.48xlarge", {}, "controller"),
    "login": ("hyperpod-slurm", "p6-b200.48xlarge", {"storage.lustre": None}, "login"),
}


def group(name: str):
    plane, instance_type, edits, group_name = VARIANTS[name]
    return nodes.group(plane, instance_type, edits, name=group_name)


def render(name: str) -> str:
    return hyperpod_node.entry_script(*group(name), REFS)


def settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def steps(script: str) -> list[str]:
    main = script.rsplit("\nmain() {\n", 1)[1].split("\n}", 1)[0]
    return [line.strip().removeprefix("step ") for line in main.splitlines()]


HEALTH = ["install_node_health", "install_request_replacement"]


@pytest.mark.parametrize("name, expected", [
    ("b200", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_scratch", "setup_containers",
              "register_pyxis", "install_node_ready", "gate_drain", *HEALTH, "finish"]),
    ("b200-kept", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_scratch", "setup_containers",
                   "register_pyxis", "install_node_ready", "gate_drain", "install_node_health", "finish"]),
    ("cpu", ["protect_running_jobs", "write_nccl_env", "run_hooks", "install_node_ready", "gate_drain", "finish"]),
    ("p5-4xl", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_scratch", "finish"]),
    ("b300-eks-efa-lustre", ["protect_running_jobs", "write_nccl_env", "run_hooks", "install_lustre_client",
                             "setup_lnet_efa",
                             "setup_scratch", "finish"]),
    ("controller", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_containers", "register_pyxis",
                    "finish"]),
    ("login", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_containers", "register_pyxis",
               "finish"]),
])
def test_steps_of_each_group(name, expected):
    assert steps(render(name)) == expected


def test_gpu_script_header_and_settings():
    script = render("b200")
    assert script.startswith("#!/bin/bash\n"
                             "# fmcluster SageMaker HyperPod lifecycle script (LifeCycleConfig.OnInitComplete)")
    assert "AWS PCS" not in script.split("# Settings of this node group")[0]  # the header's PCS comment is replaced
    values = settings(script)
    assert "\nNODE_GROUP='train'\n" in values and "\nINSTANCE_TYPE=p6-b200.48xlarge\n" in values
    assert "\nNVME_DISK_COUNT=8\n" in values and "\nREQUIRED_MOUNTS='/fsx /scratch'\n" in values
    assert f"\nOPTIONAL_HOOKS='{' '.join(hyperpod_node.OPTIONAL_HOOKS)}'\n" in values
    assert "export FI_EFA_USE_DEVICE_RDMA=1" in values
    assert "\nHEALTH_SLURM_BIN=/opt/slurm/bin\n" in values and "\nREPLACE_PLANE='hyperpod-slurm'\n" in values + "\n"
    assert "FMCLUSTER_BOOTSTRAP" not in script  # a file in S3: verbatim, no 16 KiB limit


def test_the_bootstrap_fragments_are_used_verbatim():
    script = render("b200")
    for part in ("common.sh", "nccl.sh", "protect.sh", "scratch.sh", "ready.sh", "gate-drain.sh"):
        assert node_shell.fragment(node_shell.SCRIPTS / part) in script, part
    assert node_shell.fragment(hyperpod_node.SCRIPTS / "hooks.sh") in script
    assert "mount_lustre" not in script  # HyperPod mounts FSx for Lustre (FsxLustreConfig)


def test_efa_false_leaves_out_the_efa_environment():
    assert "FI_PROVIDER" not in settings(render("p5-no-efa"))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_script_parses(name, tmp_path):
    path = tmp_path / "on_init.sh"
    path.write_text(render(name))
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_rendered_scripts_are_shellcheck_clean(tmp_path):
    made = {name: render(name) for name in VARIANTS}
    made.update({f"{name}-hooks-{hook}": text for name in ("controller", "b200")
                 for hook, text in hyperpod_node.hooks(*group(name), REFS).items()})
    assert_shellcheck_clean(tmp_path, made)


# --- bundles -------------------------------------------------------------------------------

def test_bundle_holds_the_entry_script_and_the_hooks():
    """The controller of a cluster with teams and metrics: the metrics hook and the teams' one."""
    made, controller = nodes.group("hyperpod-slurm", "p6-b200.48xlarge", {"teams": [{"name": "research"}]},
                                   name="controller")
    bundle = hyperpod_node.bundle(made, controller, REFS)
    assert sorted(bundle.files) == ["hooks.d/50-metrics.sh", "hooks.d/60-accounting.sh", "on_init.sh"]
    assert bundle.files["on_init.sh"] == hyperpod_node.entry_script(made, controller, REFS)
    assert bundle.files["hooks.d/50-metrics.sh"] == hyperpod_node.metrics_hook(made, controller)
    assert sorted(hyperpod_node.bundle(made, made.group("gpu"), REFS).files) == ["hooks.d/50-metrics.sh", "on_init.sh"]
    assert sorted(hyperpod_node.bundle(made, made.group("gpu"), NO_METRICS).files) == ["on_init.sh"]
    eks, gpu = nodes.group("hyperpod-eks", "p5.48xlarge")
    assert sorted(hyperpod_node.bundle(eks, gpu, REFS).files) == ["hooks.d/50-expected-gpus.sh", "on_init.sh"]


def test_digest_is_stable_and_follows_the_content():
    made, gpu = group("b200")
    one = hyperpod_node.bundle(made, gpu, REFS)
    assert one.digest == hyperpod_node.bundle(*group("b200"), REFS).digest
    assert len(one.digest) == 64
    assert one.digest != hyperpod_node.bundle(made, made.controller, REFS).digest
    assert one.digest != hyperpod_node.bundle(made, gpu, NO_METRICS).digest


@pytest.mark.parametrize("name", ["../x.sh", "hooks.d/x.sh", "x.py", ".hidden.sh"])
def test_hook_names_are_plain_script_names(name):
    with pytest.raises(ValueError, match="plain"):
        hyperpod_node.folder("#!/bin/bash\n", {name: "true\n"})


def test_scripts_ship_as_package_data():
    assert {p.name for p in hyperpod_node.SCRIPTS.glob("*.sh")} == {"hooks.sh", "plugstack.sh", "remote_write.sh"}


def test_hyperpod_node_ready_reads_what_configless_slurmd_reads():
    """On HyperPod the readiness check looks at the plugstack.conf slurmd got from the controller
    (its conf-cache), not the node's own; the controller alone reconfigures slurmctld."""
    compute = settings(render("b200"))
    assert f"\nREADY_PLUGSTACK={node_setup.HYPERPOD_CONF_CACHE}/plugstack.conf\n" in compute
    assert "\nREADY_PYXIS_CONF=/opt/slurm/etc/plugstack.conf.d/pyxis.conf\n" in compute
    assert "\nSLURM_CONTROLLER=0\n" in compute
    assert "\nSLURM_CONTROLLER=1\n" in settings(render("controller")) + "\n"
    assert "\nSLURM_CONTROLLER=0\n" in settings(render("login")) + "\n"
