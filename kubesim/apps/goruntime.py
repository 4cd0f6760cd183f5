"""The Go runtime's heap and collector as a program's memory and CPU see them: GOGC (or a `GC`
override read through strconv.Atoi), GOMEMLIMIT, GOMAXPROCS. A call-graph service that declares
`runtime=GO` (kubesim/apps/graph.py) pays the collector's CPU per request and holds the heap
the pacer lets grow, so a backlog parked in the process (live heap) slows the pod that must drain
it and a GOMEMLIMIT below the live heap leaves the collector running back to back."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# The Go runtime of the binaries, as DeathStarBench builds them (Go 1.21: GOMEMLIMIT and the GC CPU limiter
# exist; SREGym's fork pins Go 1.17, whose runtime ignores GOMEMLIMIT and would be OOM-killed instead).
# A binary's resident set is what the runtime does not collect plus the heap the collector lets grow to its
# goal; the live heap is a base plus what requests hold while in the process.
KiB, MiB = 2**10, 2**20
GO_RUNTIME_RSS = 6 * MiB  # text, runtime structures, idle goroutine stacks: not collected
GO_LIVE_BASE = 4 * MiB  # gRPC, mgo, memcache and Jaeger clients at idle
GO_LIVE_PER_RPS = 20_000  # bytes live per request/s in flight (decoded messages, spans)
GO_LIVE_PER_QUEUED = 32 * KiB  # a request parked in the process: its goroutine and stack, HTTP/2 stream, message, span
GO_ALLOC_PER_REQUEST = 32 * KiB  # bytes a request allocates
GO_MARK_S_PER_BYTE = 1e-9  # ~1 GB/s of heap marked per core
GO_MIN_HEAP = 4 * MiB  # the pacer's minimum heap goal at GOGC=100 (scaled by GOGC)
GO_MIN_RUNWAY = 256 * KiB  # back-to-back cycles: what the mutator allocates while one mark runs
GO_LIMITER_SHARE = 0.5  # the GC CPU limiter: at most half of GOMAXPROCS' time, then the heap overshoots
_MEMLIMIT = re.compile(r"^([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(B|KiB|MiB|GiB|TiB)?$")


def go_memlimit(value: str | None) -> float | None:
    """GOMEMLIMIT as runtime/debug reads it: bytes with an optional B/KiB/MiB/GiB/TiB suffix, or
    `off`; None for unset/off. Raises ValueError where the runtime throws "malformed GOMEMLIMIT"."""
    if value is None or value == "off":
        return None
    m = _MEMLIMIT.match(value.strip())
    if not m:
        raise ValueError(value)
    mult = {None: 1, "B": 1, "KiB": KiB, "MiB": MiB, "GiB": 2**30, "TiB": 2**40}[m.group(2)]
    return float(m.group(1)) * mult


def go_gc_percent(env: dict[str, str]) -> int:
    """tune.setGCPercent: `GC` through strconv.Atoi (garbage reads as 0), else 100; it overrides GOGC."""
    val = env.get("GC")
    if val is None:
        return 100
    try:
        return int(val.strip())
    except ValueError:
        return 0


def go_heap(rt: dict[str, Any], live: float) -> tuple[float, float]:
    """(heap goal, runway: what may be allocated before the next collection) for a live heap under
    GOGC and GOMEMLIMIT; a live heap at the soft limit leaves the collector running back to back."""
    gogc = rt["gogc"]
    goal = math.inf if gogc < 0 else max(live * (1 + gogc / 100.0), GO_MIN_HEAP * gogc / 100.0)
    if rt.get("memlimit") is not None:
        goal = min(goal, rt["memlimit"] - GO_RUNTIME_RSS)
    return goal, max(goal - live, GO_MIN_RUNWAY)


def go_live(rt: dict[str, Any], load_rps: float, queued: float) -> float:
    return GO_LIVE_BASE + GO_LIVE_PER_RPS * load_rps + GO_LIVE_PER_QUEUED * queued


def go_gc_cpu(rt: dict[str, Any], live: float, cpu_per_request: float, quota: float) -> float:
    """CPU seconds per request the collector costs beyond what GOGC=100 costs (negative for a lazier
    GC). A cycle marks the live heap and comes every `runway` bytes allocated, so its cost per
    request grows as the live heap nears the goal. The limiter caps the collector at half of
    GOMAXPROCS' time, which under a CPU quota smaller than GOMAXPROCS is no cap at all."""
    _, runway = go_heap(rt, live)
    per_cycle = GO_MARK_S_PER_BYTE * live
    gc = GO_ALLOC_PER_REQUEST / runway * per_cycle
    base = GO_ALLOC_PER_REQUEST * GO_MARK_S_PER_BYTE  # GOGC=100 at steady state: a runway as large as the live heap
    share = min(1.0, GO_LIMITER_SHARE * rt["procs"] / max(quota, 1e-6))
    mutator = max(cpu_per_request - base, 1e-6)
    if share < 1.0 and gc / (gc + mutator) > share:
        gc = mutator * share / (1.0 - share)
    return gc - base


