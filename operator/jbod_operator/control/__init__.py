"""The controller's long-lived parts: the cluster controller (liveness, elections), the
endpoint brokers call, and Lease leadership."""
