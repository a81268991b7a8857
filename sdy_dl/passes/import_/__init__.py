"""The import passes, as Shardy's ``transforms/import/`` (one pass a file).

Named ``import_`` because ``import`` is a Python keyword (PEP 8: a trailing
underscore avoids the clash); ``symbol-dce`` is MLIR's pass, which Shardy's
import pipeline runs, and lives here with it.
"""
