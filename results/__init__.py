"""Where results go: SQL tables (SQLModel; SQLite by default, PostgreSQL for a farm), the
artifact store (a folder or S3 through boto3), leaderboards computed in SQL and exported as CSV."""

__all__ = ["artifact_store", "db", "keys", "leaderboard", "ledger", "models", "progress", "report", "stats", "view"]
