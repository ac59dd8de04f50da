"""The shared home on the Slurm nodes (fmcluster/node/scripts/boot/home.sh), run in the sandbox:
FSx for OpenZFS over NFS (or the Lustre file system) at /home, mounted before the node is ready,
kept in /etc/fstab, with the image's home directories copied into it first and never over what
it holds. The NFS server is the sandbox's stand-in (tests/support/sandbox_fakes.sh, mount_nfs):
a mount hides the mount point's own files until it is unmounted, as the kernel's does."""

from __future__ import annotations

import shutil

import pytest

from fmcluster.facts import node as node_facts
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import runtime as node_runtime
from fmcluster.node import shell as node_shell
from fmcluster.node.program import HomeMount, LustreMount
from fmcluster.node.refs import NodeRefs
from tests.support import nodes, standins
from tests.support.nodes import QUEUE, URL, first_boot
from tests.support.sandbox import Sandbox, Scenario, mount_unit_name

DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
HOME = HomeMount.nfs(DNS)
FSX = LustreMount(DNS.replace("fs-0123456789abcdef0", "fs-0fedcba9876543210"), "abcdefgh", "/fsx")
# what the cluster stack hands the nodes: the file system's names, the home's, the workspace's URL
REFS = NodeRefs(lustre_dns_name=FSX.dns_name, lustre_mount_name=FSX.mount_name, home_dns_name=DNS,
                remote_write_url=URL, replacement_queue=QUEUE)
SLURMD_DROPIN = "/etc/systemd/system/slurmd.service.d/50-fmcluster-node-ready.conf"
READY_METRIC = f"{node_facts.TEXTFILE_DIR}/fmcluster-ready.prom"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0 the instance's key pair\n"


@pytest.fixture(autouse=True)
def standin_pins(monkeypatch):
    """The scripts rendered here pin the stand-ins' commits (as tests/node/test_boot_path.py): the
    node's image is baked from them, and its container runtime is checked against the pins."""
    for name, value in standins.pristine().pins().items():
        monkeypatch.setattr(node_runtime, name, value)


def scripts(*, lustre_home: bool = False, name: str = "gpu", refs: NodeRefs = REFS):
    """The PCS node lifecycle scripts of a cluster with the shared home on FSx for OpenZFS (or
    `lustre_home`: its Lustre file system mounted at /home), of its group `name`."""
    edits = {"storage.lustre.mount_path": "/home"} if lustre_home else {"storage.home": {}}
    return pcs_node.node_actions(*nodes.pcs_group("p5.48xlarge", edits, name=name), refs)


def image_home(node: Sandbox, user: str = "ubuntu", key: str = KEY) -> None:
    """The image's /home: the default user's home with the instance's SSH key."""
    ssh = node.root / "home" / user / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "authorized_keys").write_text(key)
    (node.root / "home" / user / ".bashrc").write_text("# the image's\n")


HEALTHY = Scenario()


def boot(tmp_path, *, lustre_home=False, scenario=HEALTHY, seed=True, server=None):
    """A node booted with the shared home, as AWS PCS boots it; `server`: another node whose NFS
    server (its files) this one shares."""
    node = Sandbox(tmp_path, scenario)
    if seed:
        image_home(node)
    if server is not None:
        share_server(server, node)
    return node, first_boot(node, scripts(lustre_home=lustre_home))


def share_server(first: Sandbox, second: Sandbox) -> None:
    """`second`'s NFS server holds what `first`'s does (the same file system, from another node):
    its files at the mount point while `first` has it mounted, else in its state."""
    key = HOME.source.replace("/", "%")
    files = first.root / "home" if "/home" in first.mounts() else first.state / "nfs" / key
    shutil.copytree(files, second.state / "nfs" / key, symlinks=True)


