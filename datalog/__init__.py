"""Shipped Datalog program templates (package data)."""
