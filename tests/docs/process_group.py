"""Runs a command in a process group of its own, for the tests that drive a whole session of
the real binaries (quickstart_test, demo_test)."""
import os
import signal
import subprocess


def run_in_group(argv, cwd, env, timeout_s):
    """Runs `argv` with stdout and stderr together; returns (exit code, output, timed out).

    On a timeout the command gets SIGTERM (its own trap stops what it started, by PID) and
    15 s; then everything left in its group, which only it started, is killed."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def stop_group(signum, _frame):
        # This runner is being stopped (ctest's timeout, a stopped suite): the group is in a
        # session of its own, so nothing else would stop it. Same order as on a timeout.
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os._exit(128 + signum)

    previous = {sig: signal.signal(sig, stop_group) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, False
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        return proc.returncode, out, True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
