"""The parser of the lines the acceptance kit's smoke test prints (fmcluster.kits.common.SMOKE_PY:
`fmcluster-smoke step=... loss=...`, then `fmcluster-smoke ok` or `failed`; a run stopped by a
signal `fmcluster-smoke checkpoint step=N seconds=S bytes=B path=P`, and the run that goes on from
it `fmcluster-smoke resumed step=N seconds=S bytes=B path=P` first), and its own verdict. Pure: the
text in, frozen SmokeResults out."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, replace
from typing import Optional

from fmcluster.kits.verify.judging import Verdict
from fmcluster.kits.verify.reading import Refusal, lines_of, number, whole, worst_run

_SMOKE = re.compile(r"fmcluster-smoke\s+(.*)$")
MAX_PATH = 4096  # Linux's PATH_MAX: a longer path= is no path smoke.py printed
STOPPED = "stopped"  # the outcome of a run that ended with its checkpoint saved


@dataclass(frozen=True)
class SmokeStep:
    step: int
    loss: float
    tokens_per_s: Optional[float]
    host: Optional[str]
    rank: Optional[int]


@dataclass(frozen=True)
class SmokeCheckpoint:
    """A checkpoint of the run: saved at `step`, its write taking `seconds` for `bytes` (rank 0's
    clock, from the step's end to the checkpoint whole), at `path` on the shared file system."""

    step: int
    seconds: float
    bytes: int
    path: str
    line: int  # of the line that tells it, in the text parsed
    resumed: bool = False  # a run of the text went on from it
    saved_here: bool = True  # False: only the run that resumed from it tells it (its own run's output is not here)

    @property
    def bytes_per_s(self) -> Optional[float]:
        return self.bytes / self.seconds if self.seconds > 0 else None


@dataclass(frozen=True)
class SmokeResult:
    steps: tuple[SmokeStep, ...]
    outcome: Optional[str]  # "ok", "failed", STOPPED (its checkpoint saved, nothing resumed), None (no last line)
    reason: Optional[str]  # of a failure
    world_size: Optional[int]
    steps_declared: Optional[int]  # the final line's steps=
    complete: bool  # the final line is there
    errors: tuple[str, ...]
    refused: tuple[Refusal, ...] = ()  # smoke lines it does not understand: the run is not judged
    first_line: int = 1  # of the run, in the text parsed
    runs: int = 1  # the runs of the text (parse_smoke of several: the worst of them)
    checkpoints: tuple[SmokeCheckpoint, ...] = ()  # saved by its runs, or read by its first one
    resumed_from: int = 0  # the step its first run went on from (0: it started afresh)
    broken: tuple[str, ...] = ()  # where its runs do not go on from each other's checkpoints

    @property
    def losses(self) -> tuple[float, ...]:
        return tuple(s.loss for s in self.steps)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.host for s in self.steps if s.host))

    @property
    def tokens_per_s(self) -> Optional[float]:
        """The median rate (the first steps warm up)."""
        rates = [s.tokens_per_s for s in self.steps if s.tokens_per_s is not None and math.isfinite(s.tokens_per_s)]
        return statistics.median(rates) if rates else None

    @property
    def verdict(self) -> Verdict:
        """PASS: the final `ok` line, a step line for each of the steps it declares (1 to N, or
        from the step its first run resumed from), each run stopped by a signal gone on from its
        checkpoint, every loss finite and the last no higher than the first; FAIL otherwise (a
        missing final line is a truncated run, or one stopped that nothing resumed, a missing
        step line a lost one)."""
        if self.refused or self.broken or self.outcome != "ok" or not self.steps:
            return Verdict.FAIL
        if not all(math.isfinite(loss) for loss in self.losses):
            return Verdict.FAIL
        if self.losses[-1] > self.losses[0]:
            return Verdict.FAIL
        if [s.step for s in self.steps] != list(range(self.resumed_from + 1, (self.steps_declared or 0) + 1)):
            return Verdict.FAIL  # a step line missing: the output lost lines, or the run stopped early
        return Verdict.PASS


_STEP_KEYS = {"step", "loss", "tokens_per_s", "host", "rank"}
_CHECKPOINT_KEYS = {"step", "seconds", "bytes", "path"}
# seconds= as smoke.py prints it ({:.3f}): 0, or at least a millisecond, so bytes / seconds is finite
# (bytes= has at most 19 digits); 1e-320 would make the throughput infinite, which strict JSON refuses
_SECONDS = re.compile(r"\d+\.\d{3}")


