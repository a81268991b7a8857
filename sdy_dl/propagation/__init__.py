"""Propagation: one op step evaluated in Datalog, the worklist schedule in Python."""
