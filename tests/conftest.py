"""Test setup: JAX on 8 host CPU devices (set before jax is imported), and the
per-run folder of lowered JAX programs (``lowering``), removed when the run ends."""

import os
import shutil
import uuid

import lowering

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def pytest_configure(config):
    # The controller picks the run id xdist hands to its workers, so that it
    # knows which folder the workers share.
    if not hasattr(config, "workerinput") and hasattr(config.option, "testrunuid") \
            and config.option.testrunuid is None:
        config.option.testrunuid = uuid.uuid4().hex


def pytest_unconfigure(config):
    run = getattr(config.option, "testrunuid", None)
    if not hasattr(config, "workerinput") and run:
        shutil.rmtree(lowering.run_dir_path(run), ignore_errors=True)
