"""The broker's Kafka wire-protocol front end (issue 18).

Kafka clients (the Java clients, librdkafka, kafka-python, aiokafka) produce to and consume
from the broker over Kafka's own protocol, served here beside the HTTP API:

- :mod:`.protocol`: frames, request headers and the versions this broker speaks; pure, every
  request and response codec is kio's (generated from Kafka's JSON message definitions);
- :mod:`.errors`: the one table from the broker's errors to Kafka's error codes;
- :mod:`.apis`: one handler per API over the replica manager, which keeps every rule (acks,
  min ISR, high watermark, fencing): the handlers only translate;
- :mod:`.listener`: the asyncio server: connections, frame limits, the request-memory pool.

The listener sits beside the metrics, under the composition root (``jbod_broker.broker`` makes
and starts it) and over the handlers; both see the broker through
:class:`~jbod_broker.served.ServedBroker`, never the root itself, and nothing below imports
either.
"""
