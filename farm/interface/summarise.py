"""Summarised mode: the same evidence in fewer tokens. Logs become templates with counts, metric
series become what changed (first, last, min, max), traces become error groups by span."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

_VARIABLE = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # uuids
    r"|\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"  # timestamps
    r"|\b0x[0-9a-f]+\b|\b[0-9a-f]{16,}\b"  # hex ids
    r"|\b\d+(?:\.\d+)?\b",  # numbers
    re.I,
)


def template(line: str) -> str:
    return _VARIABLE.sub("<*>", line.strip())


def fmt_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def dedupe_text(text: str, max_lines: int = 200) -> str:
    """kubectl output: runs of lines with the same template collapse to one line with a count."""
    lines = text.splitlines()
    out: list[str] = []
    prev, count, first = None, 0, ""
    for line in lines + [None]:  # type: ignore[list-item]
        key = template(line) if line is not None else None
        if key == prev and line is not None:
            count += 1
            continue
        if prev is not None:
            out.append(first + (f"   (x{count} similar lines)" if count > 1 else ""))
        prev, count, first = key, 1, line or ""
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... {len(out) - max_lines} more lines omitted"]
    return "\n".join(out)


def _labels(metric: dict[str, str]) -> str:
    name = metric.get("__name__", "")
    rest = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return f"{name}{{{rest}}}"


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def prometheus(data: dict[str, Any], top: int = 30) -> str:
    kind, result = data.get("resultType"), data.get("result")
    if kind in ("scalar", "string"):
        return f"{kind}: {result[1] if isinstance(result, list) else result}"
    if not result:
        return "no series matched"
    if kind == "vector":
        rows = sorted(result, key=lambda r: -_num(r["value"][1]) if _num(r["value"][1]) == _num(r["value"][1]) else 0)
        lines = [f"{len(rows)} series (largest first):"]
        lines += [f"  {_labels(r['metric'])} = {_fmt(_num(r['value'][1]))}" for r in rows[:top]]
        if len(rows) > top:
            lines.append(f"  ... {len(rows) - top} more series")
        return "\n".join(lines)
    # matrix: what changed over the range
    changed: list[tuple[float, str]] = []
    constant: Counter[str] = Counter()
    for r in result:
        vals = [(float(t), _num(v)) for t, v in r.get("values", [])]
        if not vals:
            continue
        nums = [v for _, v in vals]
        if max(nums) == min(nums):
            constant[_fmt(nums[0])] += 1
            continue
        peak_t = max(vals, key=lambda tv: tv[1])[0]
        change = abs(nums[-1] - nums[0]) + (max(nums) - min(nums))
        changed.append((change, f"  {_labels(r['metric'])}: first {_fmt(nums[0])}, last {_fmt(nums[-1])}, "
                                f"min {_fmt(min(nums))}, max {_fmt(max(nums))} at {fmt_time(peak_t)}"))
    changed.sort(key=lambda c: -c[0])
    lines = [f"{len(changed)} series changed over the range (most change first):"] if changed else [
        "no series changed over the range"]
    lines += [text for _, text in changed[:top]]
    if len(changed) > top:
        lines.append(f"  ... {len(changed) - top} more changed series")
    for value, n in constant.most_common():
        lines.append(f"{n} series constant at {value}")
    return "\n".join(lines)


def loki(streams: list[dict[str, Any]], top: int = 40) -> str:
    """Log lines grouped by (pod/container, template) with counts and first/last time."""
    groups: dict[tuple[str, str], list[Any]] = {}
    total = 0
    for stream in streams:
        labels = stream.get("stream") or stream.get("metric") or {}
        who = labels.get("pod") or labels.get("app") or labels.get("container") or labels.get("job") or "?"
        for ts, line in stream.get("values", []):
            total += 1
            t = int(ts) / 1e9 if str(ts).isdigit() else float(ts)
            key = (who, template(line))
            g = groups.setdefault(key, [0, t, t, line])
            g[0] += 1
            g[1], g[2] = min(g[1], t), max(g[2], t)
            if t >= g[2]:
                g[3] = line
    if not total:
        return "no log lines matched"
    rows = sorted(groups.items(), key=lambda kv: -kv[1][0])
    lines = [f"{total} lines, {len(rows)} distinct messages (most frequent first):"]
    for (who, _), (count, first, last, example) in rows[:top]:
        lines.append(f"  [{who}] x{count} {fmt_time(first)}..{fmt_time(last)}: {example.strip()[:300]}")
    if len(rows) > top:
        lines.append(f"  ... {len(rows) - top} more distinct messages")
    return "\n".join(lines)


def _is_error(span: dict[str, Any]) -> bool:
    for tag in span.get("tags") or []:
        key, value = tag.get("key"), tag.get("value")
        if key == "error" and value in (True, "true"):
            return True
        if key in ("http.status_code", "http.response.status_code") and _num(value) >= 500:
            return True
        if key in ("otel.status_code",) and value == "ERROR":
            return True
        if key == "rpc.grpc.status_code" and _num(value) not in (0.0,):
            return True
    return False


def _error_message(span: dict[str, Any]) -> str:
    for log in span.get("logs") or []:
        for field in log.get("fields") or []:
            if field.get("key") in ("message", "event", "error", "error.object", "exception.message"):
                return str(field.get("value"))[:200]
    for tag in span.get("tags") or []:
        if tag.get("key") in ("error.message", "otel.status_description", "http.status_code"):
            return f"{tag.get('key')}={tag.get('value')}"
    return ""


def jaeger_traces(traces: list[dict[str, Any]], top: int = 25) -> str:
    """Per (service, operation): span count, error count, p50/p99 latency; error spans grouped."""
    ops: dict[tuple[str, str], list[float]] = defaultdict(list)
    errors: Counter[tuple[str, str, str]] = Counter()
    error_traces = 0
    for trace in traces:
        processes = trace.get("processes") or {}
        had_error = False
        for span in trace.get("spans") or []:
            proc = span.get("process") or processes.get(span.get("processID", ""), {}) or {}
            key = (proc.get("serviceName", "?"), span.get("operationName", "?"))
            ops[key].append(float(span.get("duration", 0)) / 1000.0)
            if _is_error(span):
                had_error = True
                errors[(key[0], key[1], _error_message(span))] += 1
        error_traces += had_error
    if not traces:
        return "no traces found"
    lines = [f"{len(traces)} traces, {error_traces} with errors."]
    if errors:
        lines.append("error spans by span (most first):")
        for (svc, op, msg), n in errors.most_common(top):
            lines.append(f"  {svc} {op}: x{n}" + (f" ({msg})" if msg else ""))
    lines.append("latency by span (ms):")
    rows = sorted(ops.items(), key=lambda kv: -statistics.median(kv[1]))
    for (svc, op), durs in rows[:top]:
        durs.sort()
        p99 = durs[min(len(durs) - 1, int(0.99 * len(durs)))]
        lines.append(f"  {svc} {op}: n={len(durs)} p50={statistics.median(durs):.1f} p99={p99:.1f}")
    return "\n".join(lines)
