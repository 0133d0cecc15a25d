"""CloudWatch metric queries and the reader adapter (not yet built)."""
