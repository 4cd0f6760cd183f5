"""The Celery app, configured for long tasks: late acks, one message prefetched at a time,
requeue when a worker process dies, a visibility timeout above the hard time limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from celery import Celery, Task
from kombu.entity import Queue

from tasks.config import SHARED_QUEUE, from_env

Receiver = TypeVar("Receiver", bound=Callable[..., None])

config = from_env()

app = Celery("farm", broker=config.broker_url, include=["tasks.trial"])
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_soft_time_limit=config.soft_time_limit_s,
    task_time_limit=config.hard_time_limit_s,
    broker_transport_options={
        "visibility_timeout": config.visibility_timeout_s,
        # Several farms (or test runs) can share one Redis without seeing each other's queues.
        **({"global_keyprefix": config.key_prefix} if config.key_prefix else {}),
    },
    broker_connection_retry_on_startup=True,
    task_default_queue=SHARED_QUEUE,
    task_queues=[Queue(SHARED_QUEUE)],
    task_ignore_result=True,  # results live in SQL, not in a Celery backend
    task_serializer="json",
    accept_content=["json"],
    worker_send_task_events=True,  # Flower shows tasks live
    task_send_sent_event=False,  # one publish per claim, not two; workers still send task events
    worker_hijack_root_logger=False,
    worker_max_tasks_per_child=None,
)


def declare_task(**options: Any) -> Callable[[Callable[..., Any]], Task]:
    """`app.task`, declared: Celery ships no types, and a decorator the type checker cannot read
    would leave every task body unchecked. What it returns is Celery's Task (.s, .si, .apply_async)."""
    return cast(Callable[[Callable[..., Any]], Task], app.task(**options))


def receiver(signal: Any) -> Callable[[Receiver], Receiver]:
    """`signal.connect` as a decorator that keeps the function's type (a module-level function:
    the signal's weak reference to it lives as long as the module)."""

    def connect(fn: Receiver) -> Receiver:
        signal.connect(fn)
        return fn

    return connect
