"""One scripted investigation of the test incident (incident_mcp), played by the scripted LLM
server for react and stratus alike, so their token use can be compared on identical decisions."""

from __future__ import annotations

import re
from typing import Any

from farm.llm.scripted import PlanStep, tool_plan, tool_results


def diagnosis_from_evidence(request: dict[str, Any]) -> dict[str, Any]:
    """Write the diagnosis from what the tools showed: the port comes from the logs it read."""
    seen = "\n".join(content for _, content in tool_results(request))
    port = re.search(r":(\d{5}): connect: connection refused", seen)
    text = ("Root cause: the geo deployment's environment sets GEO_DB_PORT to "
            f"{port.group(1) if port else 'a wrong port'} instead of MongoDB's 27017, so geo cannot "
            "connect to mongodb-geo and crash-loops (CrashLoopBackOff). frontend and search only fail "
            "downstream: GET /hotels returns HTTP 500 because geo is unavailable.")
    return {"text": text}


PLAN: list[PlanStep] = [
    ("get_alerts", {}),
    ("kubectl", {"command": "get pods -n hotel-reservation"}),
    ("kubectl", {"command": "logs deploy/frontend -n hotel-reservation"}),
    ("kubectl", {"command": "logs deploy/geo -n hotel-reservation"}),
    ("kubectl", {"command": "describe pod geo -n hotel-reservation"}),
    ("jaeger_traces", {"service": "frontend", "minutes": 15, "limit": 20}),
    ("prometheus_query", {"query": "sum by (service, code) (rate(http_requests_total[5m]))"}),
    ("submit_diagnosis", diagnosis_from_evidence),
    ("kubectl", {"command": "set env deployment/geo GEO_DB_PORT=27017 -n hotel-reservation"}),
    ("wait", {"seconds": 60}),
    ("kubectl", {"command": "get pods -n hotel-reservation"}),
    ("submit_mitigation", {}),
]


def responder():
    return tool_plan(PLAN, finish="The incident is diagnosed and mitigated.")


# The same investigation against the emulated hotel-reservation with one of the catalog's problems
# (a wrong image tag on geo), for the agents' tests and token bench on a served cluster.
SIM_NS = "hotel-reservation"
SIM_PROBLEM = "hr-geo-image-tag-wrong"


def sim_diagnosis(request: dict[str, Any]) -> dict[str, Any]:
    seen = "\n".join(c for _, c in tool_results(request))
    tag = re.search(r"hotelreservation:([\w.-]+)", seen.replace("\n", " "))
    pulls = "ImagePullBackOff" in seen or "ErrImagePull" in seen
    return {"text": f"Root cause: the geo deployment was rolled to image tag "
                    f"{tag.group(1) if tag else 'unknown'}, which does not exist; the new geo pod is stuck in "
                    f"{'ImagePullBackOff' if pulls else 'a failed image pull'} and the rollout never completes."}


SIM_PLAN: list[PlanStep] = [
    ("get_alerts", {}),
    ("kubectl", {"command": f"get pods -n {SIM_NS}"}),
    ("kubectl", {"command": f"describe deployment geo -n {SIM_NS}"}),
    ("loki_query", {"query": f'{{namespace="{SIM_NS}"}} |= "error"', "minutes": 10}),
    ("jaeger_traces", {"service": "frontend", "minutes": 10, "limit": 20}),
    ("kubectl", {"command": f"get events -n {SIM_NS}"}),
    ("submit_diagnosis", sim_diagnosis),
    ("kubectl", {"command": f"rollout undo deployment/geo -n {SIM_NS}"}),
    ("wait", {"seconds": 90}),
    ("kubectl", {"command": f"get pods -n {SIM_NS} -l io.kompose.service=geo"}),
    ("submit_mitigation", {}),
]
