"""Where the tests find Shardy's lit files: one setting.

``$SDY_DL_SHARDY_SRC`` names a Shardy source tree — a checkout, or a bare git
directory whose ``HEAD`` is read — and defaults to ``~/shardy``
(``git clone https://github.com/openxla/shardy ~/shardy``).  Nothing is copied
into this repository; the tests that need a lit file skip when it is absent.
"""

from __future__ import annotations

import os
import subprocess

import pytest

VARIABLE = "SDY_DL_SHARDY_SRC"
DEFAULT = "~/shardy"


def source() -> str:
    """The Shardy source tree the setting names."""
    return os.path.expanduser(os.environ.get(VARIABLE) or DEFAULT)


def read_lit(name: str, test_dir: str) -> str | None:
    """The text of lit file ``test_dir/name`` of the Shardy source (None when absent)."""
    src = source()
    path = os.path.join(src, test_dir, name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    if os.path.isdir(src):
        proc = subprocess.run(["git", f"--git-dir={src}", "show", f"HEAD:{test_dir}/{name}"],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout
    return None


def lit_or_skip(name: str, test_dir: str) -> str:
    """:func:`read_lit`, skipping the test when the file is not found."""
    text = read_lit(name, test_dir)
    if text is None:
        pytest.skip(f"Shardy lit file {test_dir}/{name} not found (set ${VARIABLE}; "
                    f"default {DEFAULT})")
    return text
