"""Stand-ins for the upstream repositories the node scripts clone (github.com/NVIDIA/enroot with its
submodules, github.com/NVIDIA/pyxis), as local git repositories for the boot-path harness.

They are our own small code, never upstream's, shaped like upstream where the node script depends
on it:

- "pyxis": a Makefile built like Pyxis' (`prefix`/`libdir`/`datadir` as `?=`, the plugin in
  DESTDIR/libdir/slurm, and `CPPFLAGS := -D_GNU_SOURCE ... -DPYXIS_VERSION=... $(CPPFLAGS)`, so a
  CPPFLAGS on make's command line replaces its own), and a C source that needs each of them:
  CLONE_NEWUSER from <sched.h> (only with _GNU_SOURCE), PYXIS_VERSION, and <slurm/spank.h> (the
  real one, libslurm-dev's). Real make and gcc build it into spank_pyxis.so, a SPANK plugin with a
  `--container-image` option.
- "enroot": a Makefile with Enroot's variables (`prefix`, `sysconfdir` as `?=`, `override DESTDIR
  := $(abspath $(DESTDIR))`), the `install` and `setcap` targets, an `enroot` script whose
  `enroot version` prints VERSION, and three submodules at Enroot's paths (deps/linux-headers,
  deps/makeself, deps/musl) whose files the build needs, their URLs upstream's (.gitmodules).

`make_upstream(directory)` creates them, each tagged as the pins are (v{ENROOT_VERSION},
PYXIS_TAG), and returns their commits (`Upstream`). The node script's https:// and git:// URLs
reach them through git's own `url.<base>.insteadOf` (tests/support/sandbox.py writes the configuration).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fmcluster.node import runtime as node_runtime

# The submodules of the stand-in Enroot: path -> (URL as Enroot's .gitmodules has it, repository name)
ENROOT_SUBMODULE_URLS = {
    "deps/linux-headers": ("https://github.com/sabotage-linux/kernel-headers.git", "kernel-headers"),
    "deps/makeself": ("https://github.com/megastep/makeself.git", "makeself"),
    "deps/musl": ("git://git.musl-libc.org/musl", "musl"),
}
# Where each upstream URL is in the sandbox's upstream directory (git's insteadOf maps them).
URL_PATHS = {node_runtime.ENROOT_REPOSITORY: "enroot.git", node_runtime.PYXIS_REPOSITORY: "pyxis.git",
             **{url: f"{name}.git" for url, name in ENROOT_SUBMODULE_URLS.values()}}

GIT_ENV = {"GIT_AUTHOR_NAME": "fmcluster tests", "GIT_AUTHOR_EMAIL": "tests@fmcluster.invalid",
           "GIT_COMMITTER_NAME": "fmcluster tests", "GIT_COMMITTER_EMAIL": "tests@fmcluster.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

PYXIS_MAKEFILE = r"""# Stand-in for Pyxis' Makefile (fmcluster tests): its variables and CPPFLAGS line.
prefix      ?= /usr/local
libdir      ?= $(prefix)/lib
datarootdir ?= $(prefix)/share
datadir     ?= $(datarootdir)

PLUGINDIR := $(abspath $(DESTDIR)/$(libdir)/slurm)
CONFDIR   := $(abspath $(DESTDIR)/$(datadir)/pyxis)

PYXIS_VER ?= @VERSION@
PLUGIN := spank_pyxis.so

CPPFLAGS := -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 -DPYXIS_VERSION=\"$(PYXIS_VER)\" $(CPPFLAGS)
CFLAGS := -std=gnu11 -O2 -Wall -fpic $(CFLAGS)

.PHONY: all install
all: $(PLUGIN)

standin.o: standin.c
	$(CC) $(CFLAGS) $(CPPFLAGS) -c $<

$(PLUGIN): standin.o
	$(CC) -shared -o $@ $^

install: all
	install -d -m 755 $(PLUGINDIR)
	install -m 644 $(PLUGIN) $(PLUGINDIR)
	install -d -m 755 $(CONFDIR)
	echo 'required $(libdir)/slurm/$(PLUGIN)' >$(CONFDIR)/pyxis.conf
"""

PYXIS_SOURCE = r"""/* Stand-in for Pyxis (fmcluster tests): a SPANK plugin that needs _GNU_SOURCE (CLONE_NEWUSER),
 * PYXIS_VERSION and Slurm's spank.h, as Pyxis does. */
#include <sched.h>
#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1)

const char pyxis_standin_version[] = PYXIS_VERSION;
const int pyxis_standin_namespaces = CLONE_NEWUSER | CLONE_NEWNS;

