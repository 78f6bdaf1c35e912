"""I/O at the edge: the Kubernetes API client and the pool of broker clients."""
