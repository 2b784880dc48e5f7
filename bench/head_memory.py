"""What request heads can make kb-server hold: huge heads are refused with 431 before they are
kept, and endless heads under the cap hold no more than the cap each.

    python bench/head_memory.py                       # the defaults below
    python bench/head_memory.py --tree OLD_CHECKOUT --server-args="--workers 8"

A fresh store and one ``kb-server --http`` (this checkout's, or ``--tree`` another's). Two
rounds, the server's resident memory (VmRSS, every process of it) sampled throughout:

- **huge**: ``--connections`` clients (64), each sending 98 header lines of 65 KB, 6.4 MB a
  head, as fast as the server takes them: each must be answered 431 and closed, holding
  nothing;
- **endless**: as many clients, each sending a head just under the 64 KiB cap and never its
  blank line: each is held until the request deadline closes it, the cap's worth at most.

Prints the memory idle, at the peak of each round and after it; exits 1 unless every huge
head got 431 and the peak of each round stayed within the cap times the connections, plus
``--slack-mb`` for everything else a connection costs.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import common
from kbcite import KBStore
from slowloris import start_server

LINE = 65 * 1000
LINES = 98
CAP = 64 * 1024


def rss_mb(pid):
    """VmRSS of a process and its children, in MB."""
    pids = [pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)],
                                                   capture_output=True, text=True).stdout.split()]
    total = 0
    for one in pids:
        try:
            with open("/proc/%d/status" % one, encoding="utf-8") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


class Sampler:
    """The server's peak memory while a round runs."""

    def __init__(self, pid):
        self.pid, self.peak, self.done = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(0.05):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak


def huge(port, out):
    """One client sending a 6.4 MB head; records the status it got (or what happened)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    line = b"X-Big: " + b"b" * LINE + b"\r\n"
    try:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
        for _ in range(LINES):
            sock.sendall(line)
        sock.sendall(b"\r\n")
    except OSError:
        pass  # refused mid-way: the answer is waiting
    try:
        answer = sock.recv(64)
        out.append(int(answer.split(b" ")[1]) if answer.startswith(b"HTTP/1.1 ") else "closed")
    except OSError as exc:
        out.append(type(exc).__name__)
    finally:
        sock.close()


def endless(port, held):
    """One client sending a head just under the cap, and never its end."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port
    filler = CAP - len(head) - 2048
    try:
        sock.sendall(head + b"X-Pad: " + b"p" * filler + b"\r\n")
    except OSError:
        pass
    held.append(sock)


def main(argv=None):
    """Run both rounds; print the figures; exit 1 if a head was kept beyond the cap."""
    parser = argparse.ArgumentParser(prog="bench/head_memory.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--hold-seconds", type=float, default=5.0,
                        help="how long the endless heads are held before the figures")
    parser.add_argument("--slack-mb", type=float, default=40.0)
    parser.add_argument("--tree", default=str(common.ROOT))
    parser.add_argument("--server-args", default="")
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="kb-bench-heads-")
    db = os.path.join(folder, "kb.db")
    with KBStore(db, create=True) as store:
        store.create_knowledge_base("support")
    server, port = start_server(args.tree, db, args.server_args.split())
    try:
        time.sleep(0.5)
        idle = rss_mb(server.pid)
        print("idle: %.1f MB" % idle)
        statuses = []
        sampler = Sampler(server.pid)
        clients = [threading.Thread(target=huge, args=(port, statuses))
                   for _ in range(args.connections)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(120)
        time.sleep(1)
        huge_peak = sampler.stop()
        after_huge = rss_mb(server.pid)
        counts = {str(s): statuses.count(s) for s in set(statuses)}
        print("huge heads (%d x %d lines of %d bytes): answered %s; peak %.1f MB (+%.1f), "
              "after %.1f MB" % (args.connections, LINES, LINE, counts, huge_peak,
                                 huge_peak - idle, after_huge))
        held = []
        sampler = Sampler(server.pid)
        for _ in range(args.connections):
            endless(port, held)
        time.sleep(args.hold_seconds)
        endless_peak = sampler.stop()
        for sock in held:
            sock.close()
        time.sleep(1)
        after_endless = rss_mb(server.pid)
        bound = CAP * args.connections / 1e6 + args.slack_mb
        print("endless heads (%d just under %d bytes, held %g s): peak %.1f MB (+%.1f), after "
              "%.1f MB; the bound is +%.1f MB" % (args.connections, CAP, args.hold_seconds,
                                                  endless_peak, endless_peak - idle,
                                                  after_endless, bound))
        ok = (counts == {"431": args.connections} and huge_peak - idle <= bound
              and endless_peak - idle <= bound)
        print("PASS" if ok else "FAIL: a head was kept, or not refused with 431")
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
