"""The Celery side of the farm: the app and its long-task configuration, and the trial chain
(claim on the shared queue, then deploy → inject → agent_session → oracle → record on the
worker's own queue). `celery -A tasks flower` monitors it."""

from tasks.celery_app import app

__all__ = ["app"]