struct spank_option spank_options[] = {
    {"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[stand-in] the image to run the step in", 1, 0, NULL},
    SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    return pyxis_standin_namespaces ? 0 : -1;
}
"""

ENROOT_MAKEFILE = r"""# Stand-in for Enroot's Makefile (fmcluster tests): its variables, install and setcap.
prefix      ?= /usr/local
exec_prefix ?= $(prefix)
bindir      ?= $(exec_prefix)/bin
sysconfdir  ?= $(prefix)/etc
datarootdir ?= $(prefix)/share
datadir     ?= $(datarootdir)

override DESTDIR := $(abspath $(DESTDIR))

BINDIR     = $(DESTDIR)$(bindir)
SYSCONFDIR = $(DESTDIR)$(sysconfdir)/enroot
DATADIR    = $(DESTDIR)$(datadir)/enroot

VERSION := @VERSION@
UTILS := bin/enroot-mksquashovlfs bin/enroot-aufs2ovlfs
DEPS := deps/linux-headers/HEADERS deps/makeself/makeself.sh deps/musl/VERSION

.PHONY: all install setcap
all: enroot enroot.conf $(UTILS)

enroot enroot.conf: %: %.in
	sed -e 's;@sysconfdir@;$(SYSCONFDIR);' -e 's;@version@;$(VERSION);' $< >$@

$(UTILS): $(DEPS)
	mkdir -p bin
	printf '#!/bin/sh\n# built with musl %s\n' "$$(cat deps/musl/VERSION)" >$@

install: all
	install -d -m 755 $(BINDIR) $(SYSCONFDIR)/hooks.d $(DATADIR)/hooks.d
	install -m 755 enroot $(UTILS) $(BINDIR)
	install -m 644 enroot.conf $(SYSCONFDIR)
	install -m 755 hooks/98-nvidia.sh $(SYSCONFDIR)/hooks.d
	install -m 755 hooks/50-slurm-pmi.sh hooks/50-slurm-pytorch.sh $(DATADIR)/hooks.d
	install -m 644 apparmor.profile $(DATADIR)

setcap:
	setcap cap_sys_admin+pe $(BINDIR)/enroot-mksquashovlfs
	setcap cap_sys_admin,cap_mknod+pe $(BINDIR)/enroot-aufs2ovlfs
"""

ENROOT_SCRIPT = """#!/bin/bash
# Stand-in for Enroot (fmcluster tests): `enroot version`.
config=@sysconfdir@/enroot.conf
case "${1-}" in
  version) echo "@version@" ;;
  *) echo "enroot (stand-in): $config" ;;
