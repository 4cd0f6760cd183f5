"""The diagnosis oracle: nine yes/no questions against the problem's structured ground truth, three
per dimension (localization, characterization, scope), answered by an LLM judge (any litellm model,
temperature 0) or, when no judge model is configured, by a deterministic offline judge over the
same questions (labelled offline in the verdict). Scores: per dimension the share of yes; the
composite weights them; a diagnosis passes when the composite reaches PASS_THRESHOLD and it names the
faulty component (L1).

    judge_diagnosis(diagnosis, truth, model) -> DiagnosisVerdict     # model None: offline

The verdict carries the threshold it was passed against, so a recorded result stays interpretable
when the threshold changes; the LLM judge's spend is charged to the sweep's ledger when given one.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from farm.oracles.base import ChecklistAnswer, DiagnosisVerdict, Dimension
from farm.problems.model import GroundTruth

if TYPE_CHECKING:
    from farm.llm.limits import SweepLedger

WEIGHTS: dict[str, float] = {"localization": 0.4, "characterization": 0.35, "scope": 0.25}
PASS_THRESHOLD = 0.7
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Question:
    id: str
    dimension: Dimension
    text: str


QUESTIONS: tuple[Question, ...] = (
    Question("L1", "localization", "Does the diagnosis name the faulty component as the root cause?"),
    Question("L2", "localization", "Does it tell the faulty component apart from components that only fail "
                                   "downstream of it (it does not present a downstream component as the cause)?"),
    Question("L3", "localization", "Does it avoid blaming a healthy component (one the ground truth does not "
                                   "list) as the origin of the failure?"),
    Question("C1", "characterization", "Does it name the mechanism by which the root cause produces the failure?"),
    Question("C2", "characterization", "Does it give the concrete mutated detail (the key, value, port, selector, "
                                       "tag or limit that was changed)?"),
    Question("C3", "characterization", "Does it avoid attributing the failure to a wrong fault type?"),
    Question("S1", "scope", "Does it blame nothing outside the ground truth (no extra faulty components or "
                            "root causes)?"),
    Question("S2", "scope", "Does it cover every affected component the ground truth lists (trivially yes when "
                            "it lists none and the faulty component is named)?"),
    Question("S3", "scope", "Does it describe the user-visible impact consistently with the ground truth's symptom?"),
)
QUESTION_IDS = tuple(q.id for q in QUESTIONS)


def _verdict(judge: str, offline: bool, answers: list[ChecklistAnswer], submitted: bool = True,
             tokens: tuple[int, int, float] = (0, 0, 0.0)) -> DiagnosisVerdict:
    scores = {}
    for dim in WEIGHTS:
        mine = [a for a in answers if a.dimension == dim]
        scores[dim] = round(sum(a.answer for a in mine) / len(mine), 4) if mine else 0.0
    composite = round(sum(WEIGHTS[d] * scores[d] for d in WEIGHTS) / sum(WEIGHTS.values()), 4)
    l1 = next((a.answer for a in answers if a.id == "L1"), False)
    return DiagnosisVerdict(judge=judge, offline=offline, answers=answers, scores=scores, composite=composite,
                            passed=submitted and l1 and composite >= PASS_THRESHOLD, submitted=submitted,
                            tokens_in=tokens[0], tokens_out=tokens[1], cost_usd=tokens[2],
                            threshold=PASS_THRESHOLD)


def judge_diagnosis(diagnosis: str | None, truth: GroundTruth, model: str | None, *,
                    api_base: str | None = None, max_attempts: int = MAX_ATTEMPTS,
                    ledger: SweepLedger | None = None) -> DiagnosisVerdict:
    """Score `diagnosis` against `truth`. model None means the deterministic offline judge; the judge
    model's endpoint may be given as api_base (or FARM_JUDGE_API_BASE). The judge's calls are
    charged to `ledger` (never refused by its cap: a finished trial is always judged)."""
    judge_name = model or "offline"
    if diagnosis is None or not diagnosis.strip():
        answers = [ChecklistAnswer(id=q.id, dimension=q.dimension, question=q.text, answer=False,
                                   evidence="no diagnosis submitted") for q in QUESTIONS]
        return _verdict(judge_name, model is None, answers, submitted=False)
    if model is None:
        return _verdict("offline", True, OfflineJudge(truth).answer(diagnosis))
    return _llm_judge(diagnosis, truth, model, api_base or os.environ.get("FARM_JUDGE_API_BASE"), max_attempts,
                      ledger)


# -- the LLM judge -----------------------------------------------------------------------------

JUDGE_SYSTEM = """You grade an SRE agent's incident diagnosis against the ground truth of the incident. \
Answer each checklist question with yes or no, judging meaning, not wording: accept synonyms, paraphrases and \
equivalent descriptions (a component named by its deployment, service, pod or container name, e.g. "geo", \
"the geo service", "hotel-reserv-geo", "geo-7c9d5b8f4-q8wzt"; "connection refused on the DB port" for "cannot \
reach MongoDB"; "wrong port" for "misconfigured port"; a value given in another unit or notation). Do not require \
every word of the ground truth; require that a competent engineer reading the diagnosis would reach the same \
conclusion on that question. For each answer, quote the words of the diagnosis that decide it (at most 25 \
words), or write "absent" when the diagnosis says nothing relevant.

