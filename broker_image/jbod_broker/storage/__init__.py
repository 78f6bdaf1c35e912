"""Kafka-compatible storage on several log directories (one per disk)."""
