"""Node bootstrap rendering (fmcluster.bootstrap): pure, no CDK.

shellcheck runs on every rendered variant. Where shellcheck is missing the test is skipped
locally, and fails in CI (CI=true), so that a CI image without it cannot pass silently.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fmcluster import bootstrap
from fmcluster.bootstrap import LustreMount

FSX = LustreMount("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx")
VARIANTS = {  # name: (instance type, efa, lustre)
    "p5-lustre": ("p5.48xlarge", True, FSX),
    "p5-no-lustre": ("p5.48xlarge", True, None),
    "p5-4xl-lustre": ("p5.4xlarge", True, FSX),
    "p5-4xl-no-lustre": ("p5.4xlarge", True, None),
    "c7i-lustre": ("c7i.8xlarge", False, FSX),
    "c7i-no-lustre": ("c7i.8xlarge", False, None),
    "b300-lustre": ("p6-b300.48xlarge", True, FSX),
}


def render(name: str) -> str:
    instance_type, efa, lustre = VARIANTS[name]
    return bootstrap.node_script(instance_type, efa=efa, lustre=lustre)


def _settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


# --- what each variant contains ------------------------------------------------------------

def test_p5_48xlarge_stripes_eight_disks_and_mounts_lustre():
    script = render("p5-lustre")
    assert "\nNVME_DISK_COUNT=8\n" in script and "\nSCRATCH_PATH=/scratch\n" in script
    assert "mdadm --create" in script and "/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*" in script
    assert "\nFSX_SOURCE=fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh\n" in script
    assert "\nFSX_MOUNT_PATH=/fsx\n" in script
    assert 'mount -t lustre -o relatime,flock "$FSX_SOURCE" "$FSX_MOUNT_PATH"' in script
    assert 'add_fstab "$FSX_SOURCE" "$FSX_MOUNT_PATH" lustre "defaults,relatime,flock,_netdev"' in script
    assert script.splitlines()[:5][-1] == "set -euo pipefail"
    assert script.rstrip().endswith('main "$@"')


def test_p5_4xlarge_has_one_disk():
    script = render("p5-4xl-lustre")
    assert "\nNVME_DISK_COUNT=1\n" in script
    assert "device=${disks[0]}" in script  # one disk: formatted directly, no array


def test_c7i_8xlarge_has_no_instance_store():
    script = render("c7i-lustre")
    assert "NVME_DISK_COUNT" not in script and "setup_scratch" not in script and "mdadm" not in script
    assert "mount_lustre" in script


@pytest.mark.parametrize("name", [n for n in VARIANTS if n.endswith("no-lustre")])
def test_without_lustre_nothing_is_mounted(name):
    script = render(name)
    assert "lustre" not in script and "FSX_" not in script


def test_steps_run_in_order():
    main = render("p5-lustre").split("main() {", 1)[1]
    assert main.index("write_nccl_env") < main.index("setup_scratch") < main.index("mount_lustre")


@pytest.mark.parametrize("instance_type, efa, expected, absent", [
    ("p5.48xlarge", True, ["FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1", "NCCL_BUFFSIZE=8388608"], []),
    ("p6-b300.48xlarge", True, ["FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1"], []),
    ("c7i.48xlarge", True, ["FI_PROVIDER=efa"], ["FI_EFA_USE_DEVICE_RDMA", "NCCL_BUFFSIZE"]),  # EFA, no GPU
    ("c7i.8xlarge", False, [], ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"]),
    ("p5.48xlarge", False, [], ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"]),  # efa: false in the spec
])
def test_nccl_environment(instance_type, efa, expected, absent):
    from fmcluster import catalog

    env = bootstrap.nccl_environment(catalog.get(instance_type), efa)
    exports = [line.removeprefix("export ") for line in env.splitlines() if line.startswith("export ")]
    for setting in expected:
        assert setting in exports
    assert not [e for e in exports if e.split("=")[0] in absent]
    assert "NCCL_SOCKET_IFNAME=^lo,docker" in exports
    assert all(line.startswith(("#", "export ")) for line in env.splitlines())  # every setting explained


def test_values_are_shell_quoted():
    """A hostile or token value stays one shell word: no command substitution, no split."""
    token = "${Token[TOKEN.123]}"
    script = bootstrap.node_script("c7i.8xlarge", efa=False,
                                   lustre=LustreMount(token, "x'; rm -rf / #", "/mnt/my fsx"))
    settings = _settings(script)
    assert "FSX_SOURCE='${Token[TOKEN.123]}@tcp:/x'\"'\"'; rm -rf / #'" in settings
    assert "FSX_MOUNT_PATH='/mnt/my fsx'" in settings
    out = subprocess.run(["bash", "-c", settings + '\nprintf "%s|%s" "$FSX_SOURCE" "$FSX_MOUNT_PATH"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == f"{token}@tcp:/x'; rm -rf / #|/mnt/my fsx"


def test_unknown_instance_type():
    with pytest.raises(ValueError, match="not in the instance catalog"):
        bootstrap.node_script("p9.96xlarge", efa=True)


def test_scripts_ship_as_package_data():
    assert {p.name for p in bootstrap.SCRIPTS.glob("*.sh")} == {"header.sh", "nccl.sh", "scratch.sh", "lustre.sh", "metrics.sh"}


# --- MIME ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_user_data_is_mime_multipart_with_the_script(name):
    instance_type, efa, lustre = VARIANTS[name]
    text = bootstrap.user_data(instance_type, efa=efa, lustre=lustre)
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    assert message["MIME-Version"] == "1.0"
    (part,) = message.get_payload()
    assert part.get_content_type() == "text/x-shellscript"
    assert part.get_content_charset() == "us-ascii"
    assert part.get_filename() == "fmcluster-node.sh"
    assert part.get_payload() == render(name).rstrip("\n")
    assert not message.defects and not part.defects


def test_user_data_is_deterministic():
    assert bootstrap.user_data("p5.48xlarge", efa=True, lustre=FSX) == bootstrap.user_data(
        "p5.48xlarge", efa=True, lustre=FSX)


def test_mime_refuses_the_boundary_and_non_ascii():
    with pytest.raises(ValueError, match="boundary"):
        bootstrap.mime_multipart([("text/x-shellscript", "a.sh", f"echo {bootstrap.BOUNDARY}")])
    with pytest.raises(ValueError, match="ASCII"):
        bootstrap.mime_multipart([("text/x-shellscript", "a.sh", "echo caf\u00e9")])


# --- the rendered scripts run ---------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_script_parses(name, tmp_path):
    script = tmp_path / "node.sh"
    script.write_text(render(name))
    subprocess.run(["bash", "-n", str(script)], check=True)


def shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found:
        return found
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail("shellcheck is not installed, and CI is set: install it "
                    "(Debian/Ubuntu: apt-get install shellcheck)")
    pytest.skip("shellcheck is not installed (apt-get install shellcheck); CI=true makes this a failure")


def assert_shellcheck_clean(tmp_path: Path, scripts: dict[str, str]) -> None:
    """shellcheck (every severity down to style) finds nothing in the scripts (name -> text)."""
    binary = shellcheck()
    files = []
    for name, text in scripts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        files.append(str(path))
    result = subprocess.run([binary, "--shell=bash", "--severity=style", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_scripts_are_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {name: render(name) for name in VARIANTS})


STUBS = {"mountpoint": "exit 1", "sleep": "exit 0", "install": "exit 0", "chmod": "exit 0"}


def run_script(tmp_path: Path, name: str, stubs: dict[str, str], runs: int = 1) -> subprocess.CompletedProcess:
    """Run a rendered script with stub system commands (STUBS, then `stubs`); /etc/fstab, the
    NCCL environment file and /dev/disk/by-id are redirected into tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for command, body in {**STUBS, **stubs}.items():
        (bin_dir / command).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / command).chmod(0o755)
    script = (render(name).replace("/etc/fstab", str(tmp_path / "fstab"))
              .replace(bootstrap.NCCL_ENV_FILE, str(tmp_path / "nccl.sh"))
              .replace("/dev/disk/by-id", str(tmp_path / "by-id")))
    (tmp_path / "node.sh").write_text(script)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for _ in range(runs):
        (tmp_path / "count").unlink(missing_ok=True)
        result = subprocess.run(["bash", str(tmp_path / "node.sh")], env=env, capture_output=True, text=True)
    return result