Reply with only a JSON object, no prose, no code fence:
{"answers": [{"id": "L1", "answer": "yes", "evidence": "..."}, ... one object for each of L1 L2 L3 C1 C2 C3 S1 S2 S3]}"""


class JudgeAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: Literal["L1", "L2", "L3", "C1", "C2", "C3", "S1", "S2", "S3"]
    answer: bool
    evidence: str = ""

    @field_validator("answer", mode="before")
    @classmethod
    def _yes_no(cls, v: Any) -> Any:
        if isinstance(v, str):
            low = v.strip().lower()
            if low in ("yes", "y", "true"):
                return True
            if low in ("no", "n", "false"):
                return False
            raise ValueError(f"answer must be yes or no, got {v!r}")
        return v


class JudgeReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    answers: list[JudgeAnswer]

    @field_validator("answers")
    @classmethod
    def _all_nine(cls, v: list[JudgeAnswer]) -> list[JudgeAnswer]:
        ids = [a.id for a in v]
        missing = [q for q in QUESTION_IDS if q not in ids]
        if missing or len(ids) != len(set(ids)):
            raise ValueError(f"need exactly one answer for each of {', '.join(QUESTION_IDS)}; "
                             f"missing {missing or 'none'}, duplicated {sorted({i for i in ids if ids.count(i) > 1})}")
        return v


def parse_judge_reply(text: str | None) -> JudgeReply:
    """The judge's reply as a JudgeReply; raises ValueError saying what is wrong with it."""
    if not text or not text.strip():
        raise ValueError("the reply is empty")
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    if not body.startswith("{"):
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("the reply holds no JSON object")
        body = body[start:end + 1]
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the reply is not valid JSON: {exc}") from None
    try:
        return JudgeReply.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"the reply does not match the answer schema: {exc.errors()[0]['msg']}") from None


def judge_prompt(diagnosis: str, truth: GroundTruth) -> str:
    questions = "\n".join(f"{q.id} ({q.dimension}): {q.text}" for q in QUESTIONS)
    return (f"Ground truth (JSON):\n{truth.model_dump_json(indent=1)}\n\n"
            "Field meanings: component is the faulty component; affected are components that fail only "
            "downstream of it; details are the concrete mutated values; also lists further root causes of a "
            f"concurrent failure.\n\nChecklist:\n{questions}\n\nDiagnosis to grade:\n<<<\n{diagnosis.strip()}\n>>>")


