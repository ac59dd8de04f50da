"""How long `make test` takes on a fresh clone, the first install included, and the fast lane.

    python bench/make_test.py

Clones the repository's HEAD into a temporary directory and times `make install` (a new
.venv from requirements.txt and node_modules from package-lock.json; pip's and npm's download
caches are used when the machine has them), then `make test`, then `make test-fast` (what a
developer runs between commits, on the clone `make test` has just run in). One run: it takes
minutes. Targets (issue 36): `make test` at most 8 minutes, `make install` and `make test`
together at most 10, the fast lane about a minute (at most 75 s). Writes
bench/results/make_test.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from common import exit_code, report, target  # noqa: E402

LIMIT_S = 600  # make install + make test
TEST_LIMIT_S = 480  # make test alone
FAST_LIMIT_S = 75  # make test-fast


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {done.returncode}")
    return time.perf_counter() - start


def measure() -> dict:
    # A clean environment: not this venv's PATH, so the clone makes and uses its own.
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp, "fmcluster")
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                                text=True, check=True).stdout.strip()
        install = timed(["make", "install"], clone, env)
        test = timed(["make", "test"], clone, env)
        fast = timed(["make", "test-fast"], clone, env)
    return {"commit": commit, "cpus": os.cpu_count(), "make_install_s": round(install, 1),
            "make_test_s": round(test, 1), "total_s": round(install + test, 1), "make_test_fast_s": round(fast, 1),
            "targets": [target(test, TEST_LIMIT_S, "make test on a fresh clone (seconds)"),
                        target(install + test, LIMIT_S, "make install + make test on a fresh clone (seconds)"),
                        target(fast, FAST_LIMIT_S, "make test-fast after it (seconds)")]}


def main() -> int:
    figures = measure()
    report(figures, "make_test")
    return exit_code(figures["targets"])


if __name__ == "__main__":
    raise SystemExit(main())