def _fields(rest: str) -> tuple[list[str], dict[str, str], list[str]]:
    """The bare words, the key=value fields and the keys given twice of a line's rest."""
    words: list[str] = []
    fields: dict[str, str] = {}
    twice: list[str] = []
    for token in rest.split():
        key, sep, value = token.partition("=")
        if sep:
            if key in fields:
                twice.append(key)
            fields[key] = value
        else:
            words.append(token)
    return words, fields, twice


def _checkpoint(at: int, fields: dict[str, str]) -> Optional[SmokeCheckpoint]:
    """A checkpoint or resumed line's figures, as smoke.py prints them; None for any other."""
    step, seconds, size, path = whole(fields.get("step", "")), number(fields.get("seconds", "")), \
        whole(fields.get("bytes", "")), fields.get("path", "")
    if (set(fields) != _CHECKPOINT_KEYS or step is None or step < 1 or seconds is None or not math.isfinite(seconds)
            or not _SECONDS.fullmatch(fields["seconds"]) or size is None or size < 0 or not path
            or len(path) > MAX_PATH):
        return None
    return SmokeCheckpoint(step, seconds, size, path, at)


class _Run:
    def __init__(self, first_line: int) -> None:
        self.first_line = first_line
        self.steps: list[SmokeStep] = []
        self.errors: list[str] = []
        self.refused: list[Refusal] = []
        self.outcome: Optional[str] = None
        self.reason: Optional[str] = None
        self.world: Optional[int] = None
        self.declared: Optional[int] = None
        self.resumed: Optional[SmokeCheckpoint] = None  # the checkpoint its resumed line says it read
        self.resumes = False  # it starts with a resumed line (one not understood too)
        self.saved: Optional[SmokeCheckpoint] = None  # the checkpoint it saved

    @property
    def started(self) -> bool:
        return bool(self.steps) or self.resumes

    def step(self, at: int, words: list[str], fields: dict[str, str], line: str) -> None:
        step, loss = whole(fields["step"]), number(fields.get("loss", ""))
        rate = number(fields["tokens_per_s"]) if "tokens_per_s" in fields else None
        rank = whole(fields["rank"]) if "rank" in fields else None
        if (words or not set(fields) <= _STEP_KEYS or step is None or step < 1 or loss is None
                or ("tokens_per_s" in fields and (rate is None or rate < 0))
                or ("rank" in fields and (rank is None or rank < 0))
                or ("host" in fields and not fields["host"])):
            self.refused.append(Refusal(at, f"a smoke step line the kit does not print: {line.strip()[:200]!r}"))
            return
        if self.steps and step <= self.steps[-1].step:
            self.refused.append(Refusal(at, f"step {step} after step {self.steps[-1].step}: the smoke test counts up"))
            return
        self.steps.append(SmokeStep(step, loss, rate, fields.get("host"), rank))
        if not math.isfinite(loss):
            self.errors.append(f"loss not finite at step {step}: {fields.get('loss')}")

    def checkpoint(self, at: int, words: list[str], fields: dict[str, str], line: str) -> None:
        found = _checkpoint(at, fields) if len(words) == 1 else None
        if words[0] == "resumed":
            self.resumes, self.resumed = True, found
        elif found is None:  # still where the run stopped: the run after it goes on from it, refused with it
            self.outcome = STOPPED
        if found is None:
            self.refused.append(Refusal(at, f"a smoke {words[0]} line the kit does not print: {line.strip()[:200]!r}"))
            return
        if words[0] == "resumed":
            return
        last = self.steps[-1].step if self.steps else self.resumed.step if self.resumed else None
        if found.step != last:
            after = f"after step {last}" if last is not None else "before any step"
            self.errors.append(f"a checkpoint of step {found.step} {after}: smoke.py saves the step it finished")
        if found.bytes == 0:
            self.errors.append("a checkpoint of no bytes")
        self.saved, self.outcome = found, STOPPED

    def final(self, at: int, words: list[str], fields: dict[str, str], line: str) -> None:
        self.outcome = words[0]
        if self.outcome == "ok":
            world, declared = whole(fields.get("world_size", "")), whole(fields.get("steps", ""))
            if (len(words) > 1 or set(fields) != {"world_size", "steps"} or world is None or declared is None
                    or world < 1 or declared < 1):
                self.refused.append(Refusal(at, f"a smoke ok line the kit does not print: {line.strip()[:200]!r}"))
                return
            self.world, self.declared = world, declared
        else:
            self.reason = (fields.get("reason") or " ".join(words[1:]) or "unknown")[:200]
            self.errors.append(f"smoke test failed: {self.reason}")


def _resumes(before: _Run, after: _Run) -> bool:
    """Whether `after` goes on from `before`: `before` stopped with its checkpoint saved, and
    `after` starts with a resumed line."""
    return before.outcome == STOPPED and after.resumes


