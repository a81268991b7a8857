"""Children started with the signal dispositions a command meets by default.

A test run may itself be started with SIGHUP ignored (``nohup``, a CI runner) or
SIGINT ignored (a background job of a non-interactive shell); its children inherit
that, and sdy-dl rightly keeps an ignored signal ignored.  A test of what a signal
does runs its ``python -c`` script after :data:`DEFAULTS`, which sets them as a
Python started from a terminal has them (a ``preexec_fn`` would fork the test
process, which JAX's threads make unsafe)."""

DEFAULTS = """
import signal as _signal
for _s in (_signal.SIGHUP, _signal.SIGTERM):
    _signal.signal(_s, _signal.SIG_DFL)
_signal.signal(_signal.SIGINT, _signal.default_int_handler)
"""
