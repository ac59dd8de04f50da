"""Packaging: pyproject.toml declares what the code imports (the runtime alone in its dependencies,
the development tools in extras), requirements.txt locks all of it with hashes (the one place of
the versions), the venv is what the lock says, and the project builds without setuptools warnings,
its package data included. tests/project/test_wheel.py installs the wheel and runs it."""

from __future__ import annotations

import ast
import fnmatch
import importlib.metadata as metadata
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import ROOT, copy_checkout

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
EXTRAS = {name: [Requirement(r) for r in requirements]
          for name, requirements in PROJECT["optional-dependencies"].items()}
TEST = EXTRAS["test"]
# Every development tool: the extras' requirements but the project's own (`dev` names the others).
TOOLS = [r for requirements in EXTRAS.values() for r in requirements if canonicalize_name(r.name) != PROJECT["name"]]
BUILD = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
OWN = {"fmcluster", "fmcluster_cdk", "app", "tests", "bench"}
# Modules of the package that only the tests use, so that their imports are test dependencies.
TEST_ONLY: dict[str, str] = {}
# Lambda handlers run in AWS Lambda's Python runtime, which provides boto3; they are assets.
RUNTIME_CODE = [p for p in [ROOT / "app.py", *(ROOT / "fmcluster").rglob("*.py"),
                            *(ROOT / "fmcluster_cdk").rglob("*.py")]
                if "handlers" not in p.parts and p.relative_to(ROOT).as_posix() not in TEST_ONLY]


def imported(files) -> dict[str, str]:
    """Top-level module -> a file that imports it (absolute imports only), stdlib and own left out."""
    found: dict[str, str] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  in ("find_spec", "import_module") and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                names = [node.args[0].value]  # found at run time: importlib.util.find_spec("cfnlint")
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                sibling = (path.parent / f"{top}.py").exists() or (ROOT / "bench" / f"{top}.py").exists()  # bench/'s
                if top not in sys.stdlib_module_names and top not in OWN and top != "__future__" and not sibling:
                    found.setdefault(name if top == "aws_cdk" else top, str(path.relative_to(ROOT)))
    return found


def distribution_of(module: str) -> str:
    """The distribution that provides a module: aws_cdk.lambda_layer_kubectl_v35 is its own
    (aws-cdk.lambda-layer-kubectl-v35), the rest of aws_cdk is aws-cdk-lib's."""
    if module.startswith("aws_cdk."):
        sub = module.split(".")[1]
        owners = [d for d in metadata.packages_distributions()["aws_cdk"]
                  if any(str(f).startswith(f"aws_cdk/{sub}/") for f in metadata.files(d) or [])]
        assert owners, module
        return canonicalize_name(owners[0])
    names = metadata.packages_distributions().get(module)
    assert names, f"no installed distribution provides {module}"
    return canonicalize_name(names[0])


def names(requirements) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def test_every_runtime_import_is_declared():
    declared = names(RUNTIME)
    missing = {module: f"{distribution_of(module)} (imported by {where})"
               for module, where in imported(RUNTIME_CODE).items() if distribution_of(module) not in declared}
    assert not missing, missing
    # and the ones named in the issue, whatever the imports look like today
    assert {"aws-cdk-lib", "aws-cdk-lambda-layer-kubectl-v35", "cfn-lint", "cdk-nag", "boto3", "botocore",
            "pyyaml", "pydantic", "constructs"} <= declared


def test_test_only_modules_are_not_imported_at_run_time():
    for module in TEST_ONLY:
        dotted = module.removesuffix(".py").replace("/", ".")
        users = [str(p.relative_to(ROOT)) for p in RUNTIME_CODE
                 if dotted in imported_names(p) or dotted.rsplit(".", 1)[1] in imported_names(p)]
        assert not users, (module, users)


def imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {f"{node.module}.{a.name}" if node.module else a.name for a in node.names} | {node.module or ""}
            names |= {a.name for a in node.names} if node.module == "fmcluster" else set()
    return names


def test_every_test_import_is_declared():
    declared = names(RUNTIME) | names(TOOLS)
    # tests/support/scanners/ runs in the scanners' venv (.venv-scan: pyproject's `scan` group), not this one
    tests = [p for p in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
             if "scanners" not in p.relative_to(ROOT).parts]
    missing = {m: w for m, w in imported(tests).items() if distribution_of(m) not in declared
               and distribution_of(m) not in ("packaging",)}  # packaging: pytest's own dependency
    assert not missing, missing


def test_the_runtime_is_apart_from_the_development_tools():
    """A user's install (`pip install`, pipx, `uv tool install`) gets the runtime alone: no test,
    lint, type-check or docs tool is a dependency, each is in its extra, and `dev` is all of them,
    which `make install` installs (from the lock, which covers every extra)."""
    assert set(EXTRAS) == {"test", "lint", "typecheck", "docs", "dev"}
    assert not names(RUNTIME) & names(TOOLS)
    assert {"pytest", "moto", "ruff", "mypy", "mkdocs", "types-pyyaml", "boto3-stubs"} <= names(TOOLS)
    (dev,) = EXTRAS["dev"]
    assert canonicalize_name(dev.name) == PROJECT["name"] and dev.extras == set(EXTRAS) - {"dev"}
    makefile = (ROOT / "Makefile").read_text()
    assert "--no-deps --no-build-isolation -e '.[dev]'" in makefile
    assert "--all-extras" in makefile and "--require-hashes -r requirements.txt" in makefile


def test_moto_extras_exist_and_cover_the_services_moto_runs_here():
    (moto,) = [r for r in TEST if r.name == "moto"]
    provided = set(metadata.metadata("moto").get_all("Provides-Extra"))
    assert moto.extras <= provided, moto.extras - provided
    assert {"cloudformation", "ec2", "eks", "iam", "kms", "s3", "sagemaker", "servicequotas", "ssm",
            "sts"} <= moto.extras


# ---- the lock -----------------------------------------------------------------------------------

def locked() -> dict[str, list[tuple[str, str, list[str]]]]:
    """Name -> [(version, marker, hashes)] of requirements.txt (a name appears once per marker)."""
    entries: dict[str, list] = {}
    text = (ROOT / "requirements.txt").read_text()
    for block in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2] if text.startswith("#") else text):
        head = block.split("\\", 1)[0].strip()
        if not head or head.startswith("#"):
            continue
        requirement = Requirement(head)
        (spec,) = requirement.specifier
        assert spec.operator == "==", head
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
        entries.setdefault(canonicalize_name(requirement.name), []).append(
            (spec.version, str(requirement.marker or ""), hashes))
    return entries


def applies(marker: str) -> bool:
    return not marker or Requirement(f"x; {marker}").marker.evaluate(default_environment())


def test_the_lock_pins_everything_with_hashes():
    lock = locked()
    for name, entries in lock.items():
        for version, _, hashes in entries:
            assert hashes, f"{name}=={version} has no hash"
    for requirement in RUNTIME + TOOLS + BUILD + [Requirement("pip")]:
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{name} is not in requirements.txt: run make lock"
        for version, marker, _ in lock[name]:
            if applies(marker):
                assert requirement.specifier.contains(version, prereleases=True), (name, version)


def test_the_build_backend_is_pinned_and_locked():
    (setuptools,) = BUILD
    (spec,) = setuptools.specifier
    assert setuptools.name == "setuptools" and spec.operator == "=="
    assert [v for v, _, _ in locked()["setuptools"]] == [spec.version]
    assert int(spec.version.split(".")[0]) >= 77  # reads the SPDX `license` string
    assert PROJECT["license"] == "Apache-2.0"


