"""Running the node's metrics collectors (fmcluster/node/scripts/boot/collectors/) here, against stand-ins
for the commands they call. Not a test module."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fmcluster.node import shell as node_shell


def stub_bin(tmp_path: Path, stubs: dict[str, str]) -> dict[str, str]:
    """An environment with a bin/ of `stubs` (command -> bash body) first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for command, body in stubs.items():
        (bin_dir / command).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / command).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def run_collector(tmp_path, name, stubs, **env_extra):
    """The collector `name`'s output (it must succeed), with the stand-ins `stubs` and `env_extra` set."""
    env = stub_bin(tmp_path, stubs) | {k: str(v) for k, v in env_extra.items()}
    result = subprocess.run(["bash", str(node_shell.COLLECTORS / f"{name}.sh")], env=env, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout
