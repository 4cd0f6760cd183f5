"""`farm view`: a live web view of sweeps over the farm's SQL rows and artifacts (app: the routes
and pages; queries: the SQL the report does not already have; auth: the token gate; format:
numbers for reading)."""

from results.view.app import create_app

__all__ = ["create_app"]
