"""astronomy-shop (the OpenTelemetry demo 2.2.0) as a call graph: the services of the
`ghcr.io/open-telemetry/demo:2.2.0-<service>` images behind the Envoy frontend-proxy, the env vars
that link them, the gRPC/HTTP operations each serves and calls (PlaceOrder's order of work, the
Kafka `orders` topic and its two consumer groups), the Locust task mix, and the flagd feature
flags as the services evaluate them (paymentFailure, adHighCpu, kafkaQueueProblems, ...).
Facts: ../shared/reference/applications.md §3."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from apps.topology import load_topology
from kubesim.apps.callgraph import CallGraphFlow, GraphHooks, OpEffect
from kubesim.apps.flagd import flag_value
from kubesim.apps.graph import (
    AppGraph,
    Call,
    Service,
    declared_routes,
    declared_service,
    graph_app,
    image_suffix,
)
from kubesim.apps.reqfilter import free_share

DEMO = "ghcr.io/open-telemetry/demo"
MiB = 2**20

G = "oteldemo."
# the operations the hooks below act on (the rest: apps/astronomy-shop/topology.yaml)
CATALOG_GET, CART_EMPTY = G + "ProductCatalogService/GetProduct", G + "CartService/EmptyCart"
PLACE_ORDER, CHARGE = G + "CheckoutService/PlaceOrder", G + "PaymentService/Charge"
RECOMMEND, GET_ADS = G + "RecommendationService/ListRecommendations", G + "AdService/GetAds"
ASK_AI = G + "ProductReviewService/AskProductAIAssistant"
PRODUCTS = ("OLJCESPC7Z", "66VCHSJNUP", "1YMWWN1N4O", "L9ECAV7KIM", "2ZYFJ3GM2N", "0PUK6V6EV0", "LS4PSXUNUM",
            "9SIQT8TOJO", "6E92ZMYYFZ", "HQTGWGPNH4")


TOPOLOGY = load_topology("astronomy-shop")  # services, calls, peers and the Locust mix: apps/astronomy-shop/


AD_BUSY_THREADS = 4  # adHighCpu's worker threads in AdService.java
SET_NS_PER_ID = 40.0  # CPython's set() over a list of str references, per element

# The load generator's customers (locustfile people.json): card expiry (month, year, last four digits).
CARDS = ((1, 2030, "0454"), (3, 2031, "1739"), (6, 2032, "8822"), (1, 2033, "4402"), (11, 2034, "0910"),
         (1, 2035, "7764"), (5, 2036, "3355"), (1, 2037, "2198"), (8, 2038, "6071"), (1, 2039, "5513"))


def _svc(name: str, language: str, **behaviour: Any) -> Service:
    return declared_service(TOPOLOGY.services[name], language, **behaviour)


SERVICES: dict[str, Service] = {s.name: s for s in (
    _svc("frontend-proxy", "envoy", cpu=0.00015, latency=0.0004, memory=28 * MiB, memory_per_rps=20_000, timeout=15.0),
    _svc("frontend", "nextjs", cpu=0.004, latency=0.006, memory=120 * MiB, memory_per_rps=150_000, timeout=10.0),
    _svc("checkout", "go", cpu=0.002, latency=0.004, memory=11 * MiB, memory_per_rps=60_000, timeout=5.0),
    _svc("product-catalog", "go", cpu=0.0004, latency=0.0012, memory=9 * MiB, memory_per_rps=20_000),
    _svc("cart", "dotnet", cpu=0.0008, latency=0.0015, memory=70 * MiB, memory_per_rps=80_000),
    _svc("currency", "cpp", cpu=0.0002, latency=0.0004, memory=6 * MiB, memory_per_rps=10_000),
    _svc("payment", "node", cpu=0.0015, latency=0.003, memory=60 * MiB, memory_per_rps=100_000),
    _svc("shipping", "rust", cpu=0.0003, latency=0.0008, memory=5 * MiB, memory_per_rps=10_000),
    _svc("quote", "php", cpu=0.002, latency=0.004, memory=18 * MiB, memory_per_rps=40_000),
    _svc("email", "ruby", cpu=0.004, latency=0.01, memory=55 * MiB, memory_per_rps=200_000),
    _svc("ad", "java", cpu=0.001, latency=0.002, memory=160 * MiB, memory_per_rps=200_000),
    _svc("recommendation", "python", cpu=0.003, latency=0.005, memory=45 * MiB, memory_per_rps=150_000),
    _svc("product-reviews", "python", cpu=0.003, latency=0.006, memory=50 * MiB, memory_per_rps=150_000, timeout=30.0),
    _svc("llm", "python", cpu=0.01, latency=0.4, memory=40 * MiB, memory_per_rps=100_000),
    _svc("image-provider", "nginx", cpu=0.0002, latency=0.0005, memory=8 * MiB),
    _svc("accounting", "dotnet", cpu=0.002, latency=0.003, memory=60 * MiB, memory_per_rps=30_000, background=True),
    _svc("fraud-detection", "java", cpu=0.002, latency=0.003, memory=150 * MiB, memory_per_rps=50_000, background=True),
)}
ROUTES = declared_routes(TOPOLOGY)


def _identify(container: dict[str, Any]) -> str | None:
    suffix = image_suffix(container, DEMO)
    return suffix if suffix in SERVICES else None


class DemoFlags(GraphHooks):
    """The demo's fault flags, evaluated through flagd by the services that read them."""

    def flag(self, flow: CallGraphFlow, ns: str, name: str) -> Any:
        return flag_value(flow.cluster, ns, name)

    def entry_share(self, flow: CallGraphFlow, ns: str, route_name: str) -> float:
        flood = self.flag(flow, ns, "loadGeneratorFloodHomepage") or 0
        return 1.0 + 5.0 * float(flood) if route_name == "/" and flood else 1.0

    def call_share(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, call: Call) -> float:
        if svc.name == "checkout" and call.peer == "kafka":
            return 1.0 + float(self.flag(flow, ns, "kafkaQueueProblems") or 0)
        if svc.name == "checkout" and call.peer == "payment" and self.flag(flow, ns, "paymentUnreachable"):
            return 0.0  # it dials badAddress:50051 instead (see op_effect)
        return 1.0

    def op_effect(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, insts: list) -> OpEffect | None:
        name = svc.name
        if name == "frontend-proxy" and insts:
            # workers held by a request filter's runaway evaluations leave the rest of the CPU to the others
            free = sum(free_share(c, self._node_cpus(flow, rt)) for rt, c in insts) / len(insts)
            if free < 1.0:
                return OpEffect(cpu=1.0 / free if free > 0 else 1e9)
        if name == "payment" and op == CHARGE:
            p = float(self.flag(flow, ns, "paymentFailure") or 0)
            if p:
                return OpEffect(fail=p, error="Payment request failed. Invalid token. app.loyalty.level=gold")
            return self._expired_cards(flow, insts)
        if name == "product-catalog" and op == CATALOG_GET and self.flag(flow, ns, "productCatalogFailure"):
            return OpEffect(fail=1 / len(PRODUCTS), error="rpc error: code = Internal desc = Error: Product Catalog Fail "
                                                          "Feature Flag Enabled")
        if name == "checkout" and op == PLACE_ORDER and self.flag(flow, ns, "paymentUnreachable"):
            return OpEffect(fail=1.0, error='failed to charge card: could not charge the card: rpc error: code = '
                                            'Unavailable desc = connection error: desc = "transport: Error while dialing: '
                                            'dial tcp: lookup badAddress on 10.96.0.10:53: no such host"')
        if name == "cart" and op == CART_EMPTY and self.flag(flow, ns, "cartFailure"):
            return OpEffect(fail=1.0, error="Wasn't able to connect to redis")
        if name == "ad" and op == GET_ADS:
            eff = OpEffect()
            if self.flag(flow, ns, "adFailure"):
                eff.fail, eff.error = 0.1, "io.grpc.StatusRuntimeException: UNAVAILABLE"
            if self.flag(flow, ns, "adManualGc"):
                eff.latency += 1.2  # ten full collections of a heap filled to 90 % per request
                eff.cpu = max(eff.cpu, 6.0)
            if self.flag(flow, ns, "adHighCpu"):
                # the handlers get a fifth of the CPU beside the four busy-looping threads (see step)
                eff.cpu = max(eff.cpu, 1.0 + AD_BUSY_THREADS)
            return eff if (eff.fail or eff.latency or eff.cpu > 1) else None
        if name == "product-reviews" and op == ASK_AI and self.flag(flow, ns, "llmRateLimitError"):
            return OpEffect(fail=0.5, error="openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit "
                                            "reached for requests', 'type': 'requests', 'code': 'rate_limit_exceeded'}}")
        if name == "fraud-detection" and self.flag(flow, ns, "kafkaQueueProblems"):
            return OpEffect(latency=1.0, cpu=1.0)
        if name == "recommendation" and insts:
            # every request builds set(product_ids) over the whole ever-growing list
            ids = max(c.instance.get("cached_ids", 0.0) for _, c in insts)
            if ids > 0:
                return OpEffect(latency=ids * SET_NS_PER_ID * 1e-9, cpu=1.0 + ids * SET_NS_PER_ID * 1e-9 / svc.cpu)
        return None

    @staticmethod
    def _node_cpus(flow: CallGraphFlow, rt: Any) -> float:
        node = flow.cluster.nodes.get(rt.node)
        return float(node.cpu) if node is not None else 1.0

    @staticmethod
    def _expired_cards(flow: CallGraphFlow, insts: list) -> OpEffect | None:
        """charge.js rejects a card whose expiry month is before `new Date()`: the pod's clock."""
        expired, last = 0.0, None
        for rt, c in insts:
            pod = flow.w._pod(rt.namespace, rt.name)
            skew = flow.cluster.nodes.clock_offset(rt.node) + (flow.cluster.chaos.time_offset(pod, c.name) if pod else 0.0)
            if skew <= 0:
                continue
            today = datetime.fromtimestamp(flow.cluster.now() + skew, UTC)
            gone = [card for card in CARDS if today.year * 12 + today.month > card[1] * 12 + card[0]]
            expired += len(gone) / len(CARDS)
            last = gone[0] if gone else last
        if not expired or last is None:
            return None
        return OpEffect(fail=expired / len(insts),
                        error=f"The credit card (ending {last[2]}) expired on {last[0]}/{last[1]}.")

    def step(self, flow: CallGraphFlow, ns: str, groups: dict[str, list], lam: dict, now: float, dt: float) -> None:
        insts = groups.get("recommendation") or []
        if insts and self.flag(flow, ns, "recommendationCacheFailure"):
            # recommendation_server.py: on a miss (half the calls) cached_ids += the catalog's 10 ids, then
            # += its own first quarter; the module-level list never shrinks, so it grows geometrically
            # (8 bytes a reference) until the container's memory limit kills the process.
            per_pod = lam.get(("recommendation", RECOMMEND), 0.0) * dt / len(insts)
            for _, c in insts:
                ids = c.instance.get("cached_ids", 0.0)
                ids = (ids + len(PRODUCTS)) * 1.25 ** (0.5 * per_pod) if per_pod > 0 else ids
                c.instance["cached_ids"] = ids
                c.instance["leak"] = ids * 8.0
        if self.flag(flow, ns, "adHighCpu"):
            for rt, c in groups.get("ad") or []:  # AdService's CPU load threads spin regardless of traffic
                cores = flow.w._cores(rt, c)
                burn = min(float(AD_BUSY_THREADS), cores * 0.95) * dt
                c.cpu_seconds += burn
                flow.cluster.nodes.account_cpu(rt.node, burn)
                if cores < AD_BUSY_THREADS:  # a CPU limit below the threads' demand: CFS throttles every period
                    c.cpu_throttled_periods += dt / 0.1 * 0.95
        for rt, c in groups.get("frontend-proxy") or []:  # a runaway regex spins whether or not anyone waits
            pinned = int(c.instance.get("filter_pinned", 0))
            if pinned:
                cores = flow.w._cores(rt, c)
                burn = min(float(pinned), cores) * dt
                c.cpu_seconds += burn
                flow.cluster.nodes.account_cpu(rt.node, burn)
                if pinned >= cores * 0.98:
                    c.cpu_throttled_periods += dt / 0.1 * 0.95
        fraud = groups.get("fraud-detection") or []
        for _rt, c in fraud:  # a consumer sleeping 1 s per record processes one record per second
            if self.flag(flow, ns, "kafkaQueueProblems"):
                c.instance["poll_rate"] = 1.0
            else:
                c.instance.pop("poll_rate", None)


ASTRONOMY = graph_app(AppGraph("astronomy-shop", SERVICES, ROUTES, _identify, span_metrics=True, hooks=DemoFlags()))