def index(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


def test_home_mounted_with_the_image_home_copied_in_first(tmp_path):
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    mounts = node.mounts()
    assert mounts["/home"].fstype == "nfs4" and mounts["/home"].source == f"{DNS}:/fsx"
    assert "/run/fmcluster-home" not in mounts  # the staging mount is gone
    assert node.file("/home/ubuntu/.ssh/authorized_keys") == KEY  # the user still logs in
    assert node.fstab().count([f"{DNS}:/fsx", "/home", "nfs", prog.NFS_MOUNT_OPTIONS + ",_netdev",
                               "0", "0"]) == 1
    lines = node.lines()
    staged = index(lines, f"mount -t nfs -o {prog.NFS_MOUNT_OPTIONS} {DNS}:/fsx /run/fmcluster-home")
    assert staged < index(lines, "umount /run/fmcluster-home") < index(lines, "mount /home")
    assert "nfsvers=4.1" in prog.NFS_MOUNT_OPTIONS
    assert node.file(READY_METRIC).splitlines()[-1] == 'fmcluster_node_ready{reason=""} 1'
    assert "copied the image's /home/ubuntu into the shared home" in result.stderr


def test_home_mounted_before_the_readiness_check_and_checked_by_it(tmp_path):
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = node.lines()
    assert index(lines, "mount /home") < index(lines, "nvidia-smi -L")
    ready = node.file(f"{node_shell.FMCLUSTER_ETC}/node-ready.env")
    assert "/home" in next(line for line in ready.splitlines() if line.startswith("REQUIRED_MOUNTS="))


def test_what_the_shared_home_holds_is_never_replaced(tmp_path):
    """A second node (and every boot after the first) finds ubuntu's home there: its copy, with
    what the user changed since, stands."""
    first, result = boot(tmp_path / "first")
    assert result.returncode == 0, result.stderr
    (first.root / "home/ubuntu/notes.txt").write_text("mine\n")  # through the mount: on the server
    (first.root / "home/ubuntu/.bashrc").write_text("# the user's own\n")
    second = Sandbox(tmp_path / "second", Scenario())
    image_home(second, key="ssh-ed25519 AAAA another key\n")
    share_server(first, second)
    result = first_boot(second, scripts())
    assert result.returncode == 0, result.stderr
    assert second.file("/home/ubuntu/notes.txt") == "mine\n"
    assert second.file("/home/ubuntu/.bashrc") == "# the user's own\n"
    assert second.file("/home/ubuntu/.ssh/authorized_keys") == KEY
    assert "copied the image's" not in result.stderr
    assert not [p for p in (second.root / "home").iterdir() if p.name.startswith(".")]  # no half copies left


def test_a_new_image_user_is_added_beside_the_others(tmp_path):
    first, result = boot(tmp_path / "first")
    assert result.returncode == 0, result.stderr
    second = Sandbox(tmp_path / "second", Scenario())
    image_home(second)
    image_home(second, user="ec2-user")
    share_server(first, second)
    result = first_boot(second, scripts())
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (second.root / "home").iterdir()) == ["ec2-user", "ubuntu"]
    assert "copied the image's /home/ec2-user" in result.stderr and "/home/ubuntu into" not in result.stderr


def test_home_retries_until_it_mounts(tmp_path):
    node, result = boot(tmp_path, scenario=Scenario(nfs_mount_fails=3))
    assert result.returncode == 0, result.stderr
    assert node.mounts()["/home"].fstype == "nfs4"
    assert node.file("/home/ubuntu/.ssh/authorized_keys") == KEY


def test_home_that_never_mounts_keeps_slurmd_down(tmp_path):
    node, result = boot(tmp_path, scenario=Scenario(nfs_mount_fails=-1))
    assert result.returncode == 1 and "mount_home failed" in result.stderr
    assert "/home" not in node.mounts()
    assert node.file("/home/ubuntu/.ssh/authorized_keys") == KEY  # the image's home, untouched
    attempts = [c for c in node.calls("mount") if c.args[:2] == ("-t", "nfs")]
    assert len(attempts) == prog.HOME_MOUNT_ATTEMPTS
    assert node.file(READY_METRIC).splitlines()[-1] == 'fmcluster_node_ready{reason="/home is not mounted"} 0'
    start = node.run("systemctl start slurmd.service", name="start.sh")
    assert start.returncode != 0 and node.unit_state("slurmd.service") == "failed"


def test_an_image_without_the_nfs_client_is_not_ready(tmp_path):
    node, result = boot(tmp_path, scenario=Scenario(nfs_client=False))
    assert result.returncode == 1 and "mount_home failed" in result.stderr
    assert "mount.<type> helper program" in result.stderr
    assert node.file(READY_METRIC).splitlines()[-1] == 'fmcluster_node_ready{reason="/home is not mounted"} 0'


