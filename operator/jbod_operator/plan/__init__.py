"""Pure decisions over typed models: no I/O, no clock reads beyond timestamps, no clients."""
