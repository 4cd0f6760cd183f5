"""Kubernetes resource quantities: parse `100m`, `1`, `512Mi`, `1e3` into floats (cores, bytes)
and format them back the way the API server and kubectl print them."""

from __future__ import annotations

_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DEC = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def parse_quantity(value: object) -> float:
    """`250m` → 0.25, `1Gi` → 1073741824.0; numbers pass through. Raises ValueError on garbage."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if not text:
        raise ValueError("quantity is empty")
    for suffix, mult in _BIN.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * mult
    if text[-1] in _DEC and text[-1] != "" and not text[-1].isdigit():
        if text[-1] == "E" and len(text) > 1 and (text[-2].isdigit()) and "e" not in text.lower()[:-1]:
            return float(text[:-1]) * _DEC["E"]
        return float(text[:-1]) * _DEC[text[-1]]
    return float(text)


def format_cpu(cores: float) -> str:
    """0.5 → `500m`, 2 → `2`."""
    milli = round(cores * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(n: float) -> str:
    """Bytes the way the API server canonicalises binary quantities: 1073741824 → `1Gi`."""
    n = int(round(n))
    if n == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        if n % _BIN[suffix] == 0:
            return f"{n // _BIN[suffix]}{suffix}"
    return str(n)


def format_resource(resource: str, value: float) -> str:
    name = resource.split(".")[-1]
    if name == "cpu":
        return format_cpu(value)
    if name in ("memory", "storage", "ephemeral-storage"):
        return format_bytes(value)
    return str(int(value)) if float(value).is_integer() else str(value)