def _broken(saved: SmokeCheckpoint, read: SmokeCheckpoint) -> Optional[str]:
    """Why a run's resumed line is not of the checkpoint the run before it saved, if it is not."""
    if read.step != saved.step:
        return f"the run from line {read.line} resumed from step {read.step}, the checkpoint before it is of step " \
               f"{saved.step}"
    if (read.path, read.seconds, read.bytes) != (saved.path, saved.seconds, saved.bytes):
        return f"the run from line {read.line} resumed from another checkpoint than the one saved at line {saved.line}"
    return None


def _chained(runs: list[_Run]) -> SmokeResult:
    """One result of runs that each go on from the checkpoint the one before saved."""
    first, last = runs[0], runs[-1]
    steps = [s for run in runs for s in run.steps]
    refused = [r for run in runs for r in run.refused]
    errors = [r.text() for r in refused] + [e for run in runs for e in run.errors]
    broken = [why for before, after in zip(runs, runs[1:], strict=False)
              if before.saved and after.resumed and (why := _broken(before.saved, after.resumed))]
    checkpoints = ([] if first.resumed is None else [replace(first.resumed, resumed=True, saved_here=False)])
    checkpoints += [replace(run.saved, resumed=run is not last) for run in runs if run.saved is not None]
    start = first.resumed.step if first.resumed is not None else 0
    if last.outcome is None:
        errors.append("truncated: no final fmcluster-smoke ok/failed line")
    elif last.outcome == STOPPED:
        errors.append(f"stopped at step {last.saved.step if last.saved else '?'} with its checkpoint saved: no run "
                      "resumed from it (the job's next run has not run)")
    if not steps:
        errors.append("no fmcluster-smoke step lines")
    elif last.outcome == "ok" and math.isfinite(steps[0].loss) and math.isfinite(steps[-1].loss) \
            and steps[-1].loss > steps[0].loss:
        errors.append(f"loss rose: {steps[0].loss:g} at step {steps[0].step}, {steps[-1].loss:g} at step "
                      f"{steps[-1].step}")
    if last.outcome == "ok" and steps and last.declared is not None and \
            [s.step for s in steps] != list(range(start + 1, last.declared + 1)):
        errors.append(f"{len(steps)} step lines of the {last.declared - start} steps it ran: lines are missing")
    errors += broken
    return SmokeResult(tuple(steps), last.outcome, last.reason, last.world, last.declared,
                       last.outcome is not None and last.outcome != STOPPED and not refused, tuple(errors),
                       tuple(refused), first.first_line, checkpoints=tuple(checkpoints), resumed_from=start,
                       broken=tuple(broken))


def parse_smoke_runs(text: str) -> tuple[SmokeResult, ...]:
    """The smoke test's lines, wherever they sit in a line (torchrun or srun may prefix them), a
    run ending at its final `ok` or `failed` line or its checkpoint line (a rerun after it is a run
    of its own), or where a resumed line starts the next; a run that resumes from the checkpoint
    the run before it saved goes on from it, one result. A `fmcluster-smoke` line that is not one
    the kit prints, or a step that does not count up, is a Refusal."""
    runs: list[_Run] = []
    run = _Run(1)
    for at, line in enumerate(lines_of(text), 1):
        match = _SMOKE.search(line)
        if match is None:
            if "Traceback (most recent call last)" in line or re.search(r"\b\w*Error: ", line):
                if len(run.errors) < 10:
                    run.errors.append(line.strip()[:300])
            continue
        words, fields, twice = _fields(match.group(1))
        resumed = words[:1] == ["resumed"]
        if run.outcome is not None or (resumed and run.started):  # a line after the run's last one: the next run
            runs.append(run)
            run = _Run(at)
        if twice:
            run.refused.append(Refusal(at, f"a smoke line with {twice[0]}= twice"))
        elif words[:1] in (["checkpoint"], ["resumed"]):
            run.checkpoint(at, words, fields, line)
        elif "step" in fields:
            run.step(at, words, fields, line)
        elif words and words[0] in ("ok", "failed"):
            run.final(at, words, fields, line)
        else:
            run.refused.append(Refusal(at, f"a smoke line the kit does not print: {line.strip()[:200]!r}"))
    runs.append(run)
    chains: list[list[_Run]] = []
    for run in runs:
        if chains and _resumes(chains[-1][-1], run):
            chains[-1].append(run)
        else:
            chains.append([run])
    return tuple(_chained(chain) for chain in chains)


def parse_smoke(text: str) -> SmokeResult:
    """The text's one run (parse_smoke_runs); of several, the worst (one not understood, then a
    failure, then a warning), its errors saying how many there are."""
    order = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}
    return worst_run(parse_smoke_runs(text), lambda r: (3 if r.refused else order[r.verdict], -r.first_line),
                     "smoke runs")
