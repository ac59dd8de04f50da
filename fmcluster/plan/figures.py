"""The plan's numbers in words, as both renderings write them: counts with thousands separators,
dollars, bandwidths, durations and parameter counts."""

from __future__ import annotations


def num(value: float, digits: int = 2) -> str:
    """1234.5 -> '1,234.5'; whole numbers without decimals; at most `digits` decimals."""
    text = f"{value:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:,.0f}"
    return text if text != "-0" else "0"


def usd(value: float | None) -> str:
    if value is None:
        return "unknown"
    if value < 1:
        return "$" + (f"{value:.3f}".rstrip("0").rstrip(".") if value else "0")
    return f"${value:,.2f}"


def gbps(value: float) -> str:
    return f"{num(value / 1000, 2)} Tbps" if value >= 1000 else f"{num(value)} Gbps"


def gbytes(value: float) -> str:
    """GB/s (bytes: NVLink), as NVIDIA's datasheets give it: '1,800 GB/s'."""
    return f"{num(value, 0)} GB/s"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{num(seconds, 1)} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def params(value: float) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if value >= scale:
            return f"{num(value / scale, 2)}{unit}"
    return num(value, 0)


def count_range(low: int, high: int) -> str:
    return str(high) if low == high else f"{low} to {high}"
