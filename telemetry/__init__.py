"""Logging for workers and tools: structured, content-free, configured once per process."""
