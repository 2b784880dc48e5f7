"""The pages' views, by page: each takes a ``Page`` and returns a ``Response``."""
