#!/usr/bin/env python3
"""Tell the local rocetune agent how long each training step took (docs/job-signal.md).

The job signal's C client (librocetune-job.so) through ctypes: a training loop wraps each
step (or collective) in `with signal.timed("step"):` and the agent receives one event per
step. Sending never blocks and never raises: when no agent listens the event is dropped and
counted.

Run as a demonstration (a fake training loop of `--steps` steps of about `--step_ms`):

    python3 report_steps.py --job llama-70b/run3 --steps 100 --step_ms 20 \
        --lib build/jobsignal/librocetune-job.so --socket /run/rocetune/job.sock
"""

import argparse
import contextlib
import ctypes
import ctypes.util
import os
import sys
import time


class JobSignal:
    """One handle of the C client: `rocetune_job_open(socket, job)`."""

    def __init__(self, job, socket=None, lib=None):
        path = lib or os.environ.get("ROCETUNE_JOB_LIB") or ctypes.util.find_library("rocetune-job")
        if not path:
            raise OSError("librocetune-job.so not found: pass lib= or set ROCETUNE_JOB_LIB")
        self._lib = ctypes.CDLL(path, use_errno=True)
        self._lib.rocetune_job_open.restype = ctypes.c_void_p
        self._lib.rocetune_job_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self._lib.rocetune_job_report.restype = ctypes.c_int
        self._lib.rocetune_job_report.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double, ctypes.c_int64, ctypes.c_uint64]
        for name in ("rocetune_job_sent", "rocetune_job_dropped"):
            getattr(self._lib, name).restype = ctypes.c_uint64
            getattr(self._lib, name).argtypes = [ctypes.c_void_p]
        self._lib.rocetune_job_close.argtypes = [ctypes.c_void_p]
        self._h = self._lib.rocetune_job_open(socket.encode() if socket else None, job.encode())
        if not self._h:
            err = ctypes.get_errno()
            raise ValueError(f"rocetune_job_open({job!r}): {os.strerror(err)}")

    def report(self, op, seconds, rank=-1, nbytes=0):
        """One event; 0 when sent, a negative errno when dropped (never raises)."""
        return self._lib.rocetune_job_report(self._h, op.encode(), seconds, rank, nbytes)

    @contextlib.contextmanager
    def timed(self, op, rank=-1, nbytes=0):
        start = time.monotonic()
        try:
            yield
        finally:
            self.report(op, time.monotonic() - start, rank, nbytes)

    @property
    def sent(self):
        return self._lib.rocetune_job_sent(self._h)

    @property
    def dropped(self):
        return self._lib.rocetune_job_dropped(self._h)

    def close(self):
        if self._h:
            self._lib.rocetune_job_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job", required=True, help="the job's id, the same on every host")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step_ms", type=float, default=20, help="how long a fake step takes")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--socket", help="the agent's socket (default: $ROCETUNE_JOB_SOCKET, "
                                    "else /run/rocetune/job.sock)")
    p.add_argument("--lib", help="librocetune-job.so (default: $ROCETUNE_JOB_LIB, else the "
                                 "system's)")
    args = p.parse_args()
    try:
        signal = JobSignal(args.job, args.socket, args.lib)
    except (OSError, ValueError) as e:
        print(f"report_steps: {e}", file=sys.stderr)
        return 2
    with signal:
        for _ in range(args.steps):
            with signal.timed("step", rank=args.rank):
                time.sleep(args.step_ms / 1000)  # the training step
        print(f"sent={signal.sent} dropped={signal.dropped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
