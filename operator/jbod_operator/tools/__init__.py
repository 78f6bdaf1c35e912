"""Tools around the operator, never imported by it: jbod-ctl (``cli``), the CRD generator
(``crdgen``) and ``localkube`` (a real API server and the operator on this machine, for
``make demo`` and the tests)."""
