"""sdy-dl: a declarative rule database with Datalog inference for tensor sharding."""

__version__ = "0.1.0"


def propagate(module: str, **options):
    """Propagate a module (text or path); see :func:`sdy_dl.api.propagate`."""
    from sdy_dl.api import propagate as _propagate
    return _propagate(module, **options)