def _llm_judge(diagnosis: str, truth: GroundTruth, model: str, api_base: str | None,
               max_attempts: int, ledger: SweepLedger | None = None) -> DiagnosisVerdict:
    from farm.llm.client import LLMClient, LLMError
    from farm.llm.limits import SweepLedger

    # The same spend counter, without its cap: the judge's calls count toward the sweep's cost, but
    # a sweep that reached its cap while the agent worked still gets its last trial judged.
    charge = SweepLedger.uncapped(ledger) if ledger is not None else None
    client = LLMClient(model, api_base=api_base, temperature=0.0, ledger=charge)
    messages: list[dict[str, Any]] = [{"role": "system", "content": JUDGE_SYSTEM},
                                      {"role": "user", "content": judge_prompt(diagnosis, truth)}]
    problem = ""
    for _attempt in range(max_attempts):
        try:
            call = client.complete(messages)
        except LLMError as exc:  # the judge is down: the trial keeps an offline verdict, labelled so
            problem = str(exc)
            break
        content = call.message.get("content")
        try:
            reply = parse_judge_reply(content)
        except ValueError as exc:
            problem = str(exc)
            messages = messages[:2] + [{"role": "assistant", "content": content or ""},
                                       {"role": "user", "content": f"That reply was unusable: {problem}. Reply "
                                                                   "with only the JSON object described."}]
            continue
        by_id: dict[str, JudgeAnswer] = {a.id: a for a in reply.answers}
        answers = [ChecklistAnswer(id=q.id, dimension=q.dimension, question=q.text, answer=by_id[q.id].answer,
                                   evidence=by_id[q.id].evidence[:300]) for q in QUESTIONS]
        t = client.totals
        return _verdict(model, False, answers, tokens=(t.tokens_in, t.tokens_out, t.cost_usd))
    # The judge never produced a usable reply: fall back to the offline judge, labelled as such.
    verdict = _verdict("offline", True, OfflineJudge(truth).answer(diagnosis))
    t = client.totals
    verdict.judge = f"offline (fallback: {model} gave no usable reply; last problem: {problem[-160:]})"
    verdict.tokens_in, verdict.tokens_out, verdict.cost_usd = t.tokens_in, t.tokens_out, t.cost_usd
    return verdict


# -- the offline judge -------------------------------------------------------------------------

CAUSE_MARKERS = ("root cause", "caused by", "because", "due to", "culprit", "origin", "the cause", "stems from",
                 "the problem is", "the issue is", "is misconfigured", "is broken", "is at fault", "responsible",
                 "the fault", "faulty", "results from", "triggered by")
DOWNSTREAM_MARKERS = ("downstream", "as a result", "consequently", "symptom", "only fail", "because of",
                      "cascad", "knock-on", "in turn", "depends on", "calls", "which makes", "so ", "therefore",
                      "propagat", "upstream of", "secondary")
PROBLEM_WORDS = ("fail", "error", "crash", "down", "broken", "misconfig", "unhealthy", "slow", "oom", "wrong",
                 "faulty", "bad", "degraded", "timeout", "timing out", "refus")
