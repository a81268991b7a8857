"""sdy-dl: a declarative rule database with Datalog inference for tensor sharding.

Marks like "§7.3" in docstrings and comments throughout the project refer to
sections of ``docs/semantics.md`` (the Shardy semantics sdy-dl implements);
"research notes" are ``docs/research/mlir-driver-and-traits.md``.
"""

__version__ = "0.1.0"


def propagate(module: str, **options):
    """Propagate a module (text or path); see :func:`sdy_dl.api.propagate`."""
    from sdy_dl.api import propagate as _propagate
    return _propagate(module, **options)
