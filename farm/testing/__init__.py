"""What the farm's own tests and benches drive it with, shipped with the product as Celery ships
`celery.contrib.testing`: a scripted incident behind a real MCP server and the investigation played
against it (incident_mcp, incident_plan), synthetic sweeps recorded through the ledger for the
viewer (view_rows), and the multi-process farm with its own Redis, PostgreSQL and S3 servers that
the reliability tests and the chaos bench kill and restart (harness, services), and the spy that
reads only change metadata to name a faulted object (metadata_spy). A plugin author can
test an agent against them without this repository's tests."""

__all__ = ["harness", "incident_mcp", "incident_plan", "metadata_spy", "services", "view_rows"]