# Strong vocabulary per fault family; a family is "claimed" when its words appear in a causal sentence.
FAULT_FAMILIES: dict[str, tuple[str, ...]] = {
    "misconfiguration": ("misconfig", "wrong value", "incorrect value", "typo", "wrong port", "incorrect port",
                         "wrong env", "environment variable", "env var", "configmap", "config map", "wrong image",
                         "bad image", "image tag", "wrong selector", "selector", "wrong target", "targetport",
                         "target port", "wrong setting", "invalid value", "misspel", "configuration"),
    "resource-limit": ("oom", "out of memory", "memory limit", "cpu limit", "throttl", "resource quota", "quota",
                       "limits", "requests", "insufficient memory", "insufficient cpu", "resource limit"),
    "network": ("packet loss", "network partition", "partition", "network delay", "network latency", "dns",
                "network policy", "dropped packets", "bandwidth", "networkchaos", "packet"),
    "disk-io": ("disk", "i/o error", "io error", "eio", "bad sector", "sector", "filesystem", "storage",
                "read error", "write error", "iochaos"),
    "code-bug": ("bug", "code change", "regression", "null pointer", "nil pointer", "logic error", "buggy",
                 "exception in the code", "faulty code", "new release"),
    "credentials": ("password", "credential", "authentication", "auth fail", "unauthorized", "permission denied"),
    "node": ("node failure", "node down", "node is down", "notready", "not ready node", "kernel", "hardware",
             "cordon", "drained"),
    "overload": ("retry storm", "metastable", "overload", "thundering herd", "load spike", "traffic spike",
                 "saturat", "connection pool"),
    "clock": ("clock skew", "time drift", "clock drift", "ntp", "timechaos"),
    "feature-flag": ("feature flag", "flagd", "flag ", "toggle", "defaultvariant", "variant"),
    "exhaustion": ("file descriptor", "too many open files", "pid limit", "pids", "fork", "exhaust", "gc pause",
                   "garbage collect", "heap", "thrash"),
    "scheduling": ("unschedulable", "cannot be scheduled", "failedscheduling", "insufficient", "taint",
                   "affinity", "nodeselector", "node selector"),
    "admission": ("webhook", "admission", "failurepolicy"),
    "corruption": ("corrupt", "checksum", "data corruption", "torn write"),
}
# Families that describe the same fault in other words (a wrong limit is a misconfiguration too).
COMPATIBLE: dict[str, set[str]] = {
    "misconfiguration": {"credentials", "network"},
    "resource-limit": {"misconfiguration", "overload"},
    "network": {"misconfiguration"},
    "disk-io": {"node"},
    "code-bug": set(),
    "credentials": {"misconfiguration"},
    "node": {"disk-io", "resource-limit", "network"},
    "overload": {"resource-limit", "misconfiguration"},
    "clock": {"node"},
    "feature-flag": {"misconfiguration", "code-bug"},
    "exhaustion": {"resource-limit", "node", "overload"},
    "scheduling": {"resource-limit", "node", "misconfiguration"},
    "admission": {"misconfiguration"},
    "corruption": {"disk-io"},
}
FAULT_TYPE_ALIASES = {"flag": "feature-flag", "feature": "feature-flag", "fd": "exhaustion", "pid": "exhaustion",
                      "gc": "exhaustion", "exhaustion": "exhaustion", "thrash": "exhaustion",
                      "scheduling": "scheduling", "unschedulable": "scheduling", "admission": "admission",
                      "webhook": "admission", "corruption": "corruption", "kubelet": "node", "quota": "resource-limit",
                      "missing": "misconfiguration", "object": "misconfiguration", "pod": "node",
                      "queueing": "overload", "queue": "overload", "contention": "resource-limit",
                      "throttling": "resource-limit", "full": "disk-io", "skew": "clock","config": "misconfiguration", "misconfig": "misconfiguration", "resource": "resource-limit",
                      "limit": "resource-limit", "memory": "resource-limit", "cpu": "resource-limit",
                      "oom": "resource-limit", "network": "network", "dns": "network", "disk": "disk-io",
                      "io": "disk-io", "storage": "disk-io", "code": "code-bug", "bug": "code-bug",
                      "auth": "credentials", "credential": "credentials", "secret": "credentials",
                      "node": "node", "kernel": "node", "hardware": "node", "metastable": "overload",
                      "overload": "overload", "retry": "overload", "load": "overload", "clock": "clock",
                      "time": "clock", "operator": "misconfiguration", "selector": "misconfiguration",
                      "port": "misconfiguration", "image": "misconfiguration"}
IMPACT_CLASSES: dict[str, tuple[str, ...]] = {
    "errors": ("500", "5xx", "502", "503", "504", "error", "fail", "unavailable", "refus", "reject", "broken"),
    "latency": ("latency", "slow", "timeout", "timing out", "timed out", "p99", "p95", "delay", "lag"),
    "outage": ("down", "outage", "unreachable", "crash", "not respond", "no response", "unavailable"),
    "data": ("data loss", "corrupt", "stale", "inconsistent", "missing data", "lost write"),
}
NO_IMPACT = ("no user impact", "no impact", "users are not affected", "no visible impact")
KIND_WORDS = ("deployment", "service", "pod", "node", "configmap", "secret", "statefulset", "daemonset", "svc",
              "deploy", "database", "db", "container", "replicaset", "disk", "cluster")
