"""The shell a node script is assembled from (fmcluster/node/scripts/: fragments, programs,
collectors, as package data): the settings block, the fragments, whole programs embedded as
functions, and a `main` that runs the steps one after the other (`compose`); the compact form of
user data (the body xz and base85, `pack` and `unpack`) and the MIME multipart that carries it.
fmcluster.node.program builds a node's program from these pieces; fmcluster.node.pcs,
fmcluster.node.hyperpod and fmcluster.node.eks render it per control plane.

Sources and details: docs/research-notes.md, "The node kit (fmcluster/node/)"."""

from __future__ import annotations

import base64
import functools
import lzma
import re
import shlex
from pathlib import Path
from typing import Mapping, Sequence

from fmcluster.facts.node import FMCLUSTER_LIB

SCRIPTS = Path(__file__).parent / "scripts" / "boot"
SLURM_SCRIPTS = Path(__file__).parent / "scripts" / "slurm"
IMAGE_SCRIPTS = Path(__file__).parent / "scripts" / "image"  # the node image's (fmcluster.node.image)
PROGRAMS = SCRIPTS / "programs"
COLLECTORS = SCRIPTS / "collectors"
FMCLUSTER_ETC = "/etc/fmcluster"  # the settings files the node scripts write
BOUNDARY = "==FMCLUSTER-BOUNDARY=="
EMBED_END = "FMCLUSTER_PROGRAM_END"


def embed(name: str, path: Path, text: str | None = None, *, note: bool = True) -> str:
    """A whole script the node keeps and runs on its own (a collector, a program) as a fragment:
    the shell function `program_NAME`, which prints the script (without its comment lines, but
    with its `#!` line: they are documented in the repository). The fragments write it to a file
    with `program_NAME >FILE`. `text`: the script as rendered (default: the file as it is). `note`:
    a comment line before it names the file it came from."""
    text = without_comments(path.read_text(encoding="utf-8") if text is None else text)
    if EMBED_END in text.splitlines():
        raise ValueError(f"{path.name} has a line {EMBED_END}, which ends its here-document")
    origin = path.relative_to(SCRIPTS.parents[1]).as_posix()
    # (the comment names the module embed had: new text here would change every node script)
    source = f"# {origin}, embedded by fmcluster.node.bootstrap.embed.\n" if note else ""
    return source + f"program_{name}() {{\n  cat <<'{EMBED_END}'\n{text.rstrip()}\n{EMBED_END}\n}}\n"


@functools.lru_cache(maxsize=256)
def without_comments(text: str) -> str:
    """`text` without its whole-line comments (a first `#!` line and `# shellcheck` directives
    stay): the scripts are documented in the repository, and EC2 user data is limited to 16 KiB.
    No fragment has a here-document line that starts with `#`."""
    lines = text.splitlines(keepends=True)
    keep = lines[:1] if lines and lines[0].startswith("#!") else []
    return "".join(keep + [line for line in lines[len(keep):]
                           if not line.lstrip().startswith("#") or line.lstrip().startswith("# shellcheck ")])


@functools.lru_cache(maxsize=256)
def fragment(path: Path) -> str:
    """A script fragment, without its `# shellcheck shell=bash` line (only for editors on the file).
    Read once a process (the fragments are package data): a synthesis composes a script from the
    same fragments for each node group and lifecycle phase, and `fmcluster diff` and the tests
    synthesize again and again."""
    text = path.read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# shellcheck shell="))


def read(part: str | Path) -> str:
    """A fragment: a file name in SCRIPTS, or a path (fmcluster.node.hyperpod's own fragments)."""
    return fragment(part if isinstance(part, Path) else SCRIPTS / part)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def quote(value: str) -> str:
    """shlex.quote, and quotes on a bare word too: `NAME=eval` reads like a command (SC2209)."""
    quoted = shlex.quote(value)
    return f"'{value}'" if quoted == value and _WORD.fullmatch(value) else quoted


