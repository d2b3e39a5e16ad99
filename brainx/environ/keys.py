"""The names of brainx's environment keys and the values they accept."""

from typing import Union

I = "i"                                  # conventional key: the index of the current step
T = "t"                                  # conventional key: the current time
DT = "dt"                                # the integration time step
PRECISION = "precision"                  # float precision: 8, 16, 32, 64 or "bf16"
PLATFORM = "platform"                    # "cpu", "gpu" or "tpu" (process-wide, see set_platform)
HOST_DEVICE_COUNT = "host_device_count"  # number of CPU devices (see set_host_device_count)
JIT_ERROR_CHECK = "jit_error_check"      # conventional key: check errors inside jitted code
FIT = "fit"                              # conventional key: True while fitting (training)

DEFAULT_PRECISION = 32
SUPPORTED_PLATFORMS = ("cpu", "gpu", "tpu")
SUPPORTED_PRECISIONS = (8, 16, 32, 64, "bf16")

PrecisionType = Union[int, str]
PlatformType = str

GLOBAL_ONLY = (PLATFORM, HOST_DEVICE_COUNT)  # process-wide JAX settings: never in a context()
