"""Tests on 8 fake CPU devices: run as their own pytest process (see tests/test_distributed.py).

The device count is fixed when JAX starts its CPU backend, so it is set here,
before anything imports jax; the main test run ignores this folder.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
