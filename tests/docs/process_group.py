"""Runs a command in a process group of its own, for the tests that drive a whole session of
the real binaries (quickstart_test, demo_test)."""
import os
import signal
import subprocess
import time


def run_in_group(argv, cwd, env, timeout_s):
    """Runs `argv` with stdout and stderr together; returns (exit code, output, timed out).

    On a timeout the command gets SIGTERM (its own trap stops what it started, by PID) and
    15 s; then everything left in its group, which only it started, is killed."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def stop_group(signum, _frame):
        # This runner is being stopped by SIGTERM or SIGINT (a stopped suite, Ctrl-C; ctest's
        # own timeout sends SIGKILL, which nothing can catch): the group is in a session of its
        # own, so nothing else would stop it. The command gets SIGTERM and up to 15 s for its
        # trap, then what is left of its group is killed. The leader is waited for without
        # being reaped (WNOWAIT), so its pid, the group's id, cannot be reused before killpg.
        proc.terminate()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    break
            except ChildProcessError:
                break
            time.sleep(0.1)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # Die of the signal itself, as the runner would have without this handler.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

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
