"""Machinery for speed and scale: processes of one run (torchrun), the flat Adam, memory kept in the process."""