def test_the_lock_has_one_source():
    """pyproject.toml is the lock's input (make lock); no second list of requirements."""
    assert not (ROOT / "requirements.in").exists()
    assert (ROOT / "requirements.txt").read_text().startswith(
        "# This file was autogenerated by uv via the following command:\n#    make lock\n")


def test_the_venv_is_what_the_lock_says():
    if not (Path(sys.prefix) / ".installed").exists():
        pytest.skip("not the venv that make install made")
    wrong = {}
    for name, entries in locked().items():
        for version, marker, _ in entries:
            if applies(marker):
                try:
                    have = metadata.version(name)
                except metadata.PackageNotFoundError:
                    have = None
                if have != version:
                    wrong[name] = (version, have)
    assert not wrong, f"locked vs installed: {wrong} (run make install)"


# ---- building -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A wheel and an editable wheel of a copy of the project (its tracked and new files), built
    as make install builds it: with the venv's setuptools, without build isolation or network."""
    tmp = tmp_path_factory.mktemp("build")
    source = copy_checkout(tmp / "src")
    # Every warning but setuptools' note on editable installs (InformationOnly) is an error.
    code = ("import sys, warnings; warnings.simplefilter('error'); import setuptools.build_meta as b; "
            "from setuptools.warnings import InformationOnly; warnings.simplefilter('ignore', InformationOnly); "
            "print(b.build_wheel(sys.argv[1])); print(b.build_editable(sys.argv[1]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # "byte-compiling is disabled"
    result = subprocess.run([sys.executable, "-c", code, str(tmp / "dist")], cwd=source, env=env,
                            capture_output=True, text=True)
    return source, tmp / "dist", result


def test_builds_without_warnings(built):
    _, _, result = built
    assert result.returncode == 0, result.stderr[-4000:]
    assert not re.search(r"[A-Za-z]+Warning\b|deprecat", result.stderr, re.I), result.stderr[-4000:]


def test_the_wheel_ships_the_package_data(built):
    source, dist, result = built
    assert result.returncode == 0, result.stderr[-4000:]
    (wheel,) = dist.glob("fmcluster-*-py3-none-any.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        folder = Path(*package.split("."))
        for pattern in patterns:
            expected |= {p.relative_to(source).as_posix() for p in (source / folder).glob(pattern) if p.is_file()}
    assert {"fmcluster/node/scripts/boot/common.sh", "fmcluster/data/prices.json",
            "fmcluster/node/scripts/hyperpod/hooks.sh", "fmcluster/node/scripts/image/bake.sh",
            "fmcluster/observability/scraper.yaml", "fmcluster/node/scripts/slurm/imex-prolog.sh"} <= expected
    assert any(fnmatch.fnmatch(p, "fmcluster/node/scripts/boot/collectors/*.sh") for p in expected)
    assert any(fnmatch.fnmatch(p, "fmcluster/node/scripts/boot/programs/*.sh") for p in expected)
    assert any(fnmatch.fnmatch(p, "fmcluster_cdk/constructs/*/handlers/*/index.py") for p in expected)
    assert expected <= shipped, sorted(expected - shipped)
    metadata_file = next(n for n in shipped if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata_file).decode()
    assert "License-Expression: Apache-2.0" in text
    assert {canonicalize_name(Requirement(line.split(":", 1)[1]).name)
            for line in text.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line} \
        == names(RUNTIME)
    # two packages of the project's own names: nothing top-level such as `stacks` or `tests`
    assert {n.split("/")[0] for n in shipped if not n.startswith("fmcluster-")} == {"fmcluster", "fmcluster_cdk"}


def test_the_editable_install_reads_its_data_from_the_tree():
    from importlib import resources

    package = resources.files("fmcluster")
    assert (package / "node" / "scripts" / "boot" / "common.sh").is_file()
    assert (package / "data" / "prices.json").is_file()
    assert Path(str(package)).resolve() == (ROOT / "fmcluster").resolve()
