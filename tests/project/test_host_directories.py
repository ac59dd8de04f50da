"""tests/support/locks.py's host_directories: the mount points on this machine that the Slurm kit
tests bind each node's directories over are shared by every worker of a run. One worker's share of
the module ending must not remove them while another worker's cluster starts on them (its slurmd
then failed: `mount: /kit: mount point does not exist`); the last holder removes what was made."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.locks import host_directories
from tests.support.paths import ROOT

# Another process holds `host_directories(PATHS, REGISTRY)` until its standard input closes.
HOLDER = """
import sys
from pathlib import Path
from tests.support.locks import host_directories
with host_directories(sys.argv[2:], Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def holder(registry, *paths) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(registry), *map(str, paths)], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process


def test_the_directories_stay_until_the_last_holder_leaves(tmp_path):
    registry, kit, fsx = tmp_path / "registry", tmp_path / "kit", tmp_path / "fsx"
    fsx.mkdir()  # there before: never removed
    other = holder(registry, kit, fsx)
    assert kit.is_dir()
    with host_directories([str(kit), str(fsx)], registry):
        other.communicate("")  # the other worker's share ends first
        assert other.returncode == 0
        assert kit.is_dir(), "removed while this holder still needs it"
    assert not kit.exists() and fsx.is_dir()


def test_the_first_holder_leaving_first_leaves_them_to_the_other(tmp_path):
    registry, kit = tmp_path / "registry", tmp_path / "kit"
    with host_directories([str(kit)], registry):
        other = holder(registry, kit)
    assert kit.is_dir(), "removed while the other holder still needs it"
    other.communicate("")
    assert not kit.exists()


def test_a_holder_that_died_is_forgotten(tmp_path):
    registry, kit = tmp_path / "registry", tmp_path / "kit"
    dead = holder(registry, kit)
    dead.kill()
    dead.wait()
    dead.stdout.close()
    assert kit.is_dir()  # it never left
    with host_directories([str(kit)], registry):
        assert kit.is_dir()
    assert not kit.exists()


def test_a_directory_with_something_left_in_it_is_kept(tmp_path):
    registry, kit = tmp_path / "registry", tmp_path / "kit"
    with host_directories([str(kit)], registry):
        (kit / "left").write_text("")
    assert os.listdir(kit) == ["left"]