def go_rss(rt: dict[str, Any], live: float) -> float:
    goal, _ = go_heap(rt, live)
    if math.isinf(goal):  # GC off and no limit: the heap keeps what was allocated
        return GO_RUNTIME_RSS + live + rt.get("allocated", 0.0)
    return GO_RUNTIME_RSS + max(goal, live) + (GO_MIN_RUNWAY if goal <= live else 0.0)


@dataclass(frozen=True)
class GoRuntime:
    """What a service's Go runtime costs; its settings are read from the environment at start."""

    alloc_per_request: float = GO_ALLOC_PER_REQUEST
    # A variable the program's own code passes to debug.SetGCPercent at start (hotel's tune reads `GC`,
    # else 100): such a program always overrides GOGC.
    tune_env: str = ""

    def gc_percent(self, env: dict[str, str]) -> int:
        """GOGC as the runtime reads it (`off` is -1), unless the program sets the percentage itself."""
        if self.tune_env:
            return go_gc_percent({"GC": env[self.tune_env]} if self.tune_env in env else {})
        value = env.get("GOGC", "").strip()
        if value == "off":
            return -1
        try:
            return int(value)
        except ValueError:
            return 100

    def settings(self, env: dict[str, str], node_cpu: float) -> dict[str, Any] | list[str]:
        """The runtime's settings, or the lines the runtime prints on stderr when it refuses them."""
        try:
            memlimit = go_memlimit(env.get("GOMEMLIMIT"))
        except ValueError:
            return [f"GOMEMLIMIT={env['GOMEMLIMIT']}",
                    "fatal error: malformed GOMEMLIMIT; see `go doc runtime/debug.SetMemoryLimit`"]
        try:
            procs = max(1, int(env.get("GOMAXPROCS", "")))
        except ValueError:  # the runtime ignores a bad GOMAXPROCS; it never reads the CFS quota
            procs = int(node_cpu)
        return {"gogc": self.gc_percent(env), "memlimit": memlimit, "procs": procs}

    def gc_cpu(self, go: dict[str, Any], rps: float, queued: float, cpu_per_request: float, cores: float) -> float:
        return go_gc_cpu(go, go_live(go, rps, queued), cpu_per_request, cores)

    def served(self, go: dict[str, Any], requests: float) -> None:
        """With the collector off and no limit nothing is freed: the heap keeps what requests allocate."""
        if go["gogc"] < 0 and go.get("memlimit") is None:
            go["allocated"] = go.get("allocated", 0.0) + requests * self.alloc_per_request

    def rss(self, go: dict[str, Any], rps: float, queued: float) -> float:
        return go_rss(go, go_live(go, rps, queued))


GO = GoRuntime()
HOTEL_GO = GoRuntime(tune_env="GC")  # DeathStarBench's tune.setGCPercent: `GC` through strconv.Atoi
