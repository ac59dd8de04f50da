"""SageMaker HyperPod lifecycle scripts (fmcluster.lifecycle): pure, no CDK.

shellcheck runs on every rendered variant; like tests/test_bootstrap.py, a missing shellcheck
skips locally and fails when CI=true.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fmcluster import bootstrap, lifecycle
from tests.test_bootstrap import STUBS, assert_shellcheck_clean

VARIANTS = {  # name: (group, instance type, efa)
    "b200": ("train", "p6-b200.48xlarge", True),
    "p5-no-efa": ("eval", "p5.48xlarge", False),
    "p5-4xl": ("small", "p5.4xlarge", True),
    "b300": ("b300", "p6-b300.48xlarge", True),
    "controller": ("controller", "m7i.2xlarge", False),
}


def render(name: str) -> str:
    group, instance_type, efa = VARIANTS[name]
    return lifecycle.entry_script(group, instance_type, efa=efa)


def settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def test_gpu_script_writes_nccl_env_sets_up_scratch_then_runs_hooks():
    script = render("b200")
    assert script.startswith("#!/bin/bash\n# fmcluster SageMaker HyperPod lifecycle script (LifeCycleConfig.OnInitComplete)")
    assert "AWS PCS" not in script  # the bootstrap header's PCS comment is replaced
    values = settings(script)
    assert "\nNODE_GROUP='train'\n" in values and "\nINSTANCE_TYPE=p6-b200.48xlarge\n" in values
    assert "\nNVME_DISK_COUNT=8\n" in values and values.endswith("\nHOOKS_DIR=hooks.d")
    assert "export FI_EFA_USE_DEVICE_RDMA=1" in values
    main = script.split("main() {", 1)[1]
    assert main.index("write_nccl_env") < main.index("setup_scratch") < main.index("run_hooks")
    assert script.rstrip().endswith('main "$@"')


def test_the_bootstrap_fragments_are_used_verbatim():
    script = render("b200")
    for part in ("header.sh", "nccl.sh", "scratch.sh"):
        body = bootstrap.fragment(bootstrap.SCRIPTS / part)
        if part == "header.sh":
            body = body.split("set -euo pipefail", 1)[1]
        assert body in script, part
    assert "mount_lustre" not in script  # HyperPod mounts FSx for Lustre (FsxLustreConfig)


def test_cpu_group_has_no_scratch_and_no_efa():
    script = render("controller")
    assert "setup_scratch" not in script and "NVME_DISK_COUNT" not in script
    assert "FI_PROVIDER" not in script
    assert "run_hooks" in script


def test_efa_false_leaves_out_the_efa_environment():
    assert "FI_PROVIDER" not in settings(render("p5-no-efa"))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_script_parses(name, tmp_path):
    path = tmp_path / "on_init.sh"
    path.write_text(render(name))
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_rendered_scripts_are_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {name: render(name) for name in VARIANTS})


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


# --- the script runs -----------------------------------------------------------------------

def run(tmp_path: Path, name: str, hooks: dict[str, str] | None) -> subprocess.CompletedProcess:
    """Run a rendered script from a folder like HyperPod's download, with stub system commands;
    the NCCL file and the NVMe disk links are redirected into tmp_path (no disks: no scratch)."""
    folder = tmp_path / "lifecycle"
    (folder / "bin").mkdir(parents=True)
    for command, body in STUBS.items():
        (folder / "bin" / command).write_text(f"#!/bin/bash\n{body}\n")
        (folder / "bin" / command).chmod(0o755)
    script = (render(name).replace(bootstrap.NCCL_ENV_FILE, str(tmp_path / "nccl.sh"))
              .replace("/dev/disk/by-id", str(tmp_path / "by-id"))
              .replace("SCRATCH_WAIT_SECONDS=60", "SCRATCH_WAIT_SECONDS=0"))
    (folder / "on_init.sh").write_text(script)
    for hook, body in (hooks or {}).items():
        (folder / "hooks.d").mkdir(exist_ok=True)
        (folder / "hooks.d" / hook).write_text(body)
    env = {**os.environ, "PATH": f"{folder / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(folder / "on_init.sh")], env=env, capture_output=True, text=True,
                          cwd=tmp_path)


def test_hooks_run_in_name_order_with_the_node_environment(tmp_path):
    out = tmp_path / "hooks.log"
    hooks = {name: f'echo "{name} $NODE_GROUP $INSTANCE_TYPE" >>{out}\n' for name in ("50-b.sh", "10-a.sh")}
    result = run(tmp_path, "b200", hooks)
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines() == ["10-a.sh train p6-b200.48xlarge", "50-b.sh train p6-b200.48xlarge"]
    assert "export FI_PROVIDER=efa" in (tmp_path / "nccl.sh").read_text()
    assert "done: p6-b200.48xlarge node set up" in result.stderr


def test_without_hooks_the_script_succeeds(tmp_path):
    result = run(tmp_path, "controller", None)
    assert result.returncode == 0, result.stderr
    assert "no hooks" in result.stderr


def test_a_failing_hook_fails_the_script(tmp_path):
    result = run(tmp_path, "controller", {"10-fail.sh": "exit 3\n", "20-never.sh": f"touch {tmp_path}/ran\n"})
    assert result.returncode != 0
    assert not (tmp_path / "ran").exists()


def test_scripts_ship_as_package_data():
    assert {p.name for p in lifecycle.SCRIPTS.glob("*.sh")} == {"hooks.sh", "remote_write.sh"}
