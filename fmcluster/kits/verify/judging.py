"""Holding a measurement to its expected figure: the verdicts (PASS, WARN, FAIL), a figure
judged against its ratios, the slow nodes of a group. Pure: imports no other module of the package."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from fmcluster.model.expected import Expected


class Verdict(str, Enum):
    """A judgement; a `str`, so it serializes to JSON as itself."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"


_RANK = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2}


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The worst of some verdicts (PASS for none)."""
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.PASS)


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    measured: Optional[float]
    expected: float
    ratio: Optional[float]  # measured / expected
    warn_below: float  # expected x warn_ratio: below it WARN
    fail_below: float  # expected x fail_ratio: below it FAIL
    note: str = ""


def _finite(value: Optional[float]) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def judge(measured: Optional[float], expected: float, warn_ratio: float, fail_ratio: float) -> Judgement:
    """PASS at `warn_ratio` x `expected` or more, WARN from `fail_ratio` x `expected`, FAIL below
    (and FAIL when nothing finite was measured). Higher is better (bandwidths).

    fmcluster.model.expected names the same two ratios `pass_ratio` and `warn_ratio` (PASS from the
    first, WARN down to the second): `judge_expected` maps them."""
    if not (_finite(expected) and expected > 0):
        raise ValueError(f"expected must be a positive number, not {expected!r}")
    if not 0 <= fail_ratio <= warn_ratio:
        raise ValueError(f"need 0 <= fail_ratio <= warn_ratio, not {fail_ratio!r}, {warn_ratio!r}")
    warn_below, fail_below = expected * warn_ratio, expected * fail_ratio
    if measured is None or not _finite(measured):
        return Judgement(Verdict.FAIL, None, expected, None, warn_below, fail_below, "nothing measured")
    ratio = measured / expected
    if measured >= warn_below:
        verdict = Verdict.PASS
    elif measured >= fail_below:
        verdict = Verdict.WARN
    else:
        verdict = Verdict.FAIL
    return Judgement(verdict, float(measured), expected, round(ratio, 4), warn_below, fail_below)


def judge_expected(measured: Optional[float], figure: Expected) -> Optional[Judgement]:
    """`judge` against one of fmcluster.model.expected's figures; None where it has no peak (measured,
    not judged)."""
    if figure.peak is None:
        return None
    return judge(measured, figure.peak, figure.pass_ratio, figure.warn_ratio)


def slow_nodes(per_node: Mapping[str, Optional[float]], expected: Optional[float],
               fail_ratio: float) -> tuple[str, ...]:
    """The nodes whose figure is below `fail_ratio` x `expected`, or was not measured, slowest first.
    `expected` None: the median of the nodes' own figures (the group's peers), for results that have
    no catalog figure (/scratch) or to name the stragglers of a group that passed as a whole."""
    finite = [v for v in per_node.values() if v is not None and _finite(v)]
    reference = expected if expected is not None else (statistics.median(finite) if finite else None)
    if reference is None:
        return tuple(sorted(per_node))
    floor = reference * fail_ratio

    def below(value: Optional[float]) -> bool:
        return value is None or not _finite(value) or value < floor

    def order(host: str) -> tuple[bool, float, str]:
        value = per_node[host]
        return (True, float(value), host) if value is not None and _finite(value) else (False, 0.0, host)

    return tuple(sorted((host for host, value in per_node.items() if below(value)), key=order))
