"""SageMaker HyperPod lifecycle scripts (fmcluster.node.lifecycle): pure, no CDK. What they do is tested
by running them (tests/node/test_boot_path.py); here: what they are made of.

shellcheck runs on every rendered variant; like tests/node/test_bootstrap.py, a missing shellcheck
skips locally and fails when CI=true.
"""

from __future__ import annotations

import subprocess

import pytest

from fmcluster.model import node as node_setup
from fmcluster.node import bootstrap, lifecycle
from tests.support.tools import assert_shellcheck_clean

VARIANTS = {  # name: (group, instance type, efa, checks, lnet_efa)
    "b200": ("train", "p6-b200.48xlarge", True, lifecycle.NodeChecks(("/fsx",)), False),
    "b200-containers": ("train", "p6-b200.48xlarge", True, lifecycle.NodeChecks(("/fsx",), containers=True), False),
    "p5-no-efa": ("eval", "p5.48xlarge", False, lifecycle.NodeChecks(()), False),
    "p5-4xl": ("small", "p5.4xlarge", True, None, False),
    "b300-eks-efa-lustre": ("b300", "p6-b300.48xlarge", True, None, True),
    "controller": ("controller", "m7i.2xlarge", False, None, False),
}


RUNTIME = {"controller-containers": ("controller", lifecycle.SlurmRuntime(controller=True, shared_path="/fsx")),
           "login-containers": ("login", lifecycle.SlurmRuntime())}


def render(name: str) -> str:
    if name in RUNTIME:
        group, runtime = RUNTIME[name]
        return lifecycle.entry_script(group, "m7i.2xlarge", efa=False, runtime=runtime)
    group, instance_type, efa, checks, lnet_efa = VARIANTS[name]
    return lifecycle.entry_script(group, instance_type, efa=efa, checks=checks, lnet_efa=lnet_efa)


def settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def steps(script: str) -> list[str]:
    main = script.rsplit("\nmain() {\n", 1)[1].split("\n}", 1)[0]
    return [line.strip().removeprefix("step ") for line in main.splitlines()]


@pytest.mark.parametrize("name, expected", [
    ("b200", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_scratch", "install_node_ready",
              "gate_drain", "finish"]),
    ("p5-4xl", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_scratch", "finish"]),
    ("b300-eks-efa-lustre", ["protect_running_jobs", "write_nccl_env", "run_hooks", "install_lustre_client",
                             "setup_lnet_efa",
                             "setup_scratch", "finish"]),
    ("controller", ["protect_running_jobs", "write_nccl_env", "run_hooks", "finish"]),
    ("controller-containers", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_containers",
                               "register_pyxis", "finish"]),
    ("b200-containers", ["protect_running_jobs", "write_nccl_env", "run_hooks", "setup_scratch", "setup_containers",
                         "register_pyxis", "install_node_ready", "gate_drain", "finish"]),
])
def test_steps_of_each_group(name, expected):
    assert steps(render(name)) == expected


def test_gpu_script_header_and_settings():
    script = render("b200")
    assert script.startswith("#!/bin/bash\n"
                             "# fmcluster SageMaker HyperPod lifecycle script (LifeCycleConfig.OnInitComplete)")
    assert "AWS PCS" not in script  # the bootstrap header's PCS comment is replaced
    values = settings(script)
    assert "\nNODE_GROUP='train'\n" in values and "\nINSTANCE_TYPE=p6-b200.48xlarge\n" in values
    assert "\nNVME_DISK_COUNT=8\n" in values and "\nREQUIRED_MOUNTS='/fsx /scratch'\n" in values
    assert f"\nOPTIONAL_HOOKS='{' '.join(lifecycle.OPTIONAL_HOOKS)}'\n" in values
    assert "export FI_EFA_USE_DEVICE_RDMA=1" in values
    assert "FMCLUSTER_BOOTSTRAP" not in script  # a file in S3: verbatim, no 16 KiB limit


def test_the_bootstrap_fragments_are_used_verbatim():
    script = render("b200")
    for part in ("common.sh", "nccl.sh", "protect.sh", "scratch.sh", "ready.sh", "gate-drain.sh"):
        assert bootstrap.fragment(bootstrap.SCRIPTS / part) in script, part
    assert bootstrap.fragment(lifecycle.SCRIPTS / "hooks.sh") in script
    assert "mount_lustre" not in script  # HyperPod mounts FSx for Lustre (FsxLustreConfig)


def test_efa_false_leaves_out_the_efa_environment():
    assert "FI_PROVIDER" not in settings(render("p5-no-efa"))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_script_parses(name, tmp_path):
    path = tmp_path / "on_init.sh"
    path.write_text(render(name))
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_rendered_scripts_are_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {name: render(name) for name in [*VARIANTS, *RUNTIME]})


# --- bundles -------------------------------------------------------------------------------

def test_bundle_holds_the_entry_script_and_the_hooks():
    hooks = {"50-exporters.sh": "echo exporters\n", "10-first.sh": "echo first\n"}
    bundle = lifecycle.bundle("train", "p5.48xlarge", efa=True, hooks=hooks)
    assert sorted(bundle.files) == ["hooks.d/10-first.sh", "hooks.d/50-exporters.sh", "on_init.sh"]
    assert bundle.files["on_init.sh"] == lifecycle.entry_script("train", "p5.48xlarge", efa=True)


def test_digest_is_stable_and_follows_the_content():
    one = lifecycle.bundle("train", "p5.48xlarge", efa=True)
    assert one.digest == lifecycle.bundle("train", "p5.48xlarge", efa=True).digest
    assert len(one.digest) == 64
    assert one.digest != lifecycle.bundle("eval", "p5.48xlarge", efa=True).digest
    assert one.digest != lifecycle.bundle("train", "p5.48xlarge", efa=True, hooks={"a.sh": "true\n"}).digest


@pytest.mark.parametrize("name", ["../x.sh", "hooks.d/x.sh", "x.py", ".hidden.sh"])
def test_hook_names_are_plain_script_names(name):
    with pytest.raises(ValueError, match="plain"):
        lifecycle.bundle("train", "p5.48xlarge", efa=True, hooks={name: "true\n"})


def test_scripts_ship_as_package_data():
    assert {p.name for p in lifecycle.SCRIPTS.glob("*.sh")} == {"hooks.sh", "plugstack.sh", "remote_write.sh"}


def test_hyperpod_node_ready_reads_what_configless_slurmd_reads():
    """On HyperPod the readiness check looks at the plugstack.conf slurmd got from the controller
    (its conf-cache), not the node's own; the controller alone reconfigures slurmctld."""
    compute = settings(render("b200-containers"))
    assert f"\nREADY_PLUGSTACK={node_setup.HYPERPOD_CONF_CACHE}/plugstack.conf\n" in compute
    assert "\nREADY_PYXIS_CONF=/opt/slurm/etc/plugstack.conf.d/pyxis.conf\n" in compute
    assert "\nSLURM_CONTROLLER=0\n" in compute
    assert "\nSLURM_CONTROLLER=1\n" in settings(render("controller-containers")) + "\n"
    assert "\nSLURM_CONTROLLER=0\n" in settings(render("login-containers")) + "\n"
