"""Command-line tools: jbod-ctl and the CRD generator."""