esac
"""


@dataclass(frozen=True)
class Upstream:
    """The stand-in repositories in `directory`: the commits their tags check out."""

    directory: Path
    enroot_commit: str
    enroot_submodules: dict[str, str]  # path -> commit, in path order
    pyxis_commit: str
    other_submodule_commits: dict[str, str]  # path -> a second commit of each submodule's repository

    def pins(self) -> dict[str, object]:
        """fmcluster.node.runtime's pin settings, naming the stand-ins' commits."""
        return {"ENROOT_COMMIT": self.enroot_commit, "ENROOT_SUBMODULES": dict(self.enroot_submodules),
                "PYXIS_COMMIT": self.pyxis_commit}


def git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), *args], env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout.strip()


def _repository(directory: Path, files: dict[str, str], *, executable: tuple[str, ...] = ()) -> str:
    directory.mkdir(parents=True)
    git(directory, "init", "-q", "-b", "main")
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name in executable:
            path.chmod(0o755)
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "stand-in")
    return git(directory, "rev-parse", "HEAD")


def _commit(directory: Path, name: str, text: str, message: str) -> str:
    (directory / name).write_text(text)
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", message)
    return git(directory, "rev-parse", "HEAD")


def make_upstream(directory: Path) -> Upstream:
    """The stand-in repositories (working repositories: a clone reads them as it would a server's)."""
    submodules, others = {}, {}
    for path, (_url, name) in ENROOT_SUBMODULE_URLS.items():
        repo = directory / f"{name}.git"
        first = {"deps/linux-headers": "HEADERS", "deps/makeself": "makeself.sh", "deps/musl": "VERSION"}[path]
        submodules[path] = _repository(repo, {first: f"{name} stand-in 1\n"})
        others[path] = _commit(repo, first, f"{name} stand-in 2\n", "a later commit")
        git(repo, "checkout", "-q", "--detach", submodules[path])  # a non-bare repository: leave main free
    enroot = directory / "enroot.git"
    gitmodules = "".join(f'[submodule "{path}"]\n\tpath = {path}\n\turl = {url}\n'
                         for path, (url, _name) in ENROOT_SUBMODULE_URLS.items())
    _repository(enroot, {
        "Makefile": ENROOT_MAKEFILE.replace("@VERSION@", node_runtime.ENROOT_VERSION), "enroot.in": ENROOT_SCRIPT,
        "enroot.conf.in": "#ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n",
        "hooks/98-nvidia.sh": "#!/bin/bash\n", "hooks/50-slurm-pmi.sh": "#!/bin/bash\n",
        "hooks/50-slurm-pytorch.sh": "#!/bin/bash\n", "apparmor.profile": "abi <abi/4.0>,\n",
        ".gitmodules": gitmodules})
    enroot_commit = set_gitlinks(enroot, submodules, "the pinned submodules")
    git(enroot, "tag", f"v{node_runtime.ENROOT_VERSION}")
    pyxis = directory / "pyxis.git"
    pyxis_commit = _repository(pyxis, {"Makefile": PYXIS_MAKEFILE.replace("@VERSION@", node_runtime.PYXIS_TAG[1:]),
                                       "standin.c": PYXIS_SOURCE})
    git(pyxis, "tag", node_runtime.PYXIS_TAG)
    for repo in (enroot, pyxis):
        git(repo, "checkout", "-q", "--detach")
    return Upstream(directory, enroot_commit, submodules, pyxis_commit, others)


def set_gitlinks(repo: Path, gitlinks: dict[str, str], message: str, urls: dict[str, str] | None = None) -> str:
    """A commit of `repo` whose submodules are exactly `gitlinks` (path -> commit; .gitmodules
    keeps an entry for each path it had, and gets one for each of `urls`, path -> URL); its id."""
    for path, url in (urls or {}).items():
        with (repo / ".gitmodules").open("a") as gitmodules:
            gitmodules.write(f'[submodule "{path}"]\n\tpath = {path}\n\turl = {url}\n')
        git(repo, "add", ".gitmodules")
    current = [line.split("\t")[1] for line in git(repo, "ls-files", "-s").splitlines() if line.startswith("160000")]
    for path in current:
        if path not in gitlinks:
            git(repo, "rm", "-q", "--cached", path)
    for path, commit in gitlinks.items():
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def move_tag(repo: Path, tag: str, commit: str) -> None:
    git(repo, "tag", "-f", tag, commit)


_PRISTINE: dict[str, Upstream] = {}


def pristine() -> Upstream:
    """The stand-ins as made (once per test session, in a temporary directory)."""
    if "upstream" not in _PRISTINE:
        import atexit
        import tempfile

        top = Path(tempfile.mkdtemp(prefix="fmcluster-upstream-"))
        atexit.register(shutil.rmtree, top, True)
        _PRISTINE["upstream"] = make_upstream(top / "upstream")
    return _PRISTINE["upstream"]


def upstream_copy(directory: Path) -> Upstream:
    """A fresh copy of the stand-ins in `directory`, for one sandbox to change."""
    made = pristine()
    shutil.copytree(made.directory, directory, symlinks=True)
    return Upstream(directory, made.enroot_commit, dict(made.enroot_submodules), made.pyxis_commit,
                    dict(made.other_submodule_commits))


def gitconfig(upstream: Path) -> str:
    """A git configuration that maps every upstream URL to its stand-in (git's insteadOf), and lets
    submodules be cloned from local paths (git refuses the file transport for them by default)."""
    lines = ["[protocol \"file\"]", "\tallow = always", "[advice]", "\tdetachedHead = false"]
    for url, name in URL_PATHS.items():
        lines += [f'[url "file://{upstream / name}"]', f"\tinsteadOf = {url}"]
    return "\n".join(lines) + "\n"


def with_pins(script: str, upstream: Upstream) -> str:
    """A rendered node script whose pin settings name the stand-ins' commits (a compact one's in
    its packed body, packed again)."""
    import re

    from fmcluster.node.shell import pack, quote, unpack

    if re.search(r"^FMCLUSTER_BOOTSTRAP=", script, re.MULTILINE):
        packed = quote(pack(with_pins(unpack(script), upstream)))
        return re.sub(r"^FMCLUSTER_BOOTSTRAP=\S+$", lambda _: f"FMCLUSTER_BOOTSTRAP={packed}", script,
                      flags=re.MULTILINE)

    values = {"ENROOT_COMMIT": upstream.enroot_commit, "PYXIS_COMMIT": upstream.pyxis_commit,
              "ENROOT_SUBMODULES": " ".join(upstream.enroot_submodules.values())}
    lines = script.split("\n")
    for i, line in enumerate(lines):
        name = line.split("=", 1)[0]
        if name in values and "=" in line:
            lines[i] = f"{name}={quote(values[name])}"
    return "\n".join(lines)