NOT_NAMES = {"the", "a", "an", "this", "that", "its", "each", "every", "one", "which", "whole", "same", "other",
             "k8s", "kubernetes", "backend", "upstream", "downstream", "affected", "faulty", "healthy", "new",
             "old", "failing", "broken", "target", "calling", "called", "dependent", "all", "some", "any", "no",
             "to", "of", "in", "on", "for", "and", "or", "is", "are", "was", "by", "with", "his", "their",
             "mongodb", "redis", "memcached", "app", "application", "web", "api", "main", "primary", "headless",
             "default", "kube-system", "namespace", "running", "crashing", "restarted", "pending", "ready"}
STOPWORDS = set("""a an the and or of to in on for by with from at as is are was were be been being it its this that
which so than then into onto when while because due not no cannot can't can could would should will does do its
their there these those every each all any some only also very more most such how what who whom whose via per
instead after before until since out up down over under again""".split())
# Parts of hyphenated English words that are not component names (crash-loops, out-of-memory).
COMMON_HYPHEN_PARTS = {"crash", "loop", "loops", "looping", "back", "off", "backoff", "out", "of", "memory", "read",
                       "only", "write", "up", "to", "date", "well", "known", "self", "non", "re", "timed", "end",
                       "multi", "cross", "high", "low", "level", "side", "client", "server", "long", "short", "in",
                       "on", "knock", "so", "called", "per", "second", "minute", "time", "e", "g", "i", "x"}
# A name right after these is what the faulty component tried to reach, not a component blamed.
REACH_VERBS = ("connect to", "connect with", "reach", "talk to", "calls to", "call to", "dial", "point at",
               "points to", "pointing to", "instead of", "to its", "of its", "lookup of", "resolve")
DATA_STORES = ("mongo", "redis", "memcached", "mysql", "postgres", "tidb", "kafka", "etcd", "cassandra")
_SENTENCE = re.compile(r"(?<=[.;!?\n])\s+|\n+")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def _aliases(component: str) -> set[str]:
    c = component.lower().strip()
    out = {c}
    if "/" in c:
        out.add(c.split("/", 1)[1])
    for prefix in ("deployment/", "service/", "svc/", "deploy/", "node/", "pod/", "configmap/", "secret/"):
        if c.startswith(prefix):
            out.add(c[len(prefix):])
    out |= {a.replace("-", " ") for a in list(out) if "-" in a}
    return {a for a in out if a}


def _mentions(text: str, aliases: set[str]) -> bool:
    """`text` names one of `aliases` as a whole name (a pod name with its hash suffix counts;
    'geo' inside 'mongodb-geo' does not)."""
    for a in aliases:
        pat = r"(?<![a-z0-9_-])" + re.escape(a) + r"(?:-[a-z0-9]*\d[a-z0-9]*){0,2}(?![a-z0-9_]|-[a-z])"
        if re.search(pat, text):
            return True
    return False


def _stem(word: str) -> str:
    return word[:5]


def _content_stems(text: str, exclude: set[str]) -> set[str]:
    words = re.findall(r"[a-z][a-z0-9_]+", text.lower())
    return {_stem(w) for w in words if w not in STOPWORDS and w not in exclude and len(w) > 2}


def _family(fault_type: str) -> str | None:
    """The fault family of a ground truth's fault_type, matched on whole words (so that 'admission'
    is not read as 'io')."""
    ft = fault_type.lower().strip()
    if ft in FAULT_FAMILIES:
        return ft
    words = [w for w in re.split(r"[^a-z]+", ft) if w]
    for w in reversed(words):  # the last word names the family: operator-misconfiguration, disk-full
        if w in FAULT_FAMILIES:
            return w
        if w in FAULT_TYPE_ALIASES:
            return FAULT_TYPE_ALIASES[w]
    for key in FAULT_FAMILIES:
        if key in ft:
            return key
    return None


def _quote(sentence: str) -> str:
    s = sentence.strip()
    return s if len(s) <= 200 else s[:197] + "..."


