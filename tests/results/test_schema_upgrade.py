"""A database written by an older version (tables without the columns added since) is upgraded in
place when the farm opens it: the new nullable columns appear, old rows read back with NULL there,
and new results fill them."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Session, SQLModel, select

from results.db import engine_for
from results.models import Attempt, Trial

NEW_COLUMNS = {"attempt": "diagnosis_threshold", "trial": "diagnosis_threshold"}


def test_an_old_database_gains_the_new_columns_and_stays_readable(db_url: str) -> None:
    old = sa.create_engine(db_url)
    SQLModel.metadata.create_all(old)
    with old.begin() as conn:
        for table, column in NEW_COLUMNS.items():
            conn.exec_driver_sql(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')  # as an older version made it
        conn.exec_driver_sql("INSERT INTO sweep (id, spec_json, created_at, updated_at, cancelled) "
                             "VALUES ('old', '{}', 1, 1, false)")
        conn.exec_driver_sql(
            "INSERT INTO trial (id, sweep_id, key, problem_id, app, layer, composition, agent, model, seed, noise, "
            "state, current_attempt, infra_attempts, diagnosis_passed) VALUES ('t1', 'old', 'k', 'p', 'a', 'l', "
            "'single', 'baseline', '-', 0, false, 'finished', 1, 0, true)")
        conn.exec_driver_sql("INSERT INTO attempt (trial_id, token, worker, cluster, state, phase, started_at, "
                             "diagnosis_passed) VALUES ('t1', 1, 'w', 'sim', 'recorded', 'record', 1, true)")
    assert "diagnosis_threshold" not in {c["name"] for c in sa.inspect(old).get_columns("attempt")}
    old.dispose()

    engine_for.cache_clear()
    engine = engine_for(db_url)
    for table, column in NEW_COLUMNS.items():
        assert column in {c["name"] for c in sa.inspect(engine).get_columns(table)}
    with Session(engine) as s:
        attempt = s.exec(select(Attempt)).one()
        trial = s.exec(select(Trial)).one()
        assert attempt.diagnosis_passed and attempt.diagnosis_threshold is None
        assert trial.diagnosis_passed and trial.diagnosis_threshold is None
        attempt.diagnosis_threshold = 0.7
        s.add(attempt)
        s.commit()
    engine_for.cache_clear()  # opening it again finds nothing to add
    with Session(engine_for(db_url)) as s:
        assert s.exec(select(Attempt)).one().diagnosis_threshold == 0.7
    from results.db import add_missing_columns

    assert add_missing_columns(engine_for(db_url)) == []
    engine_for(db_url).dispose()


def test_a_database_without_a_version_is_upgraded_and_stamped(db_url: str) -> None:
    from results.db import SCHEMA_VERSION, schema_version

    old = sa.create_engine(db_url)
    SQLModel.metadata.create_all(old)  # as a farm before versions were recorded made it
    with old.begin() as conn:
        conn.exec_driver_sql('ALTER TABLE "trial" DROP COLUMN "published_at"')
    assert schema_version(old) is None
    old.dispose()
    engine_for.cache_clear()
    engine = engine_for(db_url)
    assert schema_version(engine) == SCHEMA_VERSION
    assert "published_at" in {c["name"] for c in sa.inspect(engine).get_columns("trial")}
    engine.dispose()
    engine_for.cache_clear()
