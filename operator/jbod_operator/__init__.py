"""The operator that plays Kafka's controller on Kubernetes (later issues)."""