def test_reboot_mounts_home_from_fstab_before_slurmd(tmp_path):
    node, result = boot(tmp_path)
    assert result.returncode == 0, result.stderr
    after = node.reboot()
    assert mount_unit_name("/home") in after.started and "slurmd.service" in after.started
    assert node.mounts()["/home"].fstype == "nfs4"
    assert node.file("/home/ubuntu/.ssh/authorized_keys") == KEY


def test_lustre_at_home_is_seeded_and_mounted_once(tmp_path):
    lustre = LustreMount(FSX.dns_name, FSX.mount_name, "/home")
    node, result = boot(tmp_path, lustre_home=True)
    assert result.returncode == 0, result.stderr
    assert node.mounts()["/home"].fstype == "lustre"
    lines = node.lines()
    assert index(lines, f"mount -t lustre -o relatime,flock {lustre.source} /run/fmcluster-home") \
        < index(lines, "umount /run/fmcluster-home") < index(lines, "mount /home")
    assert node.fstab().count([lustre.source, "/home", "lustre", prog.FSX_MOUNT_OPTIONS, "0", "0"]) == 1
    assert not [c for c in node.calls("mount") if c.args[-2:] == (lustre.source, "/home")]  # not lustre.sh's too


def test_pcs_lifecycle_scripts_mount_home_every_boot_with_its_source_as_an_argument():
    made = scripts(refs=NodeRefs(lustre_dns_name=FSX.dns_name, lustre_mount_name=FSX.mount_name,
                                 home_dns_name="${Token[TOKEN.123]}"))
    (storage,) = [s for s in made if s.name == "fmcluster storage"]
    assert storage.execution_policy == pcs_node.EVERY_BOOT and "  step mount_home" in storage.text
    assert "HOME_SOURCE=${Token[TOKEN.123]}:/fsx" in storage.arguments
    (ready,) = [s for s in made if s.name == "fmcluster node ready"]
    assert ready.on_error == pcs_node.TERMINATE


def test_login_nodes_mount_home_too():
    assert any("  step mount_home" in s.text for s in scripts(name="login"))


def hyperpod(name: str = "gpu", *, lustre: bool = True) -> str:
    """The on_init.sh of a group of a HyperPod Slurm cluster with the shared home (and its Lustre
    file system at /fsx, with `lustre`): its compute group, or the controller or login nodes."""
    edits = {"storage.home": {}, **({} if lustre else {"storage.lustre": None})}
    return hyperpod_node.entry_script(*nodes.group("hyperpod-slurm", "p5.48xlarge", edits, name=name), REFS)


def test_hyperpod_compute_groups_check_home_and_keep_the_image_cache_on_lustre():
    text = hyperpod()
    assert "REQUIRED_MOUNTS='/fsx /home /scratch'" in text
    assert "ENROOT_CACHE_ROOT=/fsx/enroot/cache" in text
    home_only = hyperpod(lustre=False)
    assert "REQUIRED_MOUNTS='/home /scratch'" in home_only
    assert "ENROOT_CACHE_ROOT=/scratch/enroot/cache" in home_only


def test_the_scripts_with_a_home_are_shellcheck_clean(tmp_path):
    from tests.support.tools import assert_shellcheck_clean

    made = {s.file_name: s.text for s in scripts()}
    made.update({f"lustre-home-{s.file_name}": s.text for s in scripts(lustre_home=True)})
    made["hyperpod"] = hyperpod(lustre=False)
    assert_shellcheck_clean(tmp_path, made)


def hyperpod_mounted(node: Sandbox) -> None:
    """SageMaker HyperPod's own mount of the home (FsxOpenZfsConfig), before the lifecycle script."""
    result = node.run(f"#!/bin/bash\nset -e\nmount -t nfs -o {prog.NFS_MOUNT_OPTIONS} {HOME.source} /home\n",
                      name="hyperpod-mount.sh")
    assert result.returncode == 0, result.stderr


