"""The Node.js the project runs on: one LTS release, pinned in package.json (the npm registry's
`node` package), named by .nvmrc and `engines`, installed by `make install` whatever Node the
system has, and the one that jsii and the CDK CLI run on here, without a banner (one that jsii
shows by today's date, deprecated or end-of-life, is silenced for the pin: no test depends on the day)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = json.loads((ROOT / "package.json").read_text())
LOCK = json.loads((ROOT / "package-lock.json").read_text())
MAJOR = (ROOT / ".nvmrc").read_text().strip()
NODE = ROOT / "node_modules" / ".bin" / "node"
# jsii's banner: "Node 20 is end-of-life and not supported anymore by this software since ...",
# or "... has not been tested with this release" for a release it does not know.
BANNERS = re.compile(r"end-of-life|not supported|not been tested|unsupported", re.I)


def installed():
    if not NODE.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/.bin/node is missing: run make install")
        pytest.skip("node_modules is not installed (make install)")


def test_one_lts_release_named_everywhere():
    pinned = PACKAGE["devDependencies"]["node"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "pin an exact release"
    assert MAJOR in ("22", "24") and pinned.split(".")[0] == MAJOR  # the LTS lines the CDK supports
    assert LOCK["packages"]["node_modules/node"]["version"] == pinned
    assert LOCK["packages"][""]["devDependencies"]["node"] == pinned
    engines = PACKAGE["engines"]["node"]
    assert MAJOR in re.findall(r"\^(\d+)", engines) and "20" not in engines
    assert LOCK["packages"][""]["engines"]["node"] == engines
    # npm runs the package's install script (it fetches the platform's binary package)
    assert PACKAGE["allowScripts"] == {"node": True}


def test_no_end_of_life_banner_is_silenced():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    here = {Path(__file__).name, "test_pipeline.py"}  # which assert the variable's absence
    for name in tracked.split():
        path = ROOT / name
        if path.name in here or not path.is_file() or path.suffix in (".json", ".png"):
            continue
        assert "JSII_SILENCE_WARNING" not in path.read_text(errors="replace"), name


def test_the_tests_run_on_the_pinned_node():
    installed()
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == f"v{PACKAGE['devDependencies']['node']}"
    found = shutil.which("node")  # tests/conftest.py, or make, put it first on PATH
    assert found and Path(found).resolve() == NODE.resolve()
    venv_node = Path(sys.executable).parent / "node"
    if venv_node.exists():  # make install links it, for an activated venv
        assert venv_node.resolve() == NODE.resolve()


def test_jsii_and_the_cdk_cli_run_without_a_banner(tmp_path):
    installed()
    code = ("import aws_cdk as cdk; app = cdk.App(outdir=__import__('sys').argv[1]); "
            "s = cdk.Stack(app, 'S'); cdk.CfnWaitConditionHandle(s, 'H'); app.synth(); print('ok')")
    # Whether a release is deprecated or end-of-life, jsii decides by today's date: silenced for the
    # pin, so that the test says the same any day. A release jsii has not tested still shows.
    dated = {f"JSII_SILENCE_WARNING_{kind}_NODE_VERSION": MAJOR for kind in ("DEPRECATED", "END_OF_LIFE")}
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                            env=dict(os.environ, CDK_VALIDATION="false", **dated))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    assert not BANNERS.search(result.stderr), result.stderr
    cli = subprocess.run([str(ROOT / "node_modules/.bin/cdk"), "--version"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith(PACKAGE["devDependencies"]["aws-cdk"])
    assert not BANNERS.search(cli.stderr), cli.stderr


# ---- what make install says about the system's Node ---------------------------------------------

def fake_tools(tmp_path: Path, system_node: str | None) -> Path:
    """A bin folder with an `npm` whose `ci` "installs" node_modules/.bin/node of package.json's
    release, and a system `node` of the given version (or none)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pinned = PACKAGE["devDependencies"]["node"]
    (bin_dir / "npm").write_text(
        "#!/bin/sh\nset -e\n[ \"$1\" = ci ]\nmkdir -p node_modules/.bin\n"
        f"printf '#!/bin/sh\\necho v{pinned}\\n' > node_modules/.bin/node\nchmod +x node_modules/.bin/node\n")
    if system_node:
        (bin_dir / "node").write_text(f"#!/bin/sh\necho {system_node}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def make_node_modules(tmp_path: Path, path: str) -> subprocess.CompletedProcess:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Makefile", "package.json", "package-lock.json", ".nvmrc"):
        shutil.copy2(ROOT / name, project / name)
    return subprocess.run([shutil.which("make") or "make", "--no-print-directory", "node_modules"], cwd=project,
                          env={"PATH": path, "HOME": str(tmp_path)}, capture_output=True, text=True)


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_make_install_tells_a_user_with_an_old_node_how_to_use_the_pinned_one(tmp_path):
    bin_dir = fake_tools(tmp_path, "v20.20.2")
    result = make_node_modules(tmp_path, f"{bin_dir}:/usr/bin:/bin")
    assert result.returncode == 0, result.stdout + result.stderr
    pinned = PACKAGE["devDependencies"]["node"]
    assert f"this system's Node.js is v20.20.2; the project runs on Node.js v{pinned}" in result.stdout
    assert "source .venv/bin/activate" in result.stdout
    assert f'export PATH="{tmp_path / "project"}/node_modules/.bin:$PATH"' in result.stdout
    assert "nvm use" in result.stdout


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_make_install_says_nothing_more_when_the_system_runs_the_same_major(tmp_path):
    bin_dir = fake_tools(tmp_path, f"v{MAJOR}.1.0")
    result = make_node_modules(tmp_path, f"{bin_dir}:/usr/bin:/bin")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "this system's Node.js" not in result.stdout


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_make_install_without_npm_says_what_to_install(tmp_path):
    result = make_node_modules(tmp_path, str(tmp_path / "nothing"))
    assert result.returncode != 0
    assert f"npm not found. Install Node.js {MAJOR} LTS with npm" in result.stderr
    assert "nvm install" in result.stderr


def test_the_boot_path_check_finds_fetches_and_builds():
    """tests/cdk/test_examples_synth.py's check of every example's boot path can fail: it finds each
    way of fetching or building software, and lets the metadata service and comments be."""
    from tests.support.node_scripts import fetches_or_builds

    bad = ["git clone -q --depth 1 https://github.com/NVIDIA/pyxis.git src", "  make -C \"$src\" install",
           "CPPFLAGS=-I/x make -C src", "apt_get install -y -q jq",
           "DEBIAN_FRONTEND=noninteractive apt-get -o X=1 install jq", "pip install torch",
           "curl -fsSL https://example.com/x.sh | bash", "wget https://example.com/x",
           "retry git_clone x; git submodule update --init", "gcc -o x x.c"]
    good = ["# make sure the array exists", "curl -s http://169.254.169.254/latest/meta-data/instance-id",
            "log \"the image lacks Enroot: bake it\"", "install -d -m 0755 /etc/enroot", "dpkg-query -W prometheus"]
    assert [fetches_or_builds(line) for line in bad] == [[line.strip()] for line in bad]
    assert fetches_or_builds("\n".join(good)) == []
