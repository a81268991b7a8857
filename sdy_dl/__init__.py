"""sdy-dl: a declarative rule database with Datalog inference for tensor sharding."""

__version__ = "0.1.0"
