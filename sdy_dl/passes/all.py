"""Import every pass module so that each registers itself."""

import importlib
import pkgutil

import sdy_dl.passes as _passes

for _info in pkgutil.iter_modules(_passes.__path__):
    if _info.name != "all":
        importlib.import_module(f"sdy_dl.passes.{_info.name}")
