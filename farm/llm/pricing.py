"""Whether litellm's price table knows a model, read from the table litellm ships (the local copy
LITELLM_LOCAL_MODEL_COST_MAP makes it use) without importing litellm, which takes seconds: a
sweep spec is checked before anything runs, and a leaderboard marks an unpriced model's cost."""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

PRICE_FILE = "model_prices_and_context_window_backup.json"


@cache
def price_table() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / PRICE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def has_price(model: str) -> bool:
    """True when litellm's table gives `model` (as written, or without its provider prefix, the
    way litellm looks it up) a price per input token, zero included (a free local provider)."""
    table = price_table()
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in names:
        entry = table.get(name)
        if isinstance(entry, dict) and entry.get("input_cost_per_token") is not None:
            return True
    return False
