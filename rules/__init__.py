"""Shipped YAML op sharding rules (package data)."""
