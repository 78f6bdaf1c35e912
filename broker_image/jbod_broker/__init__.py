"""The JBOD broker: storage engine, log-dir move engine and server."""