def test_lustre_mount_retries_and_fstab_stays_unique(tmp_path):
    """mount fails twice, then succeeds; a second run adds no second fstab line."""
    fails_twice = (f'n=$(cat {tmp_path}/count 2>/dev/null || echo 0); echo $((n+1)) >{tmp_path}/count; '
                   f'echo "mount $*" >>{tmp_path}/calls; [ "$n" -ge 2 ]')
    assert run_script(tmp_path, "c7i-lustre", {"mount": fails_twice}, runs=2).returncode == 0
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == f"mount -t lustre -o relatime,flock {FSX.source} /fsx" and len(calls) == 6
    assert (tmp_path / "fstab").read_text() == f"{FSX.source} /fsx lustre defaults,relatime,flock,_netdev 0 0\n"
    assert "NCCL_SOCKET_IFNAME=^lo,docker" in (tmp_path / "nccl.sh").read_text()


def test_lustre_mount_gives_up(tmp_path):
    result = run_script(tmp_path, "c7i-lustre", {"mount": "exit 32"})
    assert result.returncode != 0
    assert f"attempt {bootstrap.FSX_MOUNT_ATTEMPTS} of {bootstrap.FSX_MOUNT_ATTEMPTS}" in result.stderr
    assert "error: could not mount" in result.stderr


