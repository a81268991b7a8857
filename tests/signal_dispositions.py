"""Children started with the signal dispositions a command meets by default.

A test run may itself be started with SIGHUP ignored (``nohup``, a CI runner) or
SIGINT ignored (a background job of a non-interactive shell); its children inherit
that, and sdy-dl rightly keeps an ignored signal ignored.  Tests of what a signal
does pass :func:`defaults` as ``preexec_fn``."""

import signal


def defaults() -> None:
    """Set SIGHUP, SIGTERM and SIGINT to their default actions (in the child)."""
    for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)
