"""sdy-dl: a declarative rule database with Datalog inference for tensor sharding.

Marks like "§7.3" in docstrings and comments throughout the project refer to
sections of ``docs/semantics.md`` (the Shardy semantics sdy-dl implements);
"research notes" are ``docs/research/mlir-driver-and-traits.md``.
"""

__version__ = "0.1.0"
