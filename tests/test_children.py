"""Stopping a child surely: its own signal first (it may checkpoint), SIGKILL after the grace,
a paused child resumed so it can handle the signal."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from rlamd.children import stop

# Writes "ready", then waits; on SIGNAL (by number) it writes "handled" and exits 0, unless
# told to ignore it.
CHILD = """
import signal, sys, time
sig, mode = int(sys.argv[1]), sys.argv[2]
handler = signal.SIG_IGN if mode == "ignore" else (lambda *_: (print("handled"), sys.exit(0)))
signal.signal(sig, handler)
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def _start(sig: int, mode: str) -> subprocess.Popen:
    cmd = [sys.executable, "-c", CHILD, str(int(sig)), mode]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_the_childs_own_signal_comes_first():
    proc = _start(signal.SIGTERM, "handle")
    stop(proc, grace=30.0, sig=signal.SIGTERM)
    assert proc.returncode == 0 and proc.stdout.read().strip() == "handled"


def test_a_child_ignoring_it_is_killed_after_the_grace():
    proc = _start(signal.SIGINT, "ignore")
    t0 = time.monotonic()
    stop(proc, grace=0.3)
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - t0 >= 0.3


def test_a_paused_child_is_resumed_to_handle_it():
    proc = _start(signal.SIGINT, "handle")
    proc.send_signal(signal.SIGSTOP)
    stop(proc, grace=5.0)
    assert proc.returncode == 0 and proc.stdout.read().strip() == "handled"
    stop(proc, grace=1.0)  # a child already gone: nothing to do, no error


# A process-group leader whose SIGINT handler ends its worker and waits for it: it can exit
# cleanly only if the worker runs again.
LEADER = """
import signal, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
def handle(*_):
    worker.terminate()
    worker.wait()
    sys.exit(0)
signal.signal(signal.SIGINT, handle)
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def test_a_paused_group_is_resumed_so_the_leader_can_close_its_workers():
    import os

    cmd = [sys.executable, "-c", LEADER]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    os.killpg(proc.pid, signal.SIGSTOP)  # as `kill -STOP -PGID` pauses a trial
    stop(proc, grace=5.0)  # the signal to the leader only; the resume to the group
    assert proc.returncode == 0
