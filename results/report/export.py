"""`farm export`: a sweep's trial and attempt tables as files a notebook reads as they are
(pandas.read_csv / read_parquet), column types taken from the SQL models."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from sqlalchemy import Boolean, Float, Integer, select, type_coerce
from sqlalchemy.engine import Engine
from sqlmodel import AutoString, col

from results.models import Attempt, JSONText, Trial

FORMATS = ("csv", "parquet")
PARQUET_HINT = "parquet export needs pyarrow: pip install 'sre-farm[parquet]' (or pip install pyarrow)"

# The tables behind the models (SQLModel declares no `__table__` a type checker can see).
_TRIAL, _ATTEMPT = Trial.metadata.tables["trial"], Attempt.metadata.tables["attempt"]


def _as_stored(table: Any) -> list[Any]:
    """The table's columns, a structured one as the JSON text it is stored as: the export is the
    table as SQL holds it, which a notebook parses with json.loads."""
    return [type_coerce(c, AutoString).label(c.name) if isinstance(c.type, JSONText) else c for c in table.columns]


def _tables(engine: Engine, sweep_id: str) -> dict[str, tuple[Any, list[dict[str, Any]]]]:
    with engine.connect() as conn:
        trials = [dict(r) for r in conn.execute(select(*_as_stored(_TRIAL)).where(col(Trial.sweep_id) == sweep_id)
                                                .order_by(col(Trial.id))).mappings()]
        attempts = [dict(r) for r in conn.execute(
            select(*_as_stored(_ATTEMPT), col(Trial.sweep_id)).join(Trial, col(Trial.id) == col(Attempt.trial_id))
            .where(col(Trial.sweep_id) == sweep_id).order_by(col(Attempt.trial_id), col(Attempt.token))).mappings()]
    return {"trials": (_TRIAL, trials), "attempts": (_ATTEMPT, attempts)}


def _arrow_type(column: Any) -> Any:
    import pyarrow as pa

    if isinstance(column.type, Boolean):
        return pa.bool_()
    if isinstance(column.type, Integer):
        return pa.int64()
    if isinstance(column.type, Float):
        return pa.float64()
    return pa.string()


def check_format(fmt: str) -> None:
    """ValueError for an unknown format, ImportError with the install hint when parquet lacks pyarrow."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, not '{fmt}'")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise ImportError(PARQUET_HINT) from exc


def export(engine: Engine, sweep_id: str, fmt: str, out_dir: str | Path) -> list[Path]:
    """Write `trials.<fmt>` and `attempts.<fmt>` of the sweep into out_dir; returns the paths."""
    check_format(fmt)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (table, rows) in _tables(engine, sweep_id).items():
        names = [c.name for c in table.columns] + (["sweep_id"] if name == "attempts" else [])
        path = out / f"{name}.{fmt}"
        if fmt == "csv":
            with path.open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=names)
                writer.writeheader()
                for r in rows:
                    writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in names})
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            fields = [pa.field(c.name, _arrow_type(c)) for c in table.columns]
            if name == "attempts":
                fields.append(pa.field("sweep_id", pa.string()))
            schema = pa.schema(fields)
            pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows], schema=schema), path)
        paths.append(path)
    return paths