# a HyperPod login node (Ubuntu 22.04, on its image: the container runtime against HyperPod's Slurm)
HYPERPOD_LOGIN = Scenario(os_release="jammy", dlami_nvme=0, slurmd=False, nvme_disks=0, gpus=0, efa_devices=0)


def test_hyperpod_copies_the_image_home_into_the_home_it_mounted(tmp_path):
    node = Sandbox(tmp_path, HYPERPOD_LOGIN)
    image_home(node)
    hyperpod_mounted(node)
    assert not (node.root / "home/ubuntu").exists()  # hidden by the mount
    text = hyperpod("login", lustre=False)
    result = node.run(text)
    assert result.returncode == 0, result.stderr
    assert node.file("/home/ubuntu/.ssh/authorized_keys") == KEY  # through the mount: on the server
    assert "/run/fmcluster-image-root" not in node.mounts() and node.mounts()["/home"].fstype == "nfs4"
    again = node.run(text)
    assert again.returncode == 0 and "copied the image's" not in again.stderr


def test_hyperpod_without_its_home_mounted_fails_the_script(tmp_path):
    node = Sandbox(tmp_path, HYPERPOD_LOGIN)
    image_home(node)
    result = node.run(hyperpod("login", lustre=False))
    assert result.returncode == 1 and "/home is not mounted" in result.stderr


def test_an_empty_directory_a_file_or_a_link_in_the_shared_home_is_never_replaced(tmp_path):
    """rename(2) would replace an empty directory; the copy-in skips every name that is there, and
    copies only the image's directories."""
    first, result = boot(tmp_path / "first")
    assert result.returncode == 0, result.stderr
    (first.root / "home/ubuntu/.ssh/authorized_keys").unlink()
    (first.root / "home/ubuntu/.ssh").rmdir()
    (first.root / "home/ubuntu/.bashrc").unlink()  # ubuntu's home, emptied by its user
    (first.root / "home/ec2-user").write_text("a file\n")
    (first.root / "home/admin").symlink_to("/nowhere")
    second = Sandbox(tmp_path / "second", Scenario())
    for user in ("ubuntu", "ec2-user", "admin"):
        image_home(second, user=user)
    (second.root / "home/README").write_text("the image's file\n")
    share_server(first, second)
    result = first_boot(second, scripts())
    assert result.returncode == 0, result.stderr
    home = second.root / "home"
    assert (home / "ubuntu").is_dir() and not list((home / "ubuntu").iterdir())
    assert second.file("/home/ec2-user") == "a file\n"
    assert (home / "admin").is_symlink()
    assert not (home / "README").exists()
    assert "copied the image's" not in result.stderr
    assert not [p for p in home.iterdir() if p.name.startswith(".")]


def test_partial_copies_older_than_this_boot_are_removed(tmp_path):
    """A node that died mid-copy left .NAME.fmcluster-HOST-PID behind: the next node to boot
    removes it; a copy newer than its boot (another node's, under way) stays."""
    first, result = boot(tmp_path / "first")
    assert result.returncode == 0, result.stderr
    stale = first.root / "home/.ec2-user.fmcluster-ip-10-0-0-9-4242"
    (stale / ".ssh").mkdir(parents=True)
    (stale / ".ssh/authorized_keys").write_text(KEY)

    def boot_second(name: str, boot_time: int) -> tuple[Sandbox, object]:
        node = Sandbox(tmp_path / name, Scenario())
        image_home(node)
        share_server(first, node)
        (node.root / "proc/stat").write_text(f"cpu  1 2 3 4\nbtime {boot_time}\nprocesses 1\n")
        return node, first_boot(node, scripts())

    changed = int(stale.stat().st_ctime)  # what the script compares with the boot time (find -newerct)
    kept, result = boot_second("booted-before", changed - 3600)
    assert result.returncode == 0, result.stderr
    assert (kept.root / "home" / stale.name).is_dir()  # newer than that boot: maybe under way
    removed, result = boot_second("booted-after", changed + 3600)
    assert result.returncode == 0, result.stderr
    assert not [p for p in (removed.root / "home").iterdir() if p.name.startswith(".")]
    assert f"removed {stale.name}, a partial copy older than this boot" in result.stderr
    assert removed.file("/home/ubuntu/.ssh/authorized_keys") == KEY
