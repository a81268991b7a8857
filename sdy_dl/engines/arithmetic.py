"""Soufflé's arithmetic on ``number`` (32-bit signed) as the embedded engines
evaluate it: wrapping, and C's ``/`` and ``%`` with an error where Soufflé
stops with an arithmetic exception (division by zero, ``-2147483648 / -1``)."""

from __future__ import annotations

from sdy_dl.errors import SdyError


def wrap(v: int) -> int:
    """``v`` wrapped to a 32-bit signed number (Soufflé's ``number``)."""
    return v if -2147483648 <= v <= 2147483647 else ((v + 2147483648) & 0xFFFFFFFF) - 2147483648


def arithmetic_error(message: str, line: int, col: int) -> SdyError:
    """The error of the ``/`` or ``%`` of the rule at ``line``:``col``."""
    return SdyError(f"{message} (Soufflé stops with an arithmetic exception)",
                    file="<program>", line=line, col=col)


def c_div(a: int, b: int, line: int, col: int) -> int:
    """C's truncating ``a / b`` on 32-bit numbers."""
    if b == 0:
        raise arithmetic_error("division by zero", line, col)
    if a == -2147483648 and b == -1:
        raise arithmetic_error("overflow in -2147483648 / -1", line, col)
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod(a: int, b: int, line: int, col: int) -> int:
    """C's ``a % b`` (the sign of ``a``) on 32-bit numbers."""
    if b == 0:
        raise arithmetic_error("modulo by zero", line, col)
    if a == -2147483648 and b == -1:
        raise arithmetic_error("overflow in -2147483648 % -1", line, col)
    r = abs(a) % abs(b)
    return -r if a < 0 else r
