"""What a diagnosis asserts, read clause by clause: the offline judge's reading of a text.

A diagnosis is cut into clauses (sentences, then at ';', ', but', ', not', 'whereas'); each clause is
committed, hedged ('possibly', 'either ... or', 'one of', 'candidates', a list of many components or
fault kinds) or exonerating ('ruled out', 'is healthy', 'not the cause'). Within a committed clause a
causal connective splits cause from effect ('A because B': B is the cause; 'A, so B': A is); a
component in a cause part is asserted as a root cause, one in an effect part or beside a downstream
word ('downstream', 'callers', 'victims') is a victim, one after a verb of reaching ('connect to',
'instead of') is only a target. A text that says its root cause is unknown or still being confirmed
asserts nothing.

    read_claims(text, names) -> Claims    # names: the component names the reader knows of

Every clause keeps its verbatim span of the original text, so an answer can quote it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from farm.oracles.vocabulary import KINDS, SYMPTOM_KINDS, families_of, kinds_in

# The words of the kinds' multi-word phrases ('exceeded quota'): a component's one-word alias among
# them is read as the fault word it also is.
_KIND_PHRASE_WORDS = {w for k in KINDS.values() for phrase in k.words if " " in phrase for w in phrase.split()}
# Words that make a clause a hedge: the author does not commit to what the clause names.
HEDGES = (r"\bpossibl[ey]\b", r"\bmight\b", r"\bmay (?:be|have|also)\b", r"\bcould (?:be|have|also)\b",
          r"\bperhaps\b", r"\bmaybe\b", r"\beither\b", r"\bone of\b", r"\bcandidates?\b", r"\bsuspects?\b",
          r"\bsuspected\b", r"\breviewed\b", r"\bconsidered\b", r"\bunder (?:review|investigation)\b",
          r"\binvestigating\b", r"\bpotential(?:ly)?\b", r"\bhypothes", r"\bguess\b", r"\bnot (?:yet )?sure\b",
          r"\bunsure\b", r"\bnot (?:yet )?(?:been )?confirmed\b", r"\bunconfirmed\b", r"\bstill being confirmed\b",
          r"\bto be (?:confirmed|determined)\b", r"\btbd\b", r"\band/or\b", r"\bany of\b", r"\bamong (?:the )?(?:candidates|suspects|possibilities|options)\b",
          r"\bsome combination\b", r"\bunclear\b", r"\bcannot (?:yet )?(?:tell|say)\b", r"\bwe think\b",
          r"\bit seems\b", r"\bseems? to\b", r"\bappears? to\b", r"\bpending confirmation\b",
          r"\bcheck(?:ed|ing)? (?:whether|if)\b", r"\bnot (?:yet )?(?:clear|known|determined|identified)\b", r"\?\W*$")
_HEDGE = re.compile("|".join(HEDGES))
# A text saying so commits to no root cause at all, whatever else it lists.
_DOUBT = re.compile(r"(?:root cause|the cause|culprit)[^.;]{0,60}?(?:still being confirmed|not (?:yet )?(?:been )?"
                    r"(?:confirmed|identified|determined|clear|known|found)|unclear|"
                    # 'unknown' of the cause, not of what the cause is about ('crash-loops on an unknown flag')
                    r"(?:is|are|was|remains?|still|yet|currently|otherwise|as yet)\s+unknown\b|unknown\s*(?:[.;,)]|$)|"
                    r"\bunknown (?:at this|so far|for now|yet)\b|undetermined|"
                    r"inconclusive|tbd|to be (?:confirmed|determined))|no clear root cause|"
                    r"could not (?:find|determine|identify) (?:a |the )?(?:clear )?(?:root )?cause|"
                    r"(?:cannot|can't|could not) (?:yet )?(?:determine|pinpoint|identify) (?:which|what|the)|"
                    r"need(?:s)? more (?:data|information|evidence) to (?:determine|identify|find|confirm)|"
                    r"\b(?:unclear|not (?:yet )?clear) whether\b[^.;]{0,60}?\b(?:the|a) (?:root )?cause\b")
# Words that clear what the clause names rather than blame it.
_EXONERATE = re.compile(r"\bnot (?:the )?(?:root )?(?:cause|culprit|problem|issue|origin)\b|\bnot at fault\b|"
                        r"\bnot responsible\b|\bnot to blame\b|\bnot involved\b|\b(?:is|are|was|were|looks?|"
                        r"seems?) (?:fine|ok|okay|healthy|normal|unaffected)\b|\bruled out\b|\bred herring\b|"
                        r"\bunrelated\b|\binnocent\b|\bnothing wrong with\b|\bexcluded\b|\bisn't (?:the )?"
                        r"(?:cause|problem|issue)\b|\bnot broken\b|(?<!not )(?<!un)\bhealthy\b|"
                        r"\b(?:isn't|is not|wasn't|was not|aren't|are not)\s+(?:the\s+)?(?:overloaded|crashing|failing|"
                        r"broken|down|saturated|throttled|starved|leaking|at fault|culprit)\b|\busage (?:is|was|looks) (?:low|normal|fine)\b")
# A component after these is what something else tried to reach, not a component blamed.
# ('this points to X' is the author's conclusion, not a reference that reaches X)
REACH = re.compile(r"(?:connect(?:ion)? to|connect with|reach|talk to|calls? to|dial(?:s|ing)?|"
                   r"(?<!this )(?<!that )(?<!which )(?<!it )(?<!all )(?<!everything )(?<!evidence )(?<!clearly )"
                   r"(?<!strongly )(?<!instead )points? (?:at|to)|"
                   r"pointing (?:at|to)|instead of|lookups? of|resolve|send(?:s|ing)? (?:traffic )?to|"
                   r"forwards? to|write to|read from|reads from|against|from its|to its|of its|on its|"
                   r"in front of|via|past|beyond|exceeding)\s+(?:the |its |a )?(?:\S+ ){0,1}$")
# 'A because B': B is the cause. 'A, so B': A is.
BACKWARD = re.compile(r"\bbecause(?: of)?\b|\bdue to\b|\bcaused by\b|\bstems? from\b|\btriggered by\b|"
                       r"\bresults? from\b|\bowing to\b|\bas a (?:result|consequence) of\b|\bdriven by\b")
FORWARD = re.compile(r",? so\b|\btherefore\b|\bwhich (?:makes|causes|breaks|means|leaves|starves)\b|\bcausing\b|"
                      r"\bleading to\b|\bresults? in\b|\bas a result\b|\band then\b|\bhence\b|\bthus\b|"
                      r"\bmaking\b|->|→|\bbreaking\b|\bwhich in turn\b|\bconsequently\b|\bwhereupon\b")
# Where the author names the cause outright: what follows is the cause.
ROOT_MARKER = _ROOT = re.compile(r"\broot[- ]?cause[sd]?\b\s*(?:is|are|was|:|=|-)?|\bculprit\b\s*(?:is|:)?|\bthe cause\b\s*(?:is|:)?|"
                   r"\bthe (?:problem|issue|fault|trigger) (?:is|was|:)|\bblame\b|\borigin(?:ates)?\b\s*(?:is|in|:)?|"
                   r"\bcause:\s*|"
                   # a diagnosis in fields ('Fault type: disk-io. Component: node/sim-worker2') names its culprit so
                   r"^\W*(?:faulty |culprit |root[- ]cause )?component\s*[:=]\s*")
# A cause named besides another: 'a separate bug', 'additionally', 'a second root cause'.
EXTRA_CAUSE = re.compile(r"\b(?:a |an )?(?:separate|independent|second|another|additional) (?:\w+ )?(?:bug|fault|"
                         r"problem|issue|root cause|cause|failure)\b|\badditionally\b|\balso needs fixing\b|\bindependently\b|"
                         r"\btwo (?:separate |independent )?(?:problems|faults|issues|root causes)\b|\band separately\b")
# Said of a component, these make it the one at fault even without a connective.
FAULTY = re.compile(r"\bat fault\b|\bfaulty\b|\bbottleneck\b|\bis the problem\b|\bdying\b|\bdegraded\b|\bmisconfigur|\bresponsible\b|\bis broken\b|\bthe source\b|"
                    r"\bwrong(?:ly)?\b|\bincorrect\b|\bbad\b|\binvalid\b|\bmissing\b|\bremoved\b|\bchanged\b|"
                    r"\bset to\b|\bis (?:set|pinned|rolled|scaled|capped|cut|limited)\b|\bdoes not exist\b|"
                    r"\bnonexistent\b|\bmistyped\b|\btypo\b|\bdenies\b|\bblocks?\b|\b(?:doesn't|does not|no longer) exists?\b|"
                    r"\b(?:was|were|got|been) (?:set|pinned|rolled|scaled|capped|cut|limited|lowered|raised|dropped|"
                    r"deleted|removed|changed|killed|restarted|rotated)\b|\bdropped\b|\bdeleted\b|\blost\b|\bcaps?\b|"
                    r"\blowered\b|\braised\b|\bcut to\b|\breplaced (?:by|with)\b|\boverwritten\b|\bswapped\b|\bno endpoints\b|\bexpired\b|\brefuses\b|\brejects\b|\bexceeds?\b|"
                    r"\b(?:has|have|sets?|uses?|runs?|carries|requests?|asks for|gained|starts with)\b[^,;]*?(?:=|\b\d|\bv\d)|"
                    r"\b(?:forwards?|points?|maps?|routes?|targets?|sends?)\b[^,;]{0,30}?\bport\b[^,;]*?\d|"
                    r"\bwith no (?:\w+ )?(?:server|listener|process)\b|\bnothing (?:is )?listen|\bdeny[- ]all\b|"
                    r"\b(?:delete|fix|remove|revert) (?:or \w+ )?(?:the|its)\b|"
                    r"\bis (?:on|enabled|at)\b|\bswitched on\b|"
                    # what changed: 'now exposes 27070 (was 27017)'
                    r"\(was\b|\bnow (?:exposes|points|uses|listens|runs|sets|serves|targets|requests|has|forwards)\b")
_DOWNSTREAM = re.compile(r"\bdownstream\b|\bcallers?\b|\bvictims?\b|\bsymptoms?\b|\bonly (?:fail|error|break)|"
                         r"\bfail(?:s|ing)? only\b|\bknock-on\b|\bcascad|\bsecondary\b|\bin turn\b|\bconsequence\b|"
                         r"\baffected\b|\bimpact(?:ed)?\b|\bas well\b|\bdependents?\b|\bupstream of\b|"
                         r"\bpropagat|\bbecause of it\b|\bfollow(?:s|ed)? from\b|\bon (?:that|the|this) node\b")
# Where a thing is, not what is wrong: 'underneath postgresql's data directory', 'the host running geo'.
_WHERE = re.compile(r"\b(?:underneath|beneath|hosting|(?:that|which) hosts?|(?:host|node) (?:running|that runs))\s+"
                    r"(?:the\s+)?$")
_ON_THE_NODE = re.compile(r"\bon (?:that|the|this) node\b")


def _downstream(text: str, comp: str) -> bool:
    """A downstream word in `text` that makes `comp` a victim: pods 'on that node' are, the node is not."""
    if comp.startswith("node/") or NODE_NAME.fullmatch(comp):
        text = _ON_THE_NODE.sub(" ", text)
    return bool(_DOWNSTREAM.search(text))


_CLAUSE = re.compile(r";\s*|,\s+and\s+(?=(?:the |its |a |an )?[\w.-]+'s\b|(?:it|they|the|a|an|also|separately)\b)|,\s+but\s+|\s+but\s+|,\s+(?=not\b)|\s+whereas\s+|\s+although\s+|\s+though\s+|\s+[—–]\s+")
# A cause part about a setting rather than a component: 'the flag X is on, so payment fails'.
_SETTING = re.compile(r"\bflags?\b|\bflagd\b|\bconfig|\bsetting\b|\benv\b|\bvariable\b|\bswitch\b|"
                      r"\bdefaultvariant\b|=|\bis (?:on|enabled)\b|\benabled\b|\bswitched on\b")
# What follows these is cleared, not blamed ('X rather than Y', 'X, not because of Y').
_CONTRAST = re.compile(r"\s+rather than\s+|\s+as opposed to\s+|,?\s+and not\s+(?=(?:a|an|the|in|on|at|because)\b)|"
                       r",?\s+not because of\s+|,?\s+not due to\s+|\s+instead of (?=(?:a|an)\s)", re.I)
# A ranked list of candidate causes commits to none of them, its first included.
_RANKED = re.compile("|".join((
    r"\b(?:second|third|next|other|less) (?:most )?likely\b", r"\bmost likely first\b", r"\branked\b",
    r"\bin (?:decreasing |descending )?order of (?:likelihood|probability|confidence)\b",
    r"\b(?:candidate|possible|potential) (?:root )?causes\b", r"\balternative (?:causes?|explanations?|hypothes[ie]s)\b",
    r"\bhypothes[ie]s\s*(?:\d|#|:)")))
_RANK_ITEM = re.compile("|".join((
    r"\blikely\b", r"\blikelihood\b", r"\bprobability\b", r"\bconfidence\b", r"^\W*(?:\d+[.):]|#\d|\(\w\))\s*",
    r"\bcandidate", r"\bhypothes", r"\balternative")))
# Investigation notes: without a root cause named, they commit to none.
_CLEARED_THEN = re.compile(r"(?:isn't|is not|wasn't|was not|aren't|are not|not)\s+(?:\w+\s+){0,3}?(?:at fault|the cause|"
                           r"the culprit|the problem|the issue|to blame|involved|responsible)\s*:\s+", re.I)
# An item of a list of candidates that says what became of it: ruled out, or confirmed.
_ITEM = re.compile(r"^\s*(?:\d+[.):]|[-*•]|#\d)\s+")
_ITEM_VERDICT = re.compile(r"(?P<no>\bruled out\b|\bexcluded\b|\brejected\b|\bunlikely\b|\?\s*(?:\*\*)?no\b|"
                           r"[—–:]\s*(?:\*\*)?no\b)|(?P<yes>\bconfirmed\b|\?\s*(?:\*\*)?yes\b|[—–:]\s*(?:\*\*)?yes\b)",
                           re.I)
_NOTES = re.compile(r"^\W*(?:still )?investigating\b|\bnotes so far\b|\bneeds? to (?:check|verify|confirm|look)\b|"
                    r"\bbefore concluding\b|\bnot (?:yet )?concluded\b|\bnext steps? (?:is|are|will be|:)?\s*(?:to )?(?:check|look|verify|"
                    r"confirm|inspect|investigate)|\bneeds? (?:more|further) investigation\b|\bno conclusion\b|"
                    r"\bfurther investigation (?:is )?(?:required|needed)\b|\bremains? unclear\b|\bunclear whether\b|"
                    r"\bneed(?:s)? more (?:data|information|evidence)\b")
# Markdown or 'Label:' headings; under those of evidence, timeline or fix, names are shown, not blamed.
_HEADING = re.compile(r"^[ \t]*(?:#{1,6}[^\n]*$|\*\*[^*\n]{2,40}\*\*:?|[A-Z][A-Za-z /()]{2,30}:[ \t]*$|"
                      r"(?:Observations?|Evidence|Symptoms?|Findings|Notes?|Timeline|Logs?|Metrics|Traces?|Impact|"
                      r"Fix|Recommended fix|Remediation|Next steps?|Ruled out|Root cause|Cause|Conclusion|Diagnosis|"
                      r"Mechanism|Summary|Affected(?: services| components| workloads)?)\s*:)", re.M)
_ROOTS_HEADING = re.compile(r"\broot causes?\b|\bcauses\b")
_CLEARED_HEADING = re.compile(r"ruled out|rule out|excluded|not the cause|non-causes|red herrings?|what it is not|"
                               r"what it isn't|healthy|innocent|eliminated|dismissed")
_EVIDENCE_HEADING = re.compile(r"evidence|observ|timeline|finding|investigat|logs?\b|metrics|traces?\b|symptom|"
                               r"impact|affected|recommend|fix|remediat|next step|mitigat|action|verification|signals|data")
# A component followed by these is quoted as a source of evidence.
_EVIDENCE_VERB = re.compile(r"[a-z0-9.:/'-]*(?:\s*\([^)]*\))?\s+(?:own\s+)?(?:(?:traces?|logs?|metrics|spans?|"
                            r"events?|dashboards?|status|output)\s+)?(?:logs?|shows?|showed|reports?|reported|says|said|"
                            r"prints?|emits?|records?|lists?|displays?|confirms?)\b(?!\s+(?:no|nothing)\b)")
_NEGATED = re.compile(r"\b(?:not|isn't|aren't|wasn't|weren't|never|without|no sign of|no evidence of|nothing points to|"
                      r"rules? out|ruled out|rather than)\s+(?:(?:a|an|the|any|really|its|their)\s+)?[\w/-]+(?:\s+[\w/-]+)?")
# A component named as the source of the data quoted ('jaeger traces of /hotels show ...').
_SOURCE = re.compile(r"[a-z0-9.:/'-]*\s+(?:traces?|logs?|metrics|spans?|dashboards?|queries|query|ui|graphs?)\b")
QUOTED = re.compile(r"\([^()]*\)|(?<![a-z0-9])'[^']{3,}'(?![a-z0-9])|\"[^\"]{3,}\"")
# A root cause stated as the cluster's own shortfall, not any object of the application's.
_INFRA_CAUSE = re.compile(r"\W*(?:the |an? )?(?:insufficient |not enough |lack of |limited |exhausted )?(?P<what>"
                          r"(?:cluster|node pool|nodes?'?)(?:'s)? (?:capacity|resources|cpu|memory)|cluster|"
                          r"(?:container |image |docker )?registry|docker hub)\b")
_PART = re.compile(r",\s*|\s+and\s+|\s+with\s+|\s+while\s+")
# Pod states: what a component shows, not what is wrong with it.
_STATUS = re.compile(r"\b(?:pending|crashloopbackoff|imagepullbackoff|errimagepull|terminating|unknown|evicted|"
                     r"containercreating|init:\S+|not ready|notready|oomkilled|completed|error|running|\d+/\d+)\b")
_FAILS = re.compile(r"\bpending\b|\bimagepullbackoff\b|\berrimagepull\b|\bterminating\b|\bevicted\b|\bcrash|\bfail|\berror|\brestart|\bdown\b|\bslow|\b5\d\d\b|\btim(?:es|ed|ing)? ?out|"
                    r"\bunavailable\b|\bpanic|\bhangs?\b|\bstall")
_PRONOUN = re.compile(r"^\W*(?:\S+\s+){0,2}(?:its|their|it|they|the pods?'s?|the container's)\b")
_SEGMENT = re.compile(r",\s*|\s+with\s+|\s+while\s+|\s+and\s+(?=(?:the )?(?:\S+ ){0,3}(?:downstream\b|callers?\b|only\b|propagat))")
_SENTENCE = re.compile(r"(?<=[^.][.!?])\s+(?=\S)|\n+|(?<=:)\s+(?=-)")
KIND_WORDS = ("deployment", "deploy", "service", "svc", "pod", "pods", "node", "configmap", "secret", "statefulset",
              "daemonset", "replicaset", "container", "networkpolicy", "resourcequota", "tidbcluster")
NODE_NAME = re.compile(r"(?<![a-z0-9-])(?:[a-z][a-z0-9]*-)+(?:worker\d*|control-plane)(?![a-z0-9-])")
# Hyphenated English that is not a component name (crash-loops, out-of-memory).
COMMON_HYPHEN_PARTS = {"crash", "loop", "loops", "looping", "back", "off", "backoff", "out", "of", "memory", "read",
                       "only", "write", "up", "to", "date", "well", "known", "self", "non", "re", "timed", "end",
                       "multi", "cross", "high", "low", "level", "side", "client", "server", "long", "short", "in",
                       "on", "knock", "so", "called", "per", "second", "minute", "time", "e", "g", "i", "x", "user",
                       "visible", "facing", "wide", "free", "based", "bound", "like", "grained", "run", "away",
                       "pre", "post", "by", "fail", "fast", "safe", "open", "loaded", "term", "half", "all", "full"}
# Hyphenated fault words a component name is not made of ('out-of-memory', 'file-descriptor').
_KIND_HYPHEN_WORDS = COMMON_HYPHEN_PARTS | {"file", "descriptor", "descriptors", "anti", "affinity", "pid", "fd",
                                            "disk", "oom", "killed", "io", "gc", "dev", "mode", "feature", "flag",
                                            "command", "line", "retry", "storm", "node", "cpu", "mem", "soft"}
NOT_NAMES = {"the", "a", "an", "this", "that", "its", "each", "every", "one", "which", "whole", "same", "other",
             "k8s", "kubernetes", "backend", "upstream", "downstream", "affected", "faulty", "healthy", "new", "old",
             "failing", "broken", "target", "calling", "called", "dependent", "all", "some", "any", "no", "to", "of",
             "in", "on", "for", "and", "or", "is", "are", "was", "by", "with", "his", "their", "app", "application",
             "web", "api", "main", "primary", "headless", "default", "kube-system", "namespace", "running",
             "crashing", "restarted", "pending", "ready", "wrong", "bad", "missing", "database", "db", "backing",
             "single", "whose", "first", "second", "last", "only", "replacement", "stuck", "another",
             "her", "our", "my", "your", "these", "those", "both", "many", "few", "that's", "own", "test", "real"}
DATA_STORES = ("mongo", "redis", "memcached", "mysql", "postgres", "tidb", "kafka", "etcd", "cassandra", "valkey")
# Single-word component names that are also ordinary words in these phrases.
_WORD_USES = re.compile(r"(?:error|success|request|failure|retry|drop|loss|hit|miss|sample|exchange|heart|frame|"
                        r"bit|baud|refresh|sampling) rate\b|\brate (?:limit|of)\b|\bfor user\b|\bdb user\b|"
                        r"\buser (?:root|name|otelu|\"|')|\bmemory profile\b|\bhotel search\b|\bsearch(?:es)? for\b|"
                        r"\ban ad\b|\bthe user\b(?![- ]service| deployment| pod| server|'s|-)|\buser(?:'s)? (?:session|login|request)")


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def aliases(component: str) -> set[str]:
    """The names a component goes by: itself, without its kind prefix, with spaces for hyphens."""
    c = component.lower().strip()
    out = {c}
    if " " in c:  # a description ('hotel-reservation image tag sha-0badc0de (geo, rate, profile)'): its identifiers
        words = re.findall(r"[a-z0-9][a-z0-9.:-]*[a-z0-9]", c)
        out |= {w for i, w in enumerate(words) if re.search(r"\d|-", w) or (i and words[i - 1] == "tag")}
    if "/" in c:
        out.add(c.split("/", 1)[1])
    if c.startswith("node/") and "." in c:  # a node goes by its host name as well ('ip-10-0-2-88')
        host = c.split("/", 1)[1].split(".", 1)[0]
        if re.search(r"\d", host) and "-" in host:
            out.add(host)
    out |= {a.replace("-", " ") for a in list(out) if "-" in a}
    return {a for a in out if a}


# Kubernetes' suffixes of a workload's ReplicaSet and pod names ('geo-7c9d5b8f4-q8wzt', 'mongodb-0'):
# a hash in its alphabet (no vowels, so no English word), or anything with a digit.
POD_SUFFIX = r"(?:-(?:[a-z0-9]*\d[a-z0-9]*|[bcdfghjklmnpqrstvwxz2456789]{5,10})){0,2}"


def _name_pattern(name: str) -> str:
    # a pod name with its hash suffix counts; 'geo' inside 'mongodb-geo' or 'geo-db' does not
    return r"(?<![a-z0-9_-])" + re.escape(name) + POD_SUFFIX + r"(?![a-z0-9_]|-[a-z])"


def mentions(text: str, names: set[str]) -> bool:
    return any(re.search(_name_pattern(n), text) for n in names)


def _mention_at(text: str, names: set[str]) -> int | None:
    hits = [m.start() for n in names for m in re.finditer(_name_pattern(n), text)]
    return min(hits) if hits else None


@dataclass
class Clause:
    """One clause: its verbatim span, its lowercased text and how the author holds it."""

    quote: str
    text: str
    hedged: bool = False
    exonerating: bool = False
    explicit: bool = False  # carries a root-cause marker or a causal connective
    backward: bool = False  # 'A because B': the cause comes last
    evidence: bool = False  # under a heading of evidence, timeline or fix: shows, does not blame
    cause: str = ""  # the part that names the cause ('' when the clause has no causal structure)
    effect: str = ""


@dataclass
class Claims:
    clauses: list[Clause]
    doubt: str = ""  # the span where the author says the root cause is unknown
    # component -> role -> quotes: roles are asserted, hedged, victim, target, exonerated, mentioned
    roles: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def quote_for(self, component: str, role: str) -> str:
        return next(iter(self.roles.get(component, {}).get(role, [])), "")

    def has(self, component: str, role: str) -> bool:
        return bool(self.roles.get(component, {}).get(role))

    @property
    def committed(self) -> list[Clause]:
        return [c for c in self.clauses if not c.hedged and not c.exonerating]


def split_clauses(text: str) -> list[tuple[str, int]]:
    """Clauses of `text` as (verbatim span, start offset)."""
    out: list[tuple[str, int]] = []

    def pieces(span: str, start: int, pattern: re.Pattern[str]) -> list[tuple[str, int]]:
        got, last = [], 0
        for m in pattern.finditer(span):
            got.append((span[last:m.start()], start + last))
            last = m.end()
        got.append((span[last:], start + last))
        return got

    sentences: list[tuple[str, int]] = []
    for sentence, s0 in pieces(text, 0, _SENTENCE):
        if sentences and re.fullmatch(r"\s*(?:\d+|[a-z])[.)]", sentences[-1][0]):  # '1.' opens the item after it
            sentences[-1] = (text[sentences[-1][1]:s0 + len(sentence)], sentences[-1][1])
        else:
            sentences.append((sentence, s0))
    for sentence, s0 in sentences:
        for clause, c0 in pieces(sentence, s0, _CLAUSE):
            stripped = clause.strip().rstrip(".")
            if len(stripped) >= 2:
                out.append((stripped, c0 + clause.find(stripped[:1])))
    return out


class Reader:
    """Reads diagnoses against a fixed set of component names (the ground truth's and the app's)."""

    def __init__(self, names: dict[str, set[str]], gt: Iterable[str] = (),
                 shaped: bool = True, refs: dict[str, re.Pattern[str]] | None = None) -> None:
        self.names = names  # component -> its aliases
        # masked out before fault words are read: names, but not a kind's name ('quota', 'resourcequota')
        # nor a word of a kind's phrases: 'quota' is compute-resources' alias, and 'exceeded quota' a fault
        every = sorted({a for al in names.values() for a in al if a and ("-" in a or not kinds_in(a))
                        and not ((" " not in a and "-" not in a) and a in _KIND_PHRASE_WORDS)}, key=len, reverse=True)
        self._all_names = re.compile("|".join(_name_pattern(a) for a in every)) if every else None
        self.gt = set(gt)
        # how a text refers to a component by its kind alone ('the Service'), once it has named it
        self.refs = refs or {}  # the components the ground truth names (a list of those is no stuffing)
        # without the application's names, names shaped like components (hyphenated ids) stand in
        self.shaped = shaped

    def _components_in(self, text: str) -> dict[str, int]:
        """Components named in `text` and where; names of the reader plus names shaped like
        components (kind/x, x service, hyphenated ids, node names)."""
        found: dict[str, int] = {}
        masked = _WORD_USES.sub(lambda m: " " * len(m.group(0)), text)
        for comp, al in self.names.items():
            at = _mention_at(masked, al)
            if at is not None:
                found[comp] = at
        kinds = "|".join(KIND_WORDS)
        # 'deployment/x' names an object; 'pod anti-affinity' names one only if the inventory knows it
        shaped = [(m.start(3), m.group(3)) for m in
                  re.finditer(rf"\b({kinds})(/| )([a-z][a-z0-9.-]*[a-z0-9])", text)
                  if m.group(2) == "/" or (re.search(r"[-\d]", m.group(3))
                                           and (self.shaped or self.known_as(m.group(3))))]
        # a node name given as a label's value ('hostname=sim-worker9') is what a selector asks for, not a node
        shaped += [(m.start(), m.group(0)) for m in NODE_NAME.finditer(text) if not text[:m.start()].endswith("=")]
        if self.shaped:
            shaped += [(m.start(1), m.group(1)) for m in re.finditer(rf"\b([a-z][a-z0-9-]*-[a-z0-9-]*[a-z0-9]) "
                                                                      rf"(?:{kinds})\b", text)]
            shaped += [(m.start(1), m.group(1)) for m in
                       re.finditer(r"(?<![a-z0-9./_-])([a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?![a-z0-9_/.-])", text)]
        shaped = [(at, n) for at, n in shaped if not set(n.split("-")) & COMMON_HYPHEN_PARTS]
        for at, name in shaped:
            known = self.known_as(name)
            if known:
                found.setdefault(known, at)
                continue
            if name in NOT_NAMES:
                continue
            if any(name != other and name in other for _, other in shaped):
                continue  # 'worker' inside 'sim-worker'
            found.setdefault(name, at)
        return found

    def known_as(self, name: str) -> str | None:
        """The reader's component that `name` names: itself, a pod of it (hash suffix), or its
        container named with an app prefix (hotel-reserv-geo for geo), but not a data store named
        after it (mongodb-geo is another component than geo)."""
        for comp, al in self.names.items():
            if name in al or mentions(name, al):
                return comp
        for comp, al in self.names.items():
            for a in al:
                if name.endswith("-" + a) and not any(db in name[: -len(a) - 1] for db in DATA_STORES):
                    return comp
        return None

    def mask_names(self, text: str) -> str:
        """`text` without the component names the reader knows."""
        return self._all_names.sub(" ", text) if self._all_names else text

    def families_in(self, text: str) -> set[str]:
        """Fault kinds (farm.oracles.vocabulary) whose words the text uses outside component names
        (post-storage-service is no storage fault), and outside hyphenated identifiers."""
        masked = self._all_names.sub(" ", text) if self._all_names else text
        masked = _NEGATED.sub(" ", masked)  # 'the llm pod isn't overloaded' claims no overload
        masked = re.sub(r"[a-z0-9]+(?:_[a-z0-9]+)+", " ", masked)  # metric and variable names: evidence
        # label and taint keys (node-role.kubernetes.io/control-plane) are identifiers, not fault words
        masked = re.sub(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+/[a-z0-9._-]*", " ", masked)
        masked = re.sub(r"[a-z0-9]+(?:-[a-z0-9]+)*-[a-z0-9]*\d[a-z0-9]*", " ", masked)  # ids: srv-geo-7c9d5
        if self.shaped:  # without the inventory, any hyphenated name may be a component
            masked = re.sub(r"(?<![a-z0-9])[a-z][a-z0-9]*(?:-[a-z0-9]+)+", lambda m: m.group(0) if set(
                m.group(0).split("-")) <= _KIND_HYPHEN_WORDS else " ", masked)
        return kinds_in(masked)

    def read(self, diagnosis: str, evidence_sections: bool = True) -> Claims:
        """With evidence_sections False, no heading makes its clauses evidence: a text whose every
        conclusion sits under 'Findings' has no other place where it blames."""
        claims = Claims(clauses=[])
        doubt = _DOUBT.search(norm(diagnosis))
        if doubt:
            claims.doubt = doubt.group(0)
        ranked = bool(_RANKED.search(norm(diagnosis)))
        if not claims.doubt and not _ROOT.search(norm(diagnosis)):
            notes = _NOTES.search(norm(diagnosis))  # investigation notes that name no cause commit to none
            claims.doubt = notes.group(0) if notes else ""
        sections = [(m.start(), "cleared" if _CLEARED_HEADING.search(m.group(0).lower()) else
                     "evidence" if _EVIDENCE_HEADING.search(m.group(0).lower()) else
                     "roots" if _ROOTS_HEADING.search(m.group(0).lower())
                     and not diagnosis[m.end():].split("\n", 1)[0].strip() else "")
                    for m in _HEADING.finditer(diagnosis)]
        whole = norm(diagnosis)
        refs = [(p, comp) for comp, p in self.refs.items() if mentions(whole, self.names.get(comp, {comp}))]
        for quote, cleared, at in _contrasted(split_clauses(diagnosis)):
            line = diagnosis[diagnosis.rfind("\n", 0, at) + 1:(diagnosis + "\n").find("\n", at)]
            verdict = _ITEM_VERDICT.search(line) if _ITEM.match(line) else None
            cleared = cleared or bool(verdict and verdict.lastgroup == "no")
            picked = bool(verdict and verdict.lastgroup == "yes")
            text = self._calls_as_calls(norm(self._by_ref(quote, refs)))
            clause = Clause(quote=quote, text=text)
            section = next((kind for start, kind in reversed(sections) if start <= at), "")
            clause.evidence = section == "evidence" and evidence_sections
            cleared = cleared or section == "cleared"
            clause.cause, clause.effect = _cause_and_effect(text)
            clause.explicit = bool(clause.cause or clause.effect)
            back, fwd = BACKWARD.search(text), FORWARD.search(text)
            clause.backward = (clause.explicit and not _ROOT.search(text) and back is not None
                               and (fwd is None or back.start() < fwd.start()))
            comps = self._components_in(text)
            # Hedges and lists are read where the clause names its cause (a list of victims is fine).
            where = clause.cause if clause.explicit else text
            named = [c for c in comps if self._in(where, c)]
            fams = families_of(self.families_in(where))
            # a run of names under an impact or evidence heading lists what fails, not candidates
            listed = len(set(named) - self.gt) >= 2 and _run_of_names(where, [comps[c] for c in named]) >= 4 \
                and not _DOWNSTREAM.search(where) and section != "evidence"
            alternatives = " or " in f" {where} " and (len(named) >= 2 or len(fams) >= 2)
            clause.exonerating = cleared or bool(_EXONERATE.search(text))
            clause.hedged = (bool(_HEDGE.search(text)) or listed or alternatives or bool(claims.doubt)
                             or (len(fams) >= 4 and where.count(",") >= 3)  # a list of fault kinds
                             or (ranked and bool(_RANK_ITEM.search(text)))) and not (picked and not _HEDGE.search(text))
            claims.clauses.append(clause)
            # an item of a list headed 'Root causes:' blames the component it starts with
            listed_root = (section == "roots" and bool(_ITEM.match(quote)) and not clause.hedged
                           and not clause.exonerating and bool(comps))
            first = min(comps, key=lambda c: comps[c]) if listed_root else None
            for comp, at in comps.items():
                role = "asserted" if comp == first else self._role(clause, comp, at, text)
                claims.roles.setdefault(comp, {}).setdefault(role, []).append(quote)
            infra = _INFRA_CAUSE.match(clause.cause) if clause.explicit and _ROOT.search(text) else None
            if infra and not clause.hedged and not clause.exonerating \
                    and not any(self._in(clause.cause, c) for c in comps):
                # 'Root cause: insufficient cluster capacity' blames the cluster, a healthy object
                claims.roles.setdefault(f"the {infra.group('what')}", {}).setdefault("asserted", []).append(quote)
        self._lead(claims)
        if evidence_sections and not claims.doubt and any(c.evidence for c in claims.clauses) \
                and not any(r.get("asserted") or r.get("implicated") for r in claims.roles.values()):
            return self.read(diagnosis, evidence_sections=False)
        return claims

    @staticmethod
    def _by_ref(quote: str, refs: list[tuple[re.Pattern[str], str]]) -> str:
        # inside quoted output ('`the node was low on resource`') the words are the system's, not a
        # reference of the author's
        parts = re.split(r"(`[^`]*`)", quote)
        for pattern, comp in refs:
            parts = [p if p.startswith("`") else pattern.sub(f"the {comp} ", p).replace(f"the {comp} 's", f"the {comp}'s")
                     for p in parts]
        return "".join(parts)

    def _quoted_output(self, quote: str, comp: str) -> bool:
        """Every mention of `comp` in `quote` is inside a code span that quotes more than a name."""
        spans = [m for m in re.finditer(r"`([^`]+)`", quote) if " " in m.group(1).strip()]
        if not spans or comp not in self.names:
            return False
        low = quote.lower()
        hits = [m.start() for a in self.names[comp] for m in re.finditer(_name_pattern(a), low)]
        return bool(hits) and all(any(sp.start() < h < sp.end() for sp in spans) for h in hits)

    def _calls_as_calls(self, text: str) -> str:
        """'search -> geo' between two components is a call, not a consequence."""
        if "->" not in text and "→" not in text:
            return text

        def edge(m: re.Match[str]) -> str:
            return m.group(1) + " calls " if self.known_as(m.group(1)) and self.known_as(m.group(2)) \
                else m.group(0)
        # each hop of a chain 'a -> b -> c' is a call: the next name is looked at, not consumed
        return re.sub(r"([a-z][a-z0-9-]*)\s*(?:->|→)\s*(?=([a-z][a-z0-9-]*))", edge, text)

    @staticmethod
    def resolve(claims: Claims, roots: Iterable[str]) -> None:
        """Implicated components are blamed only when the text blames none of `roots` (the ground
        truth's root components): beside a named cause they are the failure propagating."""
        blamed = any(claims.has(r, "asserted") or claims.has(r, "implicated") for r in roots)
        # a text that names another root cause outright ('Root cause: payment is unreachable') makes a
        # ground-truth root it only implicates ('checkout crash-loops because...') a victim too
        named_other = any(comp not in roots and any(_ROOT.search(norm(q)) for q in roles.get("asserted", []))
                          for comp, roles in claims.roles.items())
        for comp, roles in claims.roles.items():
            weak = roles.pop("implicated", [])
            if weak:
                blame = (comp in roots and not named_other) or not blamed
                roles.setdefault("asserted" if blame else "victim", []).extend(weak)

    def _lead(self, claims: Claims) -> None:
        """A terse diagnosis states its culprit first without saying 'root cause' ('memcached-rate has
        no endpoints. rate panics.'): when nothing is asserted, the first component of the first
        committed clause is, if that clause names it as the subject of what is wrong. Components only
        said to fail later ('profile's cache misses can't reach the DB') do not outrank it: the text
        may have opened with its culprit and gone on to the failure propagating."""
        if claims.doubt or any(r.get("asserted") for r in claims.roles.values()):
            return
        first = next((c for c in claims.clauses if not c.hedged and not c.exonerating), None)
        if first is None or _DOWNSTREAM.search(first.text):
            return
        named = sorted(((at, comp) for comp, at in self._components_in(first.text).items()), key=lambda x: x[0])
        if not named or named[0][0] > 40 or REACH.search(first.text[:named[0][0]]):
            return
        comp = named[0][1]
        roles = claims.roles[comp]
        if roles.get("exonerated"):  # 'the geo spec itself looks fine'
            return
        for role in ("mentioned", "victim"):
            if first.quote in roles.get(role, []):
                roles[role].remove(first.quote)
        # beside components that only sit where a cause goes, the lead is one of them: which is the
        # culprit and which the failure propagating is for resolve to say
        weak = any(r.get("implicated") for r in claims.roles.values())
        roles.setdefault("implicated" if weak else "asserted", []).insert(0, first.quote)

    def _role(self, clause: Clause, comp: str, at: int, text: str) -> str:
        """The component's role in the clause. 'implicated' is a weak 'asserted': the component sits
        where a cause goes, but its own part says only that it fails ('checkout can't publish, so
        accounting stalls'); whether that blames it depends on the rest of the text (resolve)."""
        role = self._role_by_position(clause, comp, at, text)
        if role != "asserted":
            return role
        if self._quoted_output(clause.quote, comp):
            return "mentioned"  # inside a quoted log line, command or trace
        if (_EVIDENCE_VERB.match(text[at:at + 120]) or _SOURCE.match(text[at:at + 60])) and not _ROOT.search(text):
            return "mentioned"  # 'tidb-controller-manager logs ...', 'jaeger traces show ...'
        near = next((p for p in _PART.split(text) if self._in(p, comp)), text)
        near = _STATUS.sub(" ", re.sub(r"`[^`]*\s[^`]*`", " ", near))  # pod states and quoted output show
        # an error quoted in parentheses or quotes ('calls fail (Invalid method name)') is what the
        # component shows, not what is wrong with it
        near = QUOTED.sub(" ", near)
        strong = (_ROOT.search(text) or EXTRA_CAUSE.search(text) or FAULTY.search(near)
                  or self.families_in(near) - SYMPTOM_KINDS)
        return "asserted" if strong else "implicated"

    def _role_by_position(self, clause: Clause, comp: str, at: int, text: str) -> str:
        if clause.exonerating:
            return "exonerated"
        if clause.hedged:
            # 'it seems to point at valkey-cart:6380': what a hedged clause says was reached is not
            # a cause hedged over
            possessive = bool(re.match(r"[a-z0-9.:/-]*'s\b", text[at:at + 80].split(" ", 1)[0] + " "))
            return "target" if REACH.search(text[max(0, at - 40):at]) and not possessive else "hedged"
        if clause.evidence and not _ROOT.search(text):
            return "mentioned"  # what an evidence section shows is not what the author blames
        opened = text.rfind("(", 0, at)
        closed = text.find(")", at)
        example = opened > text.rfind(")", 0, at) and (len(text[opened:closed if closed > 0 else None].split()) <= 8
                                                       or re.search(r"\b(?:among|e\.g\.|including|such as)\b", text[opened:]))
        if example and (
                any(a < at for c, a in self._components_in(text).items() if c != comp)
                or re.search(r"\b(?:pods|services|workloads|deployments|them|those|these)(?: there| on it| here)?\s*$", text[:opened])):
            return "mentioned"  # '... its pods (geo among them) are evicted': an example, not the culprit
        if re.search(r"\b(?:such as|e\.g\.|for example|including|like)\s+(?:the\s+)?$", text[max(0, at - 20):at]):
            return "mentioned"
        if _WHERE.search(text[max(0, at - 30):at]):
            return "mentioned"  # 'disk errors on sim-worker2 underneath postgresql's data directory': a place
        possessive = bool(re.match(r"[a-z0-9.:/-]*'s\b", text[at:at + 80].split(" ", 1)[0] + " "))
        if REACH.search(text[max(0, at - 40):at]) and not possessive:
            # what was reached failing is the cause: 'FailedCreate because the call to the webhook times out'
            in_cause = clause.backward and self._mentioned_in(clause.cause, comp) and _FAILS.search(clause.cause)
            return "implicated" if in_cause else "target"
        own = next((p for p in _PART.split(text) if self._in(p, comp)), text)
        # a downstream word elsewhere in the clause ('ping from a pod on that node') is not about it
        if possessive and not _downstream(QUOTED.sub(" ", own), comp) and self._subject(clause, comp):
            return "asserted"  # "geo's GEO_DB_PORT is 27018", "node sim-worker2's clock is 8 years ahead"
        if clause.cause or clause.effect:
            # the cause part may still list victims: 'root cause: geo, with search failing downstream'
            segment = next((s for s in _SEGMENT.split(clause.cause) if self._in(s, comp)), "")
            if segment and not _downstream(segment, comp):
                return "asserted"
            if clause.backward and self._in(clause.effect, comp) and not segment and _PRONOUN.search(clause.cause) \
                    and not _downstream(clause.effect, comp) and not _downstream(clause.cause, comp):
                return "asserted"  # 'geo crash-loops because its port is wrong': 'its' is geo
            if self._in(clause.effect, comp) and not segment and not _downstream(clause.effect, comp) \
                    and self._subject(clause, comp):
                return "asserted"  # 'the flag adManualGc is on, so every GetAds runs full GCs in ad'

            if segment or self._in(clause.effect, comp):
                return "victim"
        if _downstream(text, comp):
            return "victim"
        # a fault named elsewhere in the clause is not this component's when its own part says it only
        # fails ('threads cannot be created and ts-travel-service crash-loops')
        near = next((p for p in _PART.split(text) if self._in(p, comp)), text)
        if FAULTY.search(text) or (self.families_in(text) and (self.families_in(near) or not _FAILS.search(near))):
            return "asserted"
        return "mentioned"

    def _subject(self, clause: Clause, comp: str) -> bool:
        """`comp` is what the clause's cause part (or the whole clause) is about: named within its first
        words, or first in an effect part whose cause names no component ('flag X is on, so payment fails')."""
        head = clause.cause if clause.explicit and clause.cause.strip() else clause.text
        at = self._at(head, comp)
        if at is not None and at <= 40:
            return True
        if clause.explicit and _SETTING.search(clause.cause) and not any(self._in(clause.cause, c) for c in self.gt):
            named = sorted((self._at(clause.effect, c), c) for c in self._components_in(clause.text)
                           if self._at(clause.effect, c) is not None)
            return bool(named) and named[0][1] == comp
        return False

    def _mentioned_in(self, part: str, comp: str) -> bool:
        """`comp` named in `part`, as a target or otherwise."""
        at = self._at(part, comp)
        return at is not None and at >= 0

    def _at(self, part: str, comp: str) -> int | None:
        if comp in self.names:
            return _mention_at(_WORD_USES.sub(lambda m: " " * len(m.group(0)), part), self.names[comp])
        return part.find(comp) if comp in part else None

    def _in(self, part: str, comp: str) -> bool:
        if not part:
            return False
        if comp in self.names:
            masked = _WORD_USES.sub(lambda m: " " * len(m.group(0)), part)
            if mentions(masked, self.names[comp]):
                if REACH.search(part[:max(0, _mention_at(masked, self.names[comp]) or 0)][-40:]):
                    return False
                return True
            return False
        return comp in part


def _contrasted(clauses: list[tuple[str, int]]) -> list[tuple[str, bool, int]]:
    """Clauses (span, cleared, offset) with what a contrast clears cut off as clauses of their own:
    'a bug in the build rather than a misconfiguration of geo' blames the build and clears geo's
    configuration; 'not mongodb-rate: its CPU limit...' clears mongodb-rate only."""
    out: list[tuple[str, bool, int]] = []
    for quote, at in clauses:
        cleared = _CLEARED_THEN.search(quote)
        if cleared:  # 'the provisioner isn't at fault: TidbCluster basic sets ...'
            out.append((quote[:cleared.end()].rstrip(": "), True, at))
            quote = quote[cleared.end():]
        parts = _CONTRAST.split(quote)
        head = re.match(r"(not\s+[^:—]+?)\s*(?::|—|\s-\s)\s*(\S.*)$", parts[0], re.I | re.S)
        if head:
            out += [(head.group(1), True, at), (head.group(2), False, at)]
        else:
            out.append((parts[0], bool(re.match(r"not\s", parts[0], re.I)), at))
        for part in parts[1:]:
            # what is cleared ends where a colon opens the author's account ('points to frontend rather
            # than to any backend: frontend's env has X=true')
            cleared_part, colon, account = part.partition(": ")
            out += [(p.strip(), not i, at) for i, p in enumerate((cleared_part, account) if colon else (part,))
                    if len(p.strip()) >= 2]
    return out


def _run_of_names(text: str, starts: list[int]) -> int:
    """The longest run of names in `text` (given where each starts) separated only by commas, 'and'
    or 'or': a list of candidates rather than a sentence about them."""
    best = run = 0
    last_end = None
    for at in sorted(set(starts)):
        if at < 0 or at >= len(text):
            continue
        end = at + len(re.match(r"[a-z0-9./:'-]*", text[at:]).group(0))  # type: ignore[union-attr]  # * always matches
        if last_end is not None and _LIST_GAP.match(text[last_end:at]):
            run += 1
        else:
            run = 1
        best, last_end = max(best, run), end
    return best


_LIST_GAP = re.compile(r"^(?:[\s,;/&()]|\band\b|\bor\b|\bthe\b|\bservices?\b|\bdeployments?\b|\bpods?\b)*$")


def _cause_and_effect(text: str) -> tuple[str, str]:
    """The part of a clause that names the cause and the part that names its effect; both empty
    when the clause has no causal structure."""
    root = _ROOT.search(text)
    back = BACKWARD.search(text, root.end() if root else 0)
    fwd = FORWARD.search(text, root.end() if root else 0)
    if root:
        before, after = text[:root.start()], text[root.end():]
        if after.lstrip().startswith("of "):  # 'X is the root cause of Y failing'
            return before, after
        if fwd and (not back or fwd.start() < back.start()):  # 'root cause: X, so Y fails'
            return before + " " + text[root.end():fwd.start()], text[fwd.end():]
        return before + " " + after, ""  # 'root cause: X because Y': X and Y
    first = min((m for m in (back, fwd) if m), key=lambda m: m.start(), default=None)
    if first is None:
        return "", ""
    if first is back:  # 'A because B' ('A because B, so C': C is an effect too)
        later = FORWARD.search(text, first.end())
        if later:
            return text[first.end():later.start()], text[:first.start()] + " " + text[later.end():]
        return text[first.end():], text[:first.start()]
    return text[:first.start()], text[first.end():]  # 'A, so B'
