"""Handlers: translate between Kubernetes objects and domain calls (one module per resource)."""
