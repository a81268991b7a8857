"""Import every pass module so that each registers itself.

Passes live in the subpackages named after Shardy's folders
(``import_/``, ``propagation/``, ``export/``); every module found there is
loaded.
"""

import importlib
import pkgutil

import sdy_dl.passes as _passes

for _info in pkgutil.walk_packages(_passes.__path__, prefix="sdy_dl.passes."):
    if _info.name != "sdy_dl.passes.all":
        importlib.import_module(_info.name)