def settings_block(values: Mapping[str, str | int]) -> str:
    lines = ["", "# Settings of this node group."]
    lines += [f"{name}={quote(str(value))}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


def header(comment: str | None = None) -> str:
    """The bootstrap header (strict mode, ROOT, log, add_fstab, step, finish), under `comment`
    instead of its own (the AWS PCS one) when given."""
    text = read("header.sh")
    if comment is None:
        return text
    lines = text.splitlines(keepends=True)[1:]
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "#!/bin/bash\n" + comment + "".join(lines)


BODY_FILE = f"{FMCLUSTER_LIB}/bootstrap.sh"  # where a compact script keeps its decoded body
# A compact script's body is xz-compressed and base85-encoded (a quarter larger than its bytes,
# against base64's third): EC2 user data is limited to 16 KiB. python3 decodes it: cloud-init,
# which runs user data, is a Python 3 program, so every node that runs the script has python3 and
# its standard library (base64, lzma). The alphabet of base85 (Python's b85encode, RFC 1924) has no
# quote or backslash, so the value stands in single quotes.
BODY_DECODER = "import base64,lzma,sys;sys.stdout.buffer.write(lzma.decompress(base64.b85decode(sys.stdin.read())))"
# (Its comment names the module `pack` had: new text here would change every EKS node's user data.)
BODY_LOADER = f"""
# The program, xz and base85 (fmcluster.node.bootstrap.pack), kept in {BODY_FILE}.
install -d -m 0755 "$ROOT{FMCLUSTER_LIB}"
printf '%s' "$FMCLUSTER_BOOTSTRAP" | /usr/bin/python3 -c '{BODY_DECODER}' >"$ROOT{BODY_FILE}"
# shellcheck source=/dev/null
source "$ROOT{BODY_FILE}"
"""


@functools.lru_cache(maxsize=128)
def pack(body: str) -> str:
    """`body` as a compact script carries it: xz (no mtime or name in the stream, so the same body
    gives the same bytes), then base85. Kept per body: xz at its strongest takes tens of
    milliseconds, and a process that synthesizes several specs (diff, the tests) packs the same
    body again and again."""
    return base64.b85encode(lzma.compress(body.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME)).decode("ascii")


def compose(header: str, settings: Mapping[str, str | int], parts: Sequence[str | Path], steps: Sequence[str],
            extra: Sequence[str] = (), *, compact: bool = False, comments: bool = True) -> str:
    """A script: `header`, the settings block, and the body: the fragments `parts` (file names in
    SCRIPTS) and `extra` (fragment texts), and a `main` that runs each of `steps` with `step` (a
    failure is recorded and the next step runs), then `finish` (exit 1 when a step failed).

    `compact` (the PCS and EKS user data, limited to 16 KiB): the header and the body without their
    comment lines, the body packed (`pack`: xz, base85) in the setting FMCLUSTER_BOOTSTRAP, which
    the script decodes to BODY_FILE and sources; the settings go into the body too (first), except
    INSTANCE_TYPE and those whose value holds a CDK token (`plain_setting`: CDK resolves tokens in
    the template's text, never inside the packed body). Otherwise (the SageMaker HyperPod lifecycle scripts,
    fmcluster.node.hyperpod; tests) the body verbatim, or without `comments` (the AWS PCS node
    lifecycle scripts, fmcluster.node.pcs: the header and the fragments without their comment
    lines; `extra` as given). All run the same code."""
    main = main_lines(steps)
    if not compact:
        if not comments:
            return "\n".join([without_comments(header) + settings_block(settings),
                              *(without_comments(read(part)) for part in parts), *extra, *main])
        return "\n".join([header + settings_block(settings), *map(read, parts), *extra, *main])
    plain = {name: value for name, value in settings.items() if plain_setting(name, value)}
    inner = {name: value for name, value in settings.items() if name not in plain}
    body = "\n".join([settings_block(inner).lstrip("\n").split("\n", 1)[1],
                      *(without_comments(read(name)) for name in parts), *extra, *main])
    return without_comments(header) + settings_block({**plain, "FMCLUSTER_BOOTSTRAP": pack(body)}) + BODY_LOADER


def main_lines(steps: Sequence[str]) -> list[str]:
    """The lines that end a composed script, its last one empty: a `main` that runs each of `steps`
    with `step`, then `finish`, and the call of it."""
    return ["main() {", *(f"  step {step}" for step in steps), "  finish", "}", "", 'main "$@"', ""]


TOKEN_MARK = re.compile(r"[$#]\{Token\[")  # how CDK writes a string or list token into a string


def plain_setting(name: str, value: str | int) -> bool:
    """Whether a compact script keeps the setting in its plain settings block: the instance type
    (for whoever reads the user data), and any value with a CDK token in it."""
    return name == "INSTANCE_TYPE" or bool(TOKEN_MARK.search(str(value)))


def unpack(script: str) -> str:
    """The body of a `compact` script (for reading and tests): what the node writes to BODY_FILE."""
    packed = re.search(r"^FMCLUSTER_BOOTSTRAP='?([^'\s]+)'?$", script, re.MULTILINE)
    if packed is None:
        raise ValueError("not a compact fmcluster node script: no FMCLUSTER_BOOTSTRAP")
    return lzma.decompress(base64.b85decode(packed.group(1))).decode("utf-8")


def mime_multipart(parts: Sequence[tuple[str, str, str]], boundary: str = BOUNDARY) -> str:
    """A multipart/mixed document of (content type, file name, body) parts, ASCII, 7bit.

    The boundary is fixed, so the same parts always give the same bytes (stable templates).
    """
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for content_type, filename, body in parts:
        if boundary in body:
            raise ValueError(f"part {filename} contains the MIME boundary {boundary}")
        if not body.isascii():
            raise ValueError(f"part {filename} is not ASCII")
        lines += [f"--{boundary}", f'Content-Type: {content_type}; charset="us-ascii"',
                  "Content-Transfer-Encoding: 7bit", f'Content-Disposition: attachment; filename="{filename}"',
                  "", body.rstrip("\n")]
    lines += [f"--{boundary}--", ""]
    return "\n".join(lines)
