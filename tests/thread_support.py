"""Running a call in a second thread, named A, for the tests of brainx across threads."""

import threading

#: How long a test waits for the other thread before it fails.
TIMEOUT = 30.0


def run_in_a(call):
    """Start ``call()`` in a daemon thread named A; return a function that joins it."""
    box = {}

    def target():
        try:
            box["out"] = call()
        except BaseException as e:  # reported in the main thread
            box["error"] = e

    thread = threading.Thread(target=target, name="A", daemon=True)
    thread.start()

    def join():
        thread.join(TIMEOUT)
        assert not thread.is_alive(), "thread A did not finish"
        if "error" in box:
            raise box["error"]
        return box["out"]

    return join