def scratch_stubs(tmp_path: Path, disks: int, mounted_at: str = "") -> dict[str, str]:
    """Fake instance-store disks (two by-id links each, plus a partition link) and stubs that log
    mdadm, mkfs and mount; `mounted_at`: where lsblk says the disks are mounted already."""
    (tmp_path / "by-id").mkdir()
    for i in range(1, disks + 1):
        device = tmp_path / f"nvme{i}n1"
        device.touch()
        for suffix in ("", "_1", "-part1"):
            (tmp_path / "by-id" / f"nvme-Amazon_EC2_NVMe_Instance_Storage_AWS{i}{suffix}").symlink_to(device)
    log = f'echo "$(basename "$0") $*" >>{tmp_path}/calls'
    return {
        "mdadm": log, "mount": log,
        "mkfs.ext4": f"{log}; touch {tmp_path}/formatted",
        "lsblk": f'case "$2" in MOUNTPOINT) printf "\\n%s\\n" "{mounted_at}";; *) echo "$3 disk";; esac',
        "blkid": f'case "$2" in UUID) echo uuid-1;; TYPE) [ -e {tmp_path}/formatted ] && echo ext4 || exit 2;; esac',
    }


def test_scratch_stripes_all_instance_store_disks(tmp_path):
    result = run_script(tmp_path, "p5-no-lustre", scratch_stubs(tmp_path, 8))
    assert result.returncode == 0, result.stderr
    disks = " ".join(str(tmp_path / f"nvme{i}n1") for i in range(1, 9))
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"mdadm --create /dev/md/scratch --level=0 --raid-devices=8 --force --run {disks}",
        "mkfs.ext4 -F -q -m 0 -E nodiscard -L scratch /dev/md/scratch",
        "mount -o defaults,noatime /dev/md/scratch /scratch"]
    assert (tmp_path / "fstab").read_text() == (
        "UUID=uuid-1 /scratch ext4 defaults,noatime,nofail,x-systemd.device-timeout=30s 0 0\n")


def test_scratch_on_a_single_disk_needs_no_array(tmp_path):
    result = run_script(tmp_path, "p5-4xl-no-lustre", scratch_stubs(tmp_path, 1))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"mkfs.ext4 -F -q -m 0 -E nodiscard -L scratch {tmp_path}/nvme1n1",
        f"mount -o defaults,noatime {tmp_path}/nvme1n1 /scratch"]


def test_scratch_reuses_instance_store_the_ami_mounted(tmp_path):
    result = run_script(tmp_path, "p5-no-lustre", scratch_stubs(tmp_path, 8, mounted_at="/opt/dlami/nvme"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text().splitlines() == ["mount --bind /opt/dlami/nvme /scratch"]
    assert (tmp_path / "fstab").read_text() == "/opt/dlami/nvme /scratch none bind,nofail 0 0\n"