class OfflineJudge:
    """The nine questions answered from the ground truth's names, values and vocabulary. Lenient on
    wording (aliases, stems, synonym families), strict on substance (which component, which value)."""

    def __init__(self, truth: GroundTruth) -> None:
        self.truth = truth
        roots = [truth] + list(truth.also)
        self.roots = roots
        self.root_aliases = [_aliases(r.component) for r in roots]
        self.affected_aliases = [_aliases(a) for r in roots for a in r.affected]
        self.known = set().union(*self.root_aliases, *self.affected_aliases) if roots else set()
        self.families = {f for r in roots if (f := _family(r.fault_type))}

    def _is_known(self, name: str) -> bool:
        """A name of a ground-truth component: itself, a pod of it (hash suffix), or a container
        named with an app prefix (hotel-reserv-geo for geo) but not a data store named after it
        (mongodb-geo is another component than geo)."""
        if name in self.known or _mentions(name, self.known):
            return True
        for k in self.known:
            if name.endswith("-" + k):
                prefix = name[: -len(k) - 1]
                return not any(db in prefix for db in DATA_STORES)
        return False

    def _named_components(self, sentence: str) -> set[str]:
        """Component-looking names in a sentence ('X service', 'deployment X', 'kind/X', hyphenated
        ids), leaving out names only mentioned as what something else tried to reach."""
        names = set()
        kinds = "|".join(KIND_WORDS)
        # "deployment/geo" always; "node worker-2" only for a name that cannot be an English word
        found = [(m.start(3), m.group(3))
                 for m in re.finditer(rf"\b({kinds})(/| )([a-z0-9][a-z0-9-]*[a-z0-9])", sentence) if m.group(2) == "/" or re.search(r"[-\d]", m.group(3))]
        found += [(m.start(1), m.group(1))
                  for m in re.finditer(rf"\b([a-z0-9][a-z0-9-]*[a-z0-9]) ({kinds})\b", sentence)]
        found += [(m.start(1), m.group(1)) for m in re.finditer(r"\b([a-z][a-z0-9.-]*[a-z0-9])\b", sentence)
                  if "-" in m.group(1) and not set(re.split(r"[-.]", m.group(1))) & COMMON_HYPHEN_PARTS]
        for at, n in found:
            before = sentence[max(0, at - 24):at]
            if any(v in before for v in REACH_VERBS):
                continue
            names.add(n)
        return {n for n in names if n not in NOT_NAMES and not n.isdigit() and len(n) > 1}

    def _blamed(self, sentences: list[str], markers: tuple[str, ...]) -> tuple[set[str], str]:
        """Unknown components named in sentences that carry one of `markers`."""
        blamed, quote = set(), ""
        for s in sentences:
            if not any(m in s for m in markers):
                continue
            for n in self._named_components(s):
                if not self._is_known(n):
                    blamed.add(n)
                    quote = quote or s
        return blamed, quote

    def answer(self, diagnosis: str) -> list[ChecklistAnswer]:
        text = _norm(diagnosis)
        sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
        causal = [s for s in sentences if any(m in s for m in CAUSE_MARKERS)] or sentences[:1]
        out: dict[str, tuple[bool, str]] = {}

        # L1: every root component named, and not only among the components said to fail downstream
        def as_cause(s: str) -> bool:
            first = s == sentences[0]
            causal = any(m in s for m in CAUSE_MARKERS)
            downstream = any(m in s for m in DOWNSTREAM_MARKERS)
            return first or causal or not downstream

        named = [next((s for s in sentences if _mentions(s, al) and as_cause(s)), None) for al in self.root_aliases]
        out["L1"] = (all(n is not None for n in named), _quote(named[0]) if named[0] else "absent")

        # L2: no downstream component presented as the cause
        wrong_origin = ""
        for al in self.affected_aliases:
            for s in causal:
                if _mentions(s, al) and not any(_mentions(s, r) for r in self.root_aliases) \
                        and not any(m in s for m in DOWNSTREAM_MARKERS):
                    wrong_origin = s
        downstream_said = next((s for s in sentences if any(_mentions(s, al) for al in self.affected_aliases)
                                and any(m in s for m in DOWNSTREAM_MARKERS)), "")
        out["L2"] = (out["L1"][0] and not wrong_origin,
                     _quote(wrong_origin or downstream_said or (named[0] or "absent")))

        # L3: no healthy component blamed as the origin
        blamed, quote = self._blamed(causal, CAUSE_MARKERS)
        out["L3"] = (not blamed, _quote(quote) if blamed else "no other component blamed")

        # C1: the mechanism, by its content words (stems) and the fault family's vocabulary
        names = {w for al in self.root_aliases + self.affected_aliases for a in al for w in re.split(r"[\s/-]", a)}
        names |= (set(KIND_WORDS) - {"database", "db", "disk", "node"}) | {"pods", "services", "deployments"}
        mech = set().union(*(_content_stems(r.mechanism, names) for r in self.roots))
        have = _content_stems(text, set())
        overlap = mech & have
        fam_words = [w for f in self.families for w in FAULT_FAMILIES.get(f, ())]
        fam_hit = next((w for w in fam_words if w in text), None)
        ratio = len(overlap) / len(mech) if mech else 0.0
        c1 = ratio >= 0.35 or len(overlap) >= 3 or (ratio >= 0.25 and fam_hit is not None)
        mech_quote = next((s for s in sentences if len(_content_stems(s, set()) & mech) >= 2), "absent")
        out["C1"] = (c1, _quote(mech_quote))

        # C2: a concrete mutated value
        detail_quote, c2 = "absent", False
        for r in self.roots:
            for key, value in r.details.items():
                for candidate in (str(value), key if len(key) > 3 and "_" in key else ""):
                    cand = candidate.lower().strip()
                    if len(cand) < 2:
                        continue
                    pat = r"(?<![a-z0-9])" + re.escape(cand) + r"(?![a-z0-9])"
                    alt = cand.replace("_", " ")
                    if re.search(pat, text) or (alt != cand and alt in text):
                        c2 = True
                        detail_quote = next((s for s in sentences if cand in s or alt in s), detail_quote)
                        break
                if c2:
                    break
        out["C2"] = (c2, _quote(detail_quote))

        # C3: no incompatible fault family claimed in a causal sentence
        claimed = {f for f, words in FAULT_FAMILIES.items() for s in causal if any(w in s for w in words)}
        allowed = set(self.families).union(*(COMPATIBLE.get(f, set()) for f in self.families))
        wrong = claimed - allowed if self.families else set()
        if self.families:
            c3 = not wrong
        else:  # a fault type we have no vocabulary for: accept if the mechanism is right
            c3 = c1
        wrong_quote = next((s for s in causal for f in wrong if any(w in s for w in FAULT_FAMILIES[f])), "")
        out["C3"] = (c3, _quote(wrong_quote) if wrong else f"claims {', '.join(sorted(claimed)) or 'no family'}")

        # S1: nothing outside the ground truth blamed anywhere
        blamed_any, quote_any = self._blamed(sentences, PROBLEM_WORDS + CAUSE_MARKERS)
        out["S1"] = (not blamed_any and not wrong, _quote(quote_any or wrong_quote) if (blamed_any or wrong)
                     else "nothing outside the ground truth")

        # S2: every affected component covered
        missing = [al for al in self.affected_aliases if not any(_mentions(s, al) for s in sentences)]
        if self.affected_aliases:
            cover = next((s for s in sentences if any(_mentions(s, al) for al in self.affected_aliases)), "absent")
            out["S2"] = (not missing, _quote(cover))
        else:
            out["S2"] = (out["L1"][0], "the ground truth lists no affected components")

        # S3: impact consistent with the symptom
        symptom = _norm(" ".join(r.symptom for r in self.roots))
        want = {c for c, words in IMPACT_CLASSES.items() if any(w in symptom for w in words)}
        said = {c for c, words in IMPACT_CLASSES.items() if any(w in text for w in words)}
        denies = any(p in text for p in NO_IMPACT)
        s3 = not denies and (bool(want & said) if want else bool(said))
        impact_quote = next((s for s in sentences for c in (want & said) or said
                             if any(w in s for w in IMPACT_CLASSES[c])), "absent")
        out["S3"] = (s3, _quote(impact_quote))

        return [ChecklistAnswer(id=q.id, dimension=q.dimension, question=q.text, answer=out[q.id][0],
                                evidence=out[q.id][1]) for q in QUESTIONS]
