"""The propagation passes, as Shardy's ``transforms/propagation/`` (one pass a file).

As in Shardy, each pass extends the previous one: ``basic-propagate``
(:mod:`.basic_propagation`, which holds the shared runner),
``aggressive-propagate``, ``op-priority-propagate`` and
``user-priority-propagate``.  The propagation machinery itself is
:mod:`sdy_dl.propagation`.
"""
