"""The parser of the lines the acceptance kit's smoke test prints (fmcluster.kits.common.SMOKE_PY:
`fmcluster-smoke step=... loss=...`, then `fmcluster-smoke ok` or `failed`), and its own verdict.
Pure: the text in, a frozen SmokeResult out."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Optional

from fmcluster.kits.verify.judging import Verdict
from fmcluster.kits.verify.reading import Refusal, lines_of, number, whole, worst_run

_SMOKE = re.compile(r"fmcluster-smoke\s+(.*)$")


@dataclass(frozen=True)
class SmokeStep:
    step: int
    loss: float
    tokens_per_s: Optional[float]
    host: Optional[str]
    rank: Optional[int]


@dataclass(frozen=True)
class SmokeResult:
    steps: tuple[SmokeStep, ...]
    outcome: Optional[str]  # "ok", "failed", None (no final line)
    reason: Optional[str]  # of a failure
    world_size: Optional[int]
    steps_declared: Optional[int]  # the final line's steps=
    complete: bool  # the final line is there
    errors: tuple[str, ...]
    refused: tuple[Refusal, ...] = ()  # smoke lines it does not understand: the run is not judged
    first_line: int = 1  # of the run, in the text parsed
    runs: int = 1  # the runs of the text (parse_smoke of several: the worst of them)

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
        """PASS: the final `ok` line, a step line for each of the steps it declares (1 to N),
        every loss finite and the last no higher than the first; FAIL otherwise (a missing final
        line is a truncated run, a missing step line a lost one)."""
        if self.refused or self.outcome != "ok" or not self.steps:
            return Verdict.FAIL
        if not all(math.isfinite(loss) for loss in self.losses):
            return Verdict.FAIL
        if self.losses[-1] > self.losses[0]:
            return Verdict.FAIL
        if [s.step for s in self.steps] != list(range(1, (self.steps_declared or 0) + 1)):
            return Verdict.FAIL  # a step line missing: the output lost lines, or the run stopped early
        return Verdict.PASS


_STEP_KEYS = {"step", "loss", "tokens_per_s", "host", "rank"}


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

    def result(self) -> SmokeResult:
        errors = [r.text() for r in self.refused] + self.errors
        if self.outcome is None:
            errors.append("truncated: no final fmcluster-smoke ok/failed line")
        if not self.steps:
            errors.append("no fmcluster-smoke step lines")
        elif self.outcome == "ok" and math.isfinite(self.steps[0].loss) and math.isfinite(self.steps[-1].loss) \
                and self.steps[-1].loss > self.steps[0].loss:
            first, last = self.steps[0], self.steps[-1]
            errors.append(f"loss rose: {first.loss:g} at step {first.step}, {last.loss:g} at step {last.step}")
        if self.outcome == "ok" and self.steps and self.declared is not None and \
                [s.step for s in self.steps] != list(range(1, self.declared + 1)):
            errors.append(f"{len(self.steps)} step lines of the {self.declared} steps it ran: lines are missing")
        return SmokeResult(tuple(self.steps), self.outcome, self.reason, self.world, self.declared,
                           self.outcome is not None and not self.refused, tuple(errors), tuple(self.refused),
                           self.first_line)


def parse_smoke_runs(text: str) -> tuple[SmokeResult, ...]:
    """The smoke test's lines, wherever they sit in a line (torchrun or srun may prefix them), a
    run ending at its final `ok` or `failed` line: a rerun after it is a run of its own. A
    `fmcluster-smoke` line that is not one the kit prints, or a step that does not count up, is a
    Refusal."""
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
        if run.outcome is not None:  # a line after the run's final one: the next run
            runs.append(run)
            run = _Run(at)
        if twice:
            run.refused.append(Refusal(at, f"a smoke line with {twice[0]}= twice"))
        elif "step" in fields:
            run.step(at, words, fields, line)
        elif words and words[0] in ("ok", "failed"):
            run.final(at, words, fields, line)
        else:
            run.refused.append(Refusal(at, f"a smoke line the kit does not print: {line.strip()[:200]!r}"))
    runs.append(run)
    return tuple(r.result() for r in runs)


def parse_smoke(text: str) -> SmokeResult:
    """The text's one run (parse_smoke_runs); of several, the worst (one not understood, then a
    failure, then a warning), its errors saying how many there are."""
    order = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}
    return worst_run(parse_smoke_runs(text), lambda r: (3 if r.refused else order[r.verdict], -r.first_line),
                     "smoke runs")
