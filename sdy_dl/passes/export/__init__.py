"""The export passes, as Shardy's ``transforms/export/`` (one pass a file)."""
