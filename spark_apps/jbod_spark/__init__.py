"""PySpark placement planners (later issues)."""
