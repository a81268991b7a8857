"""Module I/O: jaxlib's MLIR bindings parse and print; a plain Python model on top.

``load_module`` parses a module file into :class:`~sdy_dl.ir.model.Module`;
``Module.print()`` prints it exactly as jaxlib prints it (only sharding
attributes that sdy-dl writes change).
"""

from sdy_dl.ir.loader import load_module, parse_module_text
from sdy_dl.ir.model import Block, Module, Op, Region, Value

__all__ = ["Block", "Module", "Op", "Region", "Value", "load_module", "parse_module_text"]
