#!/usr/bin/env python3
"""Drives the belfry benchmarks and prints the results table (called by bench/run.sh).

Timing-sensitive work is done by the `belfry-bench` Rust program (bench/src/); this script
starts panes and tmux sessions, runs the measurements in one go on one machine, and turns the
samples into p50/p99 figures and ratios. Every wait is bounded; everything it starts is ended in
`cleanup()` (run.sh also has a trap as a last resort).
"""

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(samples, p):
    """Nearest-rank percentile."""
    if not samples:
        return float("nan")
    s = sorted(samples)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


BOUND_LABEL = "via daemon socket, bound to the pane (`bind`: the pane host serves it)"


def summary_ns(samples):
    return {
        "n": len(samples),
        "p50_ms": pct(samples, 50) / 1e6,
        "p90_ms": pct(samples, 90) / 1e6,
        "p99_ms": pct(samples, 99) / 1e6,
        "max_ms": (max(samples) / 1e6) if samples else float("nan"),
        "mean_ms": (statistics.fmean(samples) / 1e6) if samples else float("nan"),
    }


def p99_difference(a, b, resamples=2000):
    """p99(a) - p99(b) in ms with a 95 % percentile-bootstrap interval: both sample sets are
    resampled with replacement `resamples` times. The generator is seeded so that the same
    samples give the same interval."""
    rng = random.Random(13)
    diffs = sorted(pct(rng.choices(a, k=len(a)), 99) - pct(rng.choices(b, k=len(b)), 99)
                   for _ in range(resamples))
    return {
        "p99_diff_ms": (pct(a, 99) - pct(b, 99)) / 1e6,
        "ci95_low_ms": pct(diffs, 2.5) / 1e6,
        "ci95_high_ms": pct(diffs, 97.5) / 1e6,
    }


def paired_ratio(ours, theirs, resamples=2000):
    """The ratios of two throughput rows run side by side in each repetition (`ours[i]` and
    `theirs[i]` ran one after the other), their median, and a 95 % percentile-bootstrap
    interval of that median (the repetitions resampled with replacement, seeded). A drift of
    the machine between repetitions falls on both sides of each ratio alike."""
    ratios = [a / b for a, b in zip(ours, theirs) if b > 0]
    if not ratios:
        return None
    rng = random.Random(17)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(resamples))
    return {"ratios": ratios, "median": statistics.median(ratios),
            "ci95_low": pct(medians, 2.5), "ci95_high": pct(medians, 97.5)}


def difference_line(ours, theirs, cmp):
    """The sentence that states `p99_difference`'s result for two named rows."""
    return (f"`{ours}` p99 − `{theirs}` p99: {cmp['p99_diff_ms']:+.3f} ms, 95 % bootstrap "
            f"interval {cmp['ci95_low_ms']:+.3f} to {cmp['ci95_high_ms']:+.3f} ms")


def read_proc_field(path, field):
    """The number after `field:` in the /proc file `path` (the first word after it); None
    when the file cannot be read (the process is gone) or has no such line."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def read_status_kb(pid, field):
    return read_proc_field(f"/proc/{pid}/status", field)


def read_pss_kb(pid):
    return read_proc_field(f"/proc/{pid}/smaps_rollup", "Pss")


def written_bytes(pid):
    """Bytes the process `pid` and all its descendants have written (`wchar` of
    /proc/PID/io), counting the children it already reaped, whose counts the kernel adds to
    their parent's when it waits for them; None when `pid` is gone. A child reaped while the
    tree is read would be counted twice or not at all, so the tree is read again until the
    root's own count holds still across the read."""
    def wchar(p):
        return read_proc_field(f"/proc/{p}/io", "wchar")

    def children(p):
        try:
            text = Path(f"/proc/{p}/task/{p}/children").read_text()
        except OSError:
            return []
        return [int(c) for c in text.split()]

    for _ in range(20):
        root = wchar(pid)
        if root is None:
            return None
        total, stack = root, children(pid)
        while stack:
            child = stack.pop()
            total += wchar(child) or 0
            stack.extend(children(child))
        if wchar(pid) == root:
            return total
    return None


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (None if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def sched_totals(pid):
    """(ns on a CPU, times scheduled in) summed over every thread of a process, from
    /proc/PID/task/*/schedstat: exact, unlike the 10 ms ticks of /proc/PID/stat. None if it is
    gone."""
    ns = runs = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:
            continue
        ns += int(fields[0])
        runs += int(fields[2])
    return ns, runs


# Lines of history every multiplexer keeps: belfry's default (DEFAULT_SCROLLBACK in
# proto/src/limits.rs), tmux's history-limit and GNU screen's defscrollback are set to it.
HISTORY_LINES = 2000


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = Path(args.tmp)
        self.belfry = args.belfry
        self.bench = args.bench
        self.rt = self.tmp / "rt"
        self.daemon_sock = self.rt / "default.sock"
        self.tmux_prefix = ["tmux", "-L", args.tmux_socket]
        self.results = {}
        self.errors = {}
        self.seq = 0
        self.daemon_pid = None
        self.tmux_started = False
        # GNU screen: its sockets under the temp dir (mode 0700, as screen insists), a
        # config of its own: no start-up message, as many lines of history as the others.
        self.screendir = self.tmp / "screen"
        self.screendir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.screendir, 0o700)
        os.environ["SCREENDIR"] = str(self.screendir)
        self.screenrc = self.tmp / "screenrc"
        self.screenrc.write_text(f"startup_message off\ndefscrollback {HISTORY_LINES}\n"
                                 "vbell off\n")
        # What `dtach -p` is given on stdin (the key the other send commands type).
        self.key_file = self.tmp / "key-x.txt"
        self.key_file.write_text("x")

    # ---- generic helpers -------------------------------------------------------------

    def run(self, argv, timeout=60, check=True, **kw):
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=check, **kw)

    def bench_json(self, argv, timeout=900):
        out = self.run([self.bench, *argv], timeout=timeout)
        return json.loads(out.stdout)

    def next_name(self, prefix):
        self.seq += 1
        return f"{prefix}{self.seq}"

    # ---- belfry ----------------------------------------------------------------------

    def rpc(self, path, obj, timeout=30):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall((json.dumps(obj) + "\n").encode())
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)

    def daemon(self, obj, timeout=30):
        obj = dict(obj)
        obj.setdefault("id", 1)
        reply = self.rpc(self.daemon_sock, obj, timeout)
        if not reply.get("ok"):
            raise RuntimeError(f"daemon refused {obj.get('op')}: {reply}")
        return reply

    def start_daemon(self):
        # `belfry ls` no longer starts a daemon (the read-only commands never do), so start
        # `belfry server` the way the CLI does: in a session of its own, detached.
        subprocess.Popen([self.belfry, "server"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                hello = self.daemon({"op": "hello", "versions": [1]})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.daemon_pid = hello["pid"]
        (self.tmp / "daemon.pid").write_text(str(self.daemon_pid))

    def pane_sock(self, name):
        return self.rt / "panes" / f"{name}.sock"

    def pane_pid(self, name):
        return json.loads((self.rt / "panes" / f"{name}.json").read_text())["pid"]

    def new_pane(self, name, argv, size="24x80"):
        self.run([self.belfry, "new", name, "--size", size, "--", *argv], timeout=30)

    def kill_pane(self, name):
        try:
            self.daemon({"op": "kill", "session": name}, timeout=30)
        except Exception as err:  # noqa: BLE001 - best effort
            log(f"kill {name}: {err}")

    def wait_pane(self, name, timeout_s, **cond):
        req = {"op": "wait", "session": name, "timeout_ms": int(timeout_s * 1000), **cond}
        return self.daemon(req, timeout=timeout_s + 30)

    def wait_clients(self, name, n, limit=10.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            snap = self.daemon({"op": "snapshot", "session": name})
            if snap.get("clients") == n:
                return
            time.sleep(0.02)
        raise RuntimeError(f"pane {name}: {n} client(s) did not attach within {limit} s")

    # ---- tmux ------------------------------------------------------------------------

    def tmux(self, *argv, timeout=60, check=True):
        return self.run([*self.tmux_prefix, *argv], timeout=timeout, check=check)

    def start_tmux(self):
        # A server with one idle session, so no measurement pays for the server's start-up
        # (belfry's daemon is likewise already running). No config file; status line off so
        # the pane is 24x80 when a client is attached and no clock redraws reach the client.
        self.run([*self.tmux_prefix, "-f", "/dev/null", "new-session", "-d", "-s", "keep",
                  "-x", "80", "-y", "24", "sleep 1000000"], timeout=30)
        self.tmux_started = True
        self.tmux("set-option", "-g", "status", "off")
        self.tmux("set-option", "-g", "history-limit", str(HISTORY_LINES))
        self.tmux_pid = int(self.tmux("display-message", "-p", "-t", "keep", "#{pid}").stdout)

    def tmux_wait_clients(self, session, n, limit=10.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            out = self.tmux("list-clients", "-t", session, check=False).stdout
            if len([x for x in out.splitlines() if x.strip()]) == n:
                return
            time.sleep(0.02)
        raise RuntimeError(f"tmux session {session}: client did not attach within {limit} s")

    # ---- sections --------------------------------------------------------------------

    def gen_data(self):
        nbytes = int(self.args.mb * 1_000_000)
        self.files = {}
        info = {}
        for kind in ("plain", "sgr"):
            path = self.tmp / f"data-{kind}.txt"
            info[kind] = self.bench_json(["gen", "--kind", kind, "--bytes", str(nbytes),
                                          "--out", str(path)])
            self.files[kind] = path
        self.results["data"] = info
        # Warm the page cache so no variant pays for the first read.
        for path in self.files.values():
            with open(path, "rb") as f:
                while f.read(1 << 22):
                    pass

    def finish_client(self, sink):
        """Waits for an attach client started for a throughput run; what it received."""
        if sink is None:
            return {}
        try:
            out, _ = sink.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            sink.terminate()
            out, _ = sink.communicate(timeout=10)
        try:
            r = json.loads(out)
        except ValueError:
            return {}
        out = {"client_bytes": r.get("bytes"), "redraws": r.get("redraws")}
        if r.get("mark_ns") is not None:
            out["mark_ns"] = r["mark_ns"]
        return out

    def tp_raw(self, path):
        out = self.bench_json(["raw-pty", "--", "cat", str(path)])
        return {"seconds": out["seconds"], "cpu": out["cpu_s"], "client_bytes": out["bytes"]}

    def tp_tmux(self, path, attached):
        s = self.next_name("tp")
        self.tmux("new-session", "-d", "-s", s, "-x", "80", "-y", "24",
                  f"tmux wait-for go-{s}; cat {path}; tmux wait-for -S done-{s}")
        sink = None
        try:
            if attached:
                sink = subprocess.Popen([self.bench, "sink", "--", *self.tmux_prefix,
                                         "attach-session", "-t", s],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                self.tmux_wait_clients(s, 1)
            cpu0 = cpu_seconds(self.tmux_pid)
            t0 = time.perf_counter()
            self.tmux("wait-for", "-S", f"go-{s}")
            self.tmux("wait-for", f"done-{s}", timeout=900)
            seconds = time.perf_counter() - t0
            cpu1 = cpu_seconds(self.tmux_pid)
            client = self.finish_client(sink)
            sink = None
            return {"seconds": seconds, "cpu": cpu1 - cpu0, **client}
        finally:
            if sink:
                sink.terminate()
                sink.wait(timeout=10)
            self.tmux("kill-session", "-t", s, check=False)

    def tp_relay(self, path, model=0):
        out = self.bench_json(["relay", "--model", str(model), "--", "cat", str(path)])
        return {"seconds": out["seconds"], "cpu": out["cpu_s"], "client_bytes": out["bytes"]}

    # dtach and GNU screen: each run's program waits on a FIFO for the start signal, writes
    # its parent's pid (the dtach master / the screen server) first and a done file last.

    def other_program(self, s, body):
        fifo = self.tmp / f"{s}.go"
        os.mkfifo(fifo)
        pidfile, done = self.tmp / f"{s}.pid", self.tmp / f"{s}.done"
        prog = f"echo $PPID > {pidfile}; read -r _ < {fifo}; {body}; : > {done}"
        return fifo, pidfile, done, prog

    def other_start_and_wait(self, fifo, pidfile, done, limit=900.0):
        pid = self.wait_pidfile(pidfile)
        cpu0 = cpu_seconds(pid)
        t0 = time.perf_counter()
        with open(fifo, "w") as f:
            f.write("go\n")
        deadline = time.monotonic() + limit
        while not done.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{done} did not appear within {limit:.0f} s")
            time.sleep(0.002)
        seconds = time.perf_counter() - t0
        return seconds, cpu_seconds(pid) - cpu0

    def dtach_sock(self, s):
        return str(self.tmp / f"{s}.dtach")

    def tp_dtach(self, path, attached):
        s = self.next_name("dt")
        fifo, pidfile, done, prog = self.other_program(s, f"cat {path}")
        sock = self.dtach_sock(s)
        self.run(["dtach", "-n", sock, "-E", "-z", "sh", "-c", prog], timeout=30)
        sink = None
        try:
            if attached:
                sink = subprocess.Popen([self.bench, "sink", "--", "dtach", "-a", sock, "-E",
                                         "-z", "-r", "none"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                # dtach has no list of clients; its client connects at once.
                time.sleep(0.5)
            seconds, cpu = self.other_start_and_wait(fifo, pidfile, done)
            client = self.finish_client(sink)
            sink = None
            return {"seconds": seconds, "cpu": cpu, **client}
        finally:
            if sink:
                sink.terminate()
                sink.wait(timeout=10)
            self.end_pidfile(pidfile)

    def screen(self, *argv, timeout=60, check=True):
        return self.run(["screen", "-c", str(self.screenrc), *argv], timeout=timeout,
                        check=check)

    def screen_wait_attached(self, s, limit=10.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            out = self.screen("-ls", s, check=False).stdout
            if "(Attached)" in out:
                return
            time.sleep(0.02)
        raise RuntimeError(f"screen session {s}: client did not attach within {limit} s")

    def tp_screen(self, path, attached):
        s = self.next_name("sc")
        fifo, pidfile, done, prog = self.other_program(s, f"cat {path}")
        self.screen("-S", s, "-d", "-m", "sh", "-c", prog, timeout=30)
        sink = None
        try:
            if attached:
                sink = subprocess.Popen([self.bench, "sink", "--", "screen", "-c",
                                         str(self.screenrc), "-r", s],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                self.screen_wait_attached(s)
            seconds, cpu = self.other_start_and_wait(fifo, pidfile, done)
            client = self.finish_client(sink)
            sink = None
            return {"seconds": seconds, "cpu": cpu, **client}
        finally:
            if sink:
                sink.terminate()
                sink.wait(timeout=10)
            self.screen("-S", s, "-X", "quit", check=False)
            self.end_pidfile(pidfile)

    # Long-lived dtach and screen sessions (cli, busy, memory, echo): the program writes its
    # parent's pid (the dtach master / the screen server) into <label>-dtach.pid /
    # <name>-screen.pid, so the section can read that process and end it; `cleanup` ends
    # whatever a section left.

    def wait_pidfile(self, pidfile, limit=30.0):
        deadline = time.monotonic() + limit
        while True:
            try:
                text = pidfile.read_text()
                if text.endswith("\n"):
                    return int(text)
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{pidfile} was not written within {limit:.0f} s")
            time.sleep(0.01)

    def ours(self, pid):
        """Whether `pid` is a live process of this run: its command line names the temp dir
        (every dtach and screen command of the bench does), so a reused pid is never hit."""
        try:
            return str(self.tmp).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    def end_process(self, pid, limit=5.0):
        """SIGTERM, and SIGKILL after `limit` s, a dtach master or screen server of this run.
        Its program goes with it (the PTY hangs up)."""
        if not pid or not self.ours(pid):
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + limit
        while self.ours(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.ours(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def end_pidfile(self, pidfile):
        try:
            text = pidfile.read_text()
        except OSError:
            return
        if text.endswith("\n"):
            self.end_process(int(text))
        pidfile.unlink(missing_ok=True)

    def start_dtach(self, label, body):
        """A detached dtach session running `sh -c body`; (socket, master pid)."""
        sock = self.dtach_sock(label)
        pidfile = self.tmp / f"{label}-dtach.pid"
        self.run(["dtach", "-n", sock, "-E", "-z", "sh", "-c",
                  f"echo $PPID > {pidfile}; {body}"], timeout=30)
        return sock, self.wait_pidfile(pidfile)

    def end_dtach(self, label):
        self.end_pidfile(self.tmp / f"{label}-dtach.pid")

    def start_screen(self, name, body, rc=None):
        """A detached GNU screen session `name` whose first window runs `sh -c body`; the
        server's pid."""
        pidfile = self.tmp / f"{name}-screen.pid"
        self.run(["screen", "-c", str(rc or self.screenrc), "-S", name, "-d", "-m", "sh", "-c",
                  f"echo $PPID > {pidfile}; {body}"], timeout=30)
        return self.wait_pidfile(pidfile)

    def stop_screen(self, name):
        self.screen("-S", name, "-X", "quit", check=False, timeout=30)
        self.end_pidfile(self.tmp / f"{name}-screen.pid")

    def wait_file_word(self, path, word, limit):
        """Waits for `path` to hold `word` as a whole word; its text, or None."""
        deadline = time.monotonic() + limit
        while True:
            try:
                text = path.read_text(errors="replace")
                if word in text.split():
                    return text
            except OSError:
                pass
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)

    def screen_wait_word(self, name, word, window=None, limit=10.0):
        """Waits until a screen window shows `word` (the screen as `hardcopy` writes it).
        `screen -X` returns before the server has run the command, so the file is polled."""
        path = self.tmp / f"{name}-{window}-wait.txt"
        sel = [] if window is None else ["-p", str(window)]
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            path.unlink(missing_ok=True)
            self.screen("-S", name, *sel, "-X", "hardcopy", str(path), timeout=30)
            if self.wait_file_word(path, word, 1.0) is not None:
                path.unlink(missing_ok=True)
                return
        raise RuntimeError(f"screen {name} window {window}: {word!r} not on screen within "
                           f"{limit:.0f} s")

    def tp_belfry(self, path, client):
        """client: None, "attach" (belfry attach on a PTY: the pane host writes the client's
        terminal itself), "attach-frames" (the same with BELFRY_ATTACH_HANDOVER=0: the output
        in frames, written by the client), "frames" (protocol client). With a client, the time
        runs until the last byte of the program's output (a marker line after the file) reached
        the client's terminal, as the relay's runs until its terminal has read the last byte;
        the client's exit after it (the program's exit seen, the terminal restored, the
        process gone) is kept apart as `exit_tail`."""
        name = self.next_name("tp")
        self.new_pane(name, ["sh", "-c", f"read -r _; cat {path}; echo BENCH-DONE"])
        sink = None
        try:
            pid = self.pane_pid(name)
            if client in ("attach", "attach-frames"):
                env = dict(os.environ)
                if client == "attach-frames":
                    env["BELFRY_ATTACH_HANDOVER"] = "0"
                sink = subprocess.Popen([self.bench, "sink", "--mark", "BENCH-DONE", "--",
                                         self.belfry, "attach", name],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        env=env)
            elif client == "frames":
                sink = subprocess.Popen([self.bench, "attach-client", "--socket",
                                         str(self.pane_sock(name))],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            if sink:
                self.wait_clients(name, 1)
            # Let the echo of the start key and the shell's start settle out of the timing.
            cpu0 = cpu_seconds(pid)
            t0 = time.monotonic_ns()
            self.daemon({"op": "send", "session": name, "input": [{"key": "Enter"}]})
            self.wait_pane(name, 900, exit=True)
            cpu1 = cpu_seconds(pid)
            got = self.finish_client(sink)
            sink = None
            seconds = (time.monotonic_ns() - t0) / 1e9
            mark_ns = got.pop("mark_ns", None)
            if client in ("attach", "attach-frames"):
                if mark_ns is None:
                    raise RuntimeError(f"pane {name}: BENCH-DONE never reached the client")
                to_mark = (mark_ns - t0) / 1e9
                got["exit_tail"] = seconds - to_mark
                seconds = to_mark
            snap = self.daemon({"op": "snapshot", "session": name})
            if not any("BENCH-DONE" in line for line in snap["lines"]):
                raise RuntimeError(f"pane {name} exited without BENCH-DONE on screen")
            return {"seconds": seconds, "cpu": cpu1 - cpu0, **got}
        finally:
            if sink:
                sink.terminate()
                sink.wait(timeout=10)
            self.kill_pane(name)

    VARIANTS = [
        ("raw PTY reader", "raw"),
        ("relay through a 2nd PTY, no model (the attach floor)", "relay"),
        ("relay through a 2nd PTY with belfry's model in the relaying thread", "relay+model"),
        ("relay through a 2nd PTY with belfry's model on a second thread", "relay+model-thread"),
        ("tmux, detached", "tmux"),
        ("tmux, 1 client attached", "tmux+client"),
        ("dtach, detached", "dtach"),
        ("dtach, 1 client attached", "dtach+client"),
        ("GNU screen, detached", "screen"),
        ("GNU screen, 1 client attached", "screen+client"),
        ("belfry, detached", "belfry"),
        ("belfry, 1 client (`belfry attach`)", "belfry+attach"),
        ("belfry, 1 client (`belfry attach`, output in frames: BELFRY_ATTACH_HANDOVER=0)",
         "belfry+attach-frames"),
        ("belfry, 1 client (frames to /dev/null)", "belfry+frames"),
    ]

    def throughput(self):
        runs = {}
        # BENCH_VARIANTS narrows the rows (raw, the baseline of every ratio, always runs).
        wanted = {v.strip() for v in self.args.variants.split(",") if v.strip()}
        known = {key for _, key in self.VARIANTS}
        if wanted - known:
            raise SystemExit(f"BENCH_VARIANTS: unknown {sorted(wanted - known)} "
                             f"(known: {', '.join(key for _, key in self.VARIANTS)})")
        def want(key):
            return not wanted or key == "raw" or key in wanted

        # Target 2's two rows run back to back, the relay first in one repetition and
        # `belfry attach` first in the next, so that each repetition's ratio of the two is
        # taken in one phase of this machine (whose speed moves by 10-50 % over minutes),
        # and the pair runs again after the other rows' repetitions, to `--pair-reps` in all.
        paired = want("relay") and want("belfry+attach")
        pair_order = (["relay", "belfry+attach"], ["belfry+attach", "relay"])
        reps = max(self.args.reps, self.args.pair_reps if paired else 0)
        plan = []
        for rep in range(reps):
            for kind in self.files:
                for _, key in self.VARIANTS:
                    if not want(key) or (paired and key == "belfry+attach"):
                        continue
                    if rep >= self.args.reps and not (paired and key == "relay"):
                        continue
                    if paired and key == "relay":
                        plan += [(rep, kind, k) for k in pair_order[rep % 2]]
                    else:
                        plan.append((rep, kind, key))
        for rep, kind, key in plan:
            path = self.files[kind]
            if key == "raw":
                r = self.tp_raw(path)
            elif key == "relay":
                r = self.tp_relay(path)
            elif key == "relay+model":
                r = self.tp_relay(path, model=1)
            elif key == "relay+model-thread":
                r = self.tp_relay(path, model=2)
            elif key in ("dtach", "dtach+client"):
                r = self.tp_dtach(path, key != "dtach")
            elif key in ("screen", "screen+client"):
                r = self.tp_screen(path, key != "screen")
            elif key == "tmux":
                r = self.tp_tmux(path, False)
            elif key == "tmux+client":
                r = self.tp_tmux(path, True)
            elif key == "belfry":
                r = self.tp_belfry(path, None)
            elif key == "belfry+attach":
                r = self.tp_belfry(path, "attach")
            elif key == "belfry+attach-frames":
                r = self.tp_belfry(path, "attach-frames")
            else:
                r = self.tp_belfry(path, "frames")
            runs.setdefault(f"{key}/{kind}", []).append(r)
            cpu = "—" if r.get("cpu") is None else f"{r['cpu']:.2f}"
            log(f"throughput rep {rep + 1}/{reps} {kind:5} {key:14} "
                f"{r['seconds']:.3f} s, server cpu {cpu} s, client got "
                f"{r.get('client_bytes')} bytes, {r.get('redraws')} redraws"
                + (f", client gone {r['exit_tail']:.3f} s after the last byte"
                   if r.get("exit_tail") is not None else ""))
        model = {}
        for kind, path in self.files.items():
            r = self.bench_json(["model", "--file", str(path)])
            model[kind] = r
            log(f"model alone {kind}: {r['seconds']:.3f} s (cpu {r['cpu_s']:.3f} s)")
        self.results["model"] = model
        out = {}
        for k, rs in runs.items():
            secs = [r["seconds"] for r in rs]
            cpus = [r["cpu"] for r in rs if r.get("cpu") is not None]
            got = [r["client_bytes"] for r in rs if r.get("client_bytes") is not None]
            out[k] = {"seconds": secs, "median_s": statistics.median(secs),
                      "server_cpu_s": statistics.median(cpus) if cpus else None,
                      "client_bytes": [r.get("client_bytes") for r in rs],
                      "client_bytes_median": statistics.median(got) if got else None,
                      "redraws": [r.get("redraws") for r in rs]}
            tails = [r["exit_tail"] for r in rs if r.get("exit_tail") is not None]
            if tails:
                out[k]["exit_tail_s"] = tails
        self.results["throughput"] = out

    def start_relay(self, name):
        """belfry-bench socket-relay in front of pane `name`'s socket: the floor of a second hop."""
        sock = self.tmp / f"relay-{name}.sock"
        relay = subprocess.Popen([self.bench, "socket-relay", "--listen", str(sock),
                                  "--to", str(self.pane_sock(name)), "--secs", "900"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        ready = relay.stdout.readline()
        if b"ready" not in ready:
            relay.kill()
            raise RuntimeError(f"relay did not start: {ready!r}")
        return relay, sock

    def guarded_send(self):
        name = "quiet"
        self.new_pane(name, ["sh", "-c", "stty raw -echo; exec cat >/dev/null"])
        relay = None
        try:
            self.wait_pane(name, 10, quiet_ms=300)
            relay, relay_sock = self.start_relay(name)
            out = self.bench_json(["sends", "--daemon", str(self.daemon_sock),
                                   "--host", str(self.pane_sock(name)),
                                   "--relay", str(relay_sock), "--session", name,
                                   "--count", str(self.args.sends), "--warmup", "200"])
            self.results["send"] = {"daemon": summary_ns(out["daemon"]),
                                    "host": summary_ns(out["host"]),
                                    "bound": summary_ns(out["bound"]),
                                    "relay": summary_ns(out["relay"]),
                                    "conflicts": out["conflicts"]}
        finally:
            if relay:
                relay.kill()
                relay.wait()
            self.kill_pane(name)
        # The race: a pane printing a line every millisecond, and on each path a snapshot
        # followed by a send guarded by its revision. A win is a send no output beat.
        name = "ticker"
        prog = ("import sys, time\n"
                "while True:\n"
                "    sys.stdout.write('tick\\n'); sys.stdout.flush(); time.sleep(0.001)\n")
        self.new_pane(name, ["python3", "-c", prog])
        relay = None
        try:
            time.sleep(0.5)
            relay, relay_sock = self.start_relay(name)
            n = max(self.args.sends // 5, 100)
            out = self.bench_json(["sends", "--daemon", str(self.daemon_sock),
                                   "--host", str(self.pane_sock(name)),
                                   "--relay", str(relay_sock), "--session", name,
                                   "--count", str(n), "--warmup", "20", "--race", "1"])
            self.results["send_race"] = {
                k: {**out[f"{k}_wins"], "sent": summary_ns(out[k])}
                for k in ("daemon", "host", "bound", "relay")}
        finally:
            if relay:
                relay.kill()
                relay.wait()
            self.kill_pane(name)

    def cli(self):
        cat_prog = "stty raw -echo; exec cat >/dev/null"
        seq_prog = "seq 2000; exec sleep 1000000"
        self.new_pane("clicat", ["sh", "-c", cat_prog])
        self.new_pane("cliseq", ["sh", "-c", seq_prog])
        self.tmux("new-session", "-d", "-s", "clicat", "-x", "80", "-y", "24", cat_prog)
        self.tmux("new-session", "-d", "-s", "cliseq", "-x", "80", "-y", "24", seq_prog)
        # screen's capture writes its file (the server does, after the client has exited).
        hardcopy = self.tmp / "cli-hardcopy.txt"
        screen = ["screen", "-c", str(self.screenrc)]
        try:
            self.start_screen("clicat", cat_prog)
            self.start_screen("cliseq", seq_prog)
            dtach_sock, _ = self.start_dtach("clicat", cat_prog)
            self.wait_pane("cliseq", 10, regex="(?m)^2000$")
            self.wait_pane("clicat", 10, quiet_ms=200)
            self.screen_wait_word("cliseq", "2000")
            time.sleep(0.3)
            hardcopy.unlink(missing_ok=True)
            spec = {"runs": self.args.cli_runs, "warmup": 10, "commands": [
                {"name": "belfry send", "argv": [self.belfry, "send", "clicat", "--text", "x"]},
                {"name": "tmux send-keys", "argv": [*self.tmux_prefix, "send-keys", "-t",
                                                    "clicat", "x"]},
                {"name": "screen -X stuff", "argv": [*screen, "-S", "clicat", "-X", "stuff",
                                                     "x"]},
                {"name": "dtach -p", "argv": ["dtach", "-p", dtach_sock],
                 "stdin": str(self.key_file)},
                {"name": "belfry peek", "argv": [self.belfry, "peek", "cliseq"]},
                {"name": "tmux capture-pane -p", "argv": [*self.tmux_prefix, "capture-pane",
                                                          "-p", "-t", "cliseq"]},
                {"name": "screen -X hardcopy", "argv": [*screen, "-S", "cliseq", "-X",
                                                        "hardcopy", str(hardcopy)]},
            ]}
            spec_path = self.tmp / "cli-spec.json"
            spec_path.write_text(json.dumps(spec))
            out = self.bench_json(["times", "--spec", str(spec_path)])
            res = {}
            for k, v in out.items():
                res[k] = {**summary_ns(v["samples_ns"]), "failures": v["failures"]}
            peek = out["belfry peek"]["first_stdout"] or ""
            cap = out["tmux capture-pane -p"]["first_stdout"] or ""
            copied = self.wait_file_word(hardcopy, "2000", 5.0)
            res["check"] = {"peek_has_2000": "2000" in peek, "capture_has_2000": "2000" in cap,
                            "hardcopy_has_2000": copied is not None}
            self.results["cli"] = res
        finally:
            self.kill_pane("clicat")
            self.kill_pane("cliseq")
            self.tmux("kill-session", "-t", "clicat", check=False)
            self.tmux("kill-session", "-t", "cliseq", check=False)
            self.stop_screen("clicat")
            self.stop_screen("cliseq")
            self.end_dtach("clicat")

    def busy(self):
        """peek and send while the pane's program prints without pause: `cat` of the plain
        file in a loop, as fast as each tool reads it (results["busy"]), and then a program
        printing a steady 4 MiB a second that every tool keeps up with (results["busy_paced"]).
        The first loads the machine in proportion to how fast the tool reads; the second loads
        it alike for every tool. How idle the machine was while each tool's commands ran is
        reported beside them."""
        if not getattr(self, "files", None):
            self.gen_data()
        self.busy_with(f"while :; do cat {self.files['plain']}; done", "busy")
        pace = shlex.join([str(self.bench), "pace", "--file", str(self.files["plain"])])
        self.busy_with(f"exec {pace}", "busy_paced")

    def busy_with(self, prog, key):
        """peek and send while the pane runs `prog`, into results[key].

        One busy session at a time, in rounds: each round gives belfry, tmux, GNU screen and
        dtach a fresh busy session in turn (the order reversed every other round), so a drift
        of the machine's load over the section falls on every tool alike. A p99 of 100 samples
        is the second-slowest run and moved by several ms between runs of the same build; the
        samples of every round are pooled, and the comparison with tmux carries a bootstrap
        interval of the difference of the p99s."""
        runs = self.args.busy_runs
        rounds = max(1, self.args.busy_rounds)
        pools, failures, round_p99, idle, printed = {}, {}, {}, {}, {}
        check = {"hardcopy_has_text": True}
        # The pane's program writes its pid first, so what it printed while the commands ran
        # can be read from its process tree (`written_bytes`), the same way for every tool.
        # Each session's measurement takes the file, so the next session's program writes it
        # afresh.
        pidfile = self.tmp / f"{key}-program.pid"
        program = f"echo $$ > {pidfile}; {prog}"

        def program_pid():
            try:
                return self.wait_pidfile(pidfile, limit=5)
            except RuntimeError:
                return None
            finally:
                pidfile.unlink(missing_ok=True)

        def cpu_times():
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
            return sum(fields), fields[3] + fields[4]

        def measure(commands):
            spec = {"runs": runs, "warmup": 5, "commands": commands}
            spec_path = self.tmp / "busy-spec.json"
            spec_path.write_text(json.dumps(spec))
            pid = program_pid()
            wrote0 = written_bytes(pid) if pid else None
            t0 = time.monotonic()
            total0, idle0 = cpu_times()
            out = self.bench_json(["times", "--spec", str(spec_path)], timeout=900)
            total1, idle1 = cpu_times()
            t1 = time.monotonic()
            wrote1 = written_bytes(pid) if pid else None
            for k, v in out.items():
                pools.setdefault(k, []).extend(v["samples_ns"])
                failures[k] = failures.get(k, 0) + v["failures"]
                round_p99.setdefault(k, []).append(pct(v["samples_ns"], 99) / 1e6)
                spent = idle.setdefault(k, [0, 0])
                spent[0] += total1 - total0
                spent[1] += idle1 - idle0
                if wrote0 is not None and wrote1 is not None:
                    rate = printed.setdefault(k, [0, 0.0])
                    rate[0] += wrote1 - wrote0
                    rate[1] += t1 - t0

        # `/bin/true` runs among every tool's commands: the start of a process that asks
        # nobody anything, on the machine as that tool's busy pane leaves it. Beside a raw PTY
        # reader (the baseline of section 1, which reads as fast as the terminal layer hands
        # the output over and does nothing else with it) it gives what any tool reading at
        # that rate leaves of the machine.
        def beside(tool):
            return {"name": f"/bin/true beside {tool}", "argv": ["/bin/true"]}

        def on_raw(r):
            reader = subprocess.Popen(
                [self.bench, "raw-pty", "--timeout-s", "900", "--", "sh", "-c", program],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                time.sleep(0.5)
                measure([beside("a raw PTY reader")])
            finally:
                # The reader's end closes the terminal: its program is hung up and ends.
                reader.kill()
                reader.wait(timeout=30)

        def on_belfry(r):
            name = f"{key}{r}"
            self.new_pane(name, ["sh", "-c", program])
            try:
                time.sleep(0.5)
                measure([
                    {"name": "belfry peek", "argv": [self.belfry, "peek", name]},
                    {"name": "belfry send", "argv": [self.belfry, "send", name, "--text", "x"]},
                    beside("belfry"),
                ])
            finally:
                self.kill_pane(name)

        def on_tmux(r):
            name = f"{key}{r}"
            self.tmux("new-session", "-d", "-s", name, "-x", "80", "-y", "24", program)
            try:
                time.sleep(0.5)
                measure([
                    {"name": "tmux capture-pane -p", "argv": [*self.tmux_prefix, "capture-pane",
                                                              "-p", "-t", name]},
                    {"name": "tmux send-keys", "argv": [*self.tmux_prefix, "send-keys", "-t",
                                                        name, "x"]},
                    beside("tmux"),
                ])
            finally:
                self.tmux("kill-session", "-t", name, check=False)

        def on_screen(r):
            name = f"{key}{r}"
            screen = ["screen", "-c", str(self.screenrc)]
            hardcopy = self.tmp / f"{key}{r}-hardcopy.txt"
            try:
                self.start_screen(name, program)
                time.sleep(0.5)
                measure([
                    {"name": "screen -X hardcopy", "argv": [*screen, "-S", name, "-X",
                                                            "hardcopy", str(hardcopy)]},
                    {"name": "screen -X stuff", "argv": [*screen, "-S", name, "-X", "stuff",
                                                         "x"]},
                    beside("GNU screen"),
                ])
                # The file the hardcopies wrote holds the pane's text (lines of the file).
                deadline = time.monotonic() + 5
                text = ""
                while not text and time.monotonic() < deadline:
                    try:
                        text = hardcopy.read_text(errors="replace").strip()
                    except OSError:
                        pass
                    if not text:
                        time.sleep(0.01)
                check["hardcopy_has_text"] = check["hardcopy_has_text"] and bool(text)
            finally:
                self.stop_screen(name)

        def on_dtach(r):
            label = f"{key}{r}"
            try:
                sock, _ = self.start_dtach(label, program)
                time.sleep(0.5)
                measure([
                    {"name": "dtach -p", "argv": ["dtach", "-p", sock],
                     "stdin": str(self.key_file)},
                    beside("dtach"),
                ])
            finally:
                self.end_dtach(label)

        tools = [on_belfry, on_tmux, on_screen, on_dtach, on_raw]
        for r in range(rounds):
            log(f"{key}: round {r + 1} of {rounds}")
            for tool in (tools if r % 2 == 0 else list(reversed(tools))):
                tool(r)
        res = {k: {**summary_ns(v), "failures": failures[k], "rounds": rounds,
                   "round_p99_ms": round_p99[k],
                   "machine_idle_pct": 100 * idle[k][1] / max(1, idle[k][0]),
                   "printed_mb_per_s": (printed[k][0] / 1e6 / printed[k][1]
                                        if k in printed and printed[k][1] > 0 else None)}
               for k, v in pools.items()}
        res["check"] = check
        res["program"] = prog
        res["compare"] = {
            b: {"other": t, **p99_difference(pools[b], pools[t])}
            for b, t in (("belfry peek", "tmux capture-pane -p"),
                         ("belfry send", "tmux send-keys"))
            if b in pools and t in pools
        }
        self.results[key] = res

    def echo(self):
        prog = "stty raw -echo; exec cat"
        self.new_pane("echo", ["sh", "-c", prog])
        self.tmux("new-session", "-d", "-s", "echo", "-x", "80", "-y", "24", prog)
        try:
            sock, _ = self.start_dtach("echo", prog)
            self.start_screen("echo", prog)
            self.wait_pane("echo", 10, quiet_ms=200)
            time.sleep(0.3)
            # Alternating blocks, so every client sees the same background load.
            clients = (("belfry attach", [self.belfry, "attach", "echo"]),
                       ("belfry attach, keys read by the client (BELFRY_ATTACH_INPUT=0)",
                        ["env", "BELFRY_ATTACH_INPUT=0", self.belfry, "attach", "echo"]),
                       ("belfry attach, output in frames (BELFRY_ATTACH_HANDOVER=0)",
                        ["env", "BELFRY_ATTACH_HANDOVER=0", self.belfry, "attach", "echo"]),
                       ("tmux attach", [*self.tmux_prefix, "attach-session", "-t", "echo"]),
                       ("dtach -a", ["dtach", "-a", sock, "-E", "-z", "-r", "none"]),
                       ("screen -r", ["screen", "-c", str(self.screenrc), "-r", "echo"]),
                       ("pane host alone: bench attaches with frames", None))
            blocks = max(1, self.args.echo_blocks)
            per_block = max(1, self.args.keys // blocks)
            samples = {label: [] for label, _ in clients}
            lost = {label: 0 for label, _ in clients}
            for block in range(blocks):
                for label, argv in clients:
                    if argv is None:
                        out = self.bench_json(["frame-echo", "--socket",
                                               str(self.pane_sock("echo")), "--keys",
                                               str(per_block), "--warmup", "50"], timeout=600)
                    else:
                        out = self.bench_json(["echo-latency", "--keys", str(per_block),
                                               "--warmup", "50", "--", *argv], timeout=600)
                    samples[label] += out["samples_ns"]
                    lost[label] += out["timeouts"]
                    log(f"echo block {block + 1}/{blocks} {label}: "
                        f"p50 {pct(out['samples_ns'], 50) / 1e6:.3f} ms "
                        f"p99 {pct(out['samples_ns'], 99) / 1e6:.3f} ms")
            res = {label: {**summary_ns(samples[label]), "timeouts": lost[label]}
                   for label, _ in clients}
            self.results["echo"] = res
            # The p99 of 1000 keys moves by a few hundredths of a millisecond between runs,
            # as much as the gap to tmux: the comparison carries its bootstrap interval.
            self.results["echo_compare"] = p99_difference(samples["belfry attach"],
                                                          samples["tmux attach"])
        finally:
            self.kill_pane("echo")
            self.tmux("kill-session", "-t", "echo", check=False)
            self.stop_screen("echo")
            self.end_dtach("echo")

    def memory(self):
        n = self.args.panes
        prog = "seq 2000; exec sleep 1000000"
        more = []
        base_daemon = read_status_kb(self.daemon_pid, "VmRSS")
        base_tmux = read_status_kb(self.tmux_pid, "VmRSS")
        names = [f"mem{i}" for i in range(n)]
        # GNU screen: one server, its first window idle (no output), then n windows; the
        # server's growth per window. Its window numbers are capped by maxwin (set before
        # the first window exists, so in the config).
        mem_rc = self.tmp / "screenrc-mem"
        mem_rc.write_text(self.screenrc.read_text() + f"maxwin {n + 1}\n")
        # dtach: n masters, each its own process; they keep no screen and no history.
        dtach_labels = [f"mem{i}" for i in range(n)]
        try:
            sc_pid = self.start_screen("mem", "exec sleep 1000000", rc=mem_rc)
            time.sleep(0.5)
            base_sc = {f: read_status_kb(sc_pid, f) for f in ("VmRSS", "RssAnon")}
            base_sc["Pss"] = read_pss_kb(sc_pid)
            self.new_pane("memempty", ["sleep", "1000000"])
            for name in names:
                self.new_pane(name, ["sh", "-c", prog])
            for name in names:
                self.wait_pane(name, 30, regex="(?m)^2000$")
            self.tmux("new-session", "-d", "-s", "mem", "-x", "80", "-y", "24", prog)
            for _ in range(n - 1):
                self.tmux("new-window", "-t", "mem", prog)
            deadline = time.monotonic() + 60
            pending = set(range(n))
            while pending and time.monotonic() < deadline:
                windows = self.tmux("list-windows", "-t", "mem", "-F", "#{window_index}").stdout
                for idx in [int(w) for w in windows.split()]:
                    if idx in pending:
                        cap = self.tmux("capture-pane", "-p", "-t", f"mem:{idx}").stdout
                        if "2000" in cap.split():
                            pending.discard(idx)
                if pending:
                    time.sleep(0.1)
            if pending:
                raise RuntimeError(f"{len(pending)} tmux windows did not print 2000 in time")
            # Window N (numbered explicitly) says when it is done, so every window exists
            # before `-p N` selects it; then its screen is checked. (screen expands $VARS in
            # a command's words itself, so the program names its number, not $WINDOW.)
            for idx in range(1, n + 1):
                sc_prog = (f"seq 2000; : > {self.tmp}/memscreen-{idx}.done; "
                           "exec sleep 1000000")
                self.screen("-S", "mem", "-X", "screen", str(idx), "sh", "-c", sc_prog,
                            timeout=30)
            deadline = time.monotonic() + 60
            for idx in range(1, n + 1):
                while not (self.tmp / f"memscreen-{idx}.done").exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"screen window {idx} did not print 2000 in time")
                    time.sleep(0.01)
            for idx in range(1, n + 1):
                self.screen_wait_word("mem", "2000", window=idx, limit=30)
            sc_info = self.screen("-S", "mem", "-p", "1", "-Q", "info", check=False,
                                  timeout=30).stdout.strip()
            for label in dtach_labels:
                self.start_dtach(label, f"seq 2000; : > {self.tmp / label}-dtach.done; "
                                        "exec sleep 1000000")
            deadline = time.monotonic() + 30
            for label in dtach_labels:
                while not (self.tmp / f"{label}-dtach.done").exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"dtach {label} did not print 2000 in time")
                    time.sleep(0.01)
            time.sleep(1.0)
            hosts = [self.pane_pid(name) for name in names]
            rss = [read_status_kb(pid, "VmRSS") for pid in hosts]
            pss = [read_pss_kb(pid) for pid in hosts]
            anon = [read_status_kb(pid, "RssAnon") for pid in hosts]
            rfile = [read_status_kb(pid, "RssFile") for pid in hosts]
            hist = self.daemon({"op": "snapshot", "session": names[0]})["history"]
            empty_pid = self.pane_pid("memempty")
            daemon_rss = read_status_kb(self.daemon_pid, "VmRSS")
            tmux_rss = read_status_kb(self.tmux_pid, "VmRSS")
            tmux_hist = self.tmux("display-message", "-p", "-t", "mem:0",
                                  "#{history_size}").stdout.strip()
            sc_after = {f: read_status_kb(sc_pid, f) for f in ("VmRSS", "RssAnon")}
            sc_after["Pss"] = read_pss_kb(sc_pid)
            masters = [self.wait_pidfile(self.tmp / f"{label}-dtach.pid")
                       for label in dtach_labels]
            d_rss = [read_status_kb(pid, "VmRSS") for pid in masters]
            d_anon = [read_status_kb(pid, "RssAnon") for pid in masters]
            d_pss = [read_pss_kb(pid) for pid in masters]
            # `screen -Q info` on window 1: "(x,y)/(w,h)+HIST ...", HIST its scrollback size.
            sc_hist = None
            if "+" in sc_info:
                word = sc_info.split("+", 1)[1].split()[0]
                sc_hist = int(word) if word.isdigit() else None
            self.results["memory"] = {
                "panes": n,
                "belfry_history_lines": hist,
                "tmux_history_lines": tmux_hist,
                "pane_host_rss_kb": {"mean": statistics.fmean(rss), "min": min(rss),
                                     "max": max(rss)},
                "pane_host_pss_kb_mean": statistics.fmean(pss),
                "pane_host_rss_anon_kb_mean": statistics.fmean(anon),
                "pane_host_rss_file_kb_mean": statistics.fmean(rfile),
                "empty_pane_host_rss_kb": read_status_kb(empty_pid, "VmRSS"),
                "empty_pane_host_rss_anon_kb": read_status_kb(empty_pid, "RssAnon"),
                "daemon_rss_kb": {"before": base_daemon, "after": daemon_rss},
                "belfry_total_rss_kb": sum(rss) + daemon_rss,
                "belfry_total_pss_kb": sum(pss) + (read_pss_kb(self.daemon_pid) or 0),
                "tmux_server_rss_kb": {"before": base_tmux, "after": tmux_rss},
                "tmux_per_window_kb": (tmux_rss - base_tmux) / n,
                "screen_scrollback_lines": sc_hist,
                "screen_info": sc_info,
                "screen_server_kb": {"before": base_sc, "after": sc_after},
                "screen_per_window_kb": {f: (sc_after[f] - base_sc[f]) / n
                                         for f in ("VmRSS", "RssAnon", "Pss")},
                "dtach_master_rss_kb": {"mean": statistics.fmean(d_rss), "min": min(d_rss),
                                        "max": max(d_rss)},
                "dtach_master_rss_anon_kb_mean": statistics.fmean(d_anon),
                "dtach_master_pss_kb_mean": statistics.fmean(d_pss),
                "dtach_total_rss_kb": sum(d_rss),
                "dtach_history_lines": 0,
            }
            # Issue 13 asks for 200 panes too: more belfry panes of the same kind beside the
            # first n (the other tools' per-window figures do not depend on the count), and
            # every pane host measured again.
            more = [f"mem{i}" for i in range(n, n + max(0, self.args.more_panes))]
            for name in more:
                self.new_pane(name, ["sh", "-c", prog])
            for name in more:
                self.wait_pane(name, 30, regex="(?m)^2000$")
            if more:
                time.sleep(1.0)
                every = [self.pane_pid(name) for name in names + more]
                self.results["memory"]["more"] = {
                    "panes": len(every),
                    "pane_host_pss_kb_mean": statistics.fmean(
                        [read_pss_kb(pid) for pid in every]),
                    "pane_host_rss_anon_kb_mean": statistics.fmean(
                        [read_status_kb(pid, "RssAnon") for pid in every]),
                }
        finally:
            for name in ["memempty", *names, *more]:
                self.kill_pane(name)
            self.tmux("kill-session", "-t", "mem", check=False)
            self.stop_screen("mem")
            for label in dtach_labels:
                self.end_dtach(label)

    def dispatch(self):
        hooks0 = self.tmp / "hooks-0.json"
        hooks3 = self.tmp / "hooks-3.json"
        hooks0.write_text(json.dumps({"version": 1, "events": {"before-tool": []}}))
        true = {"argv": ["/bin/true"]}
        hooks3.write_text(json.dumps({"version": 1, "events": {
            "before-tool": [{"matcher": "*", "handlers": [true, true, true]}]}}))
        for f in (hooks0, hooks3):
            os.chmod(f, 0o600)
        stdin = self.tmp / "hook-stdin.json"
        stdin.write_text(json.dumps({
            "hook_event_name": "before-tool", "session_id": "bench", "cwd": str(self.tmp),
            "transcript_path": str(self.tmp / "transcript.jsonl"), "tool_name": "shell",
            "tool_input": {"command": "ls -la"}}))
        disp = [self.belfry, "dispatch", "--event", "before-tool"]
        # Inside a pane, dispatch also forwards the event to the daemon (a `hook` op).
        self.new_pane("hookpane", ["sleep", "1000000"])
        ident = self.daemon({"op": "snapshot", "session": "hookpane"})
        in_pane = {"BELFRY_HOOKS_FILE": str(hooks0), "BELFRY_SESSION": "hookpane",
                   "BELFRY_SOCKET": str(self.daemon_sock),
                   "BELFRY_INCARNATION": ident["incarnation"],
                   "BELFRY_GENERATION": ident["generation"]}
        spec = {"runs": self.args.dispatch_runs, "warmup": 20, "commands": [
            {"name": "dispatch, no hooks file", "argv": disp, "stdin": str(stdin),
             "env": {"BELFRY_HOOKS_FILE": ""}},
            {"name": "dispatch, 0 handlers", "argv": disp, "stdin": str(stdin),
             "env": {"BELFRY_HOOKS_FILE": str(hooks0)}},
            {"name": "dispatch, 0 handlers, inside a pane", "argv": disp, "stdin": str(stdin),
             "env": in_pane},
            {"name": "dispatch, 3 handlers (/bin/true)", "argv": disp, "stdin": str(stdin),
             "env": {"BELFRY_HOOKS_FILE": str(hooks3)}},
            {"name": "python3 -I -c pass", "argv": ["python3", "-I", "-c", "pass"]},
            {"name": "/bin/true", "argv": ["/bin/true"]},
        ]}
        spec_path = self.tmp / "dispatch-spec.json"
        spec_path.write_text(json.dumps(spec))
        try:
            out = self.bench_json(["times", "--spec", str(spec_path)], timeout=900)
        finally:
            self.kill_pane("hookpane")
        res = {}
        for k, v in out.items():
            res[k] = {**summary_ns(v["samples_ns"]), "failures": v["failures"],
                      "stdout": (v["first_stdout"] or "").strip()}
        self.results["dispatch"] = res

    def ding(self):
        """DING latency: post → first notice byte in the pane (aggressive), adapter lease →
        first notice byte (rich).

        Every message costs the notice's 500 ms pause before Enter (spec §7.3), and a pane's
        next message is posted only after that Enter. The three panes take turns in 200 ms slots (a message on
        each every 600 ms), so N messages per path take about 0.6·N s, plus the poll-only
        messages at about 0.65 s each."""
        n, poll_n, warm = self.args.ding_n, self.args.ding_poll_n, 5
        prog = [self.bench, "stamp-recv", "--log"]
        logs = {k: self.tmp / f"ding-{k}-recv.log" for k in ("cli", "direct", "rich")}
        alog = self.tmp / "ding-rich-adapter.log"
        alog.touch()
        panes = {"cli": "dingcli", "direct": "dingdirect", "rich": "dingrich"}
        try:
            # Only a pane declared an agent gets notices (a plain `belfry new` has policy
            # none), so the aggressive panes say so.
            for k in ("cli", "direct"):
                self.run([self.belfry, "new", panes[k], "--size", "24x80", "--ding-delivery",
                          "aggressive", "--", *prog, str(logs[k])], timeout=30)
            self.run([self.belfry, "new", panes["rich"], "--size", "24x80",
                      "--ding-delivery", "turn-boundary+fresh-idle",
                      "--ding-adapter", self.bench, "--ding-adapter", "bench-adapter",
                      "--ding-adapter", str(alog), "--", *prog, str(logs["rich"])], timeout=30)
            for name in panes.values():
                self.wait_pane(name, 15, regex="stamp-recv READY")
            slot = self.args.ding_slot_ms
            per = 3 * slot / 1000 if slot else 3 * 0.52
            est = (n + warm) * per + (poll_n + warm) * 0.65 if poll_n else (n + warm) * per
            log(f"ding: {n} messages per path (+{warm} warm-up), {poll_n} poll-only; "
                f"about {est / 60:.0f} min")
            argv = ["ding", "--belfry", self.belfry, "--daemon", str(self.daemon_sock),
                    "--state", str(self.tmp / "state"), "--count", str(n),
                    "--poll-count", str(poll_n), "--warmup", str(warm),
                    "--slot-ms", str(slot), "--adapter-log", str(alog)]
            for k, name in panes.items():
                argv += [f"--{k}", name, f"--{k}-log", str(logs[k])]
            out = self.bench_json(argv, timeout=300 + 20 * (3 * (n + warm) + poll_n + warm))
            out["counters"] = {}
            for k, name in panes.items():
                st = self.daemon({"op": "ding.status", "session": name})["status"]
                out["counters"][k] = st["counters"]
            for k, v in out["series"].items():
                if v["to_first_ns"]:
                    log(f"ding {k}: p50 {pct(v['to_first_ns'], 50) / 1e6:.3f} ms "
                        f"p99 {pct(v['to_first_ns'], 99) / 1e6:.3f} ms, lost {v['lost']}")
            self.results["ding"] = out
        finally:
            for name in panes.values():
                self.kill_pane(name)

    # ---- remote (spec §6.2) ----------------------------------------------------------

    def start_sshd(self):
        """A real sshd on 127.0.0.1 whose sessions see this run's belfry and tmux (the far
        machine is this one), with a throwaway host key and user key, and a client config
        that keeps one master connection (ControlMaster), as docs/remote.md advises."""
        d = self.tmp / "sshd"
        d.mkdir(exist_ok=True)
        for key in ("host_key", "user_key"):
            self.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)])
        shutil.copy(d / "user_key.pub", d / "authorized_keys")
        os.makedirs("/run/sshd", exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {k: os.environ[k] for k in ("BELFRY_RUNTIME_DIR", "BELFRY_STATE",
                                          "XDG_STATE_HOME", "TMUX_TMPDIR") if k in os.environ}
        env["PATH"] = f"{Path(self.belfry).parent}:/usr/bin:/bin"
        set_env = " ".join(f'"{k}={v}"' for k, v in env.items())
        (d / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            f"StrictModes no\nPidFile none\nPrintMotd no\nSetEnv {set_env}\n")
        host_key = (d / "host_key.pub").read_text().strip()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
        user = self.run(["id", "-un"]).stdout.strip()
        (d / "ssh_config").write_text(
            f"Host box\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
            f"  IdentityFile {d / 'user_key'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {d / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
            f"  BatchMode yes\n  LogLevel ERROR\n  ControlMaster auto\n"
            f"  ControlPath {d}/cm-%C\n  ControlPersist 120\n")
        self.sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(d / "sshd.log", "w"))
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd did not listen: {(d / 'sshd.log').read_text()}")
                time.sleep(0.05)
        self.ssh = ["ssh", "-F", str(d / "ssh_config")]
        # The master connection, opened once: what every later ssh of the run reuses.
        self.run([*self.ssh, "box", "true"], timeout=60)

    def remote(self):
        if not Path("/usr/sbin/sshd").exists():
            raise RuntimeError("/usr/sbin/sshd is missing (Debian's openssh-server)")
        self.start_sshd()
        name = "rquiet"
        quiet = "stty raw -echo; exec cat >/dev/null"
        self.new_pane(name, ["sh", "-c", quiet])
        prog = "stty raw -echo; exec cat"
        self.new_pane("recho", ["sh", "-c", prog])
        self.tmux("new-session", "-d", "-s", "recho", "-x", "80", "-y", "24", prog)
        proxy = None
        try:
            self.wait_pane(name, 10, quiet_ms=300)
            self.wait_pane("recho", 10, quiet_ms=200)
            # 1. The guarded send's round trip: one request at a time on one kept connection,
            # local (the daemon's socket) and over ssh (`belfry proxy` at the far end),
            # interleaved so both see the same load.
            proxy = subprocess.Popen([*self.ssh, "-T", "box", "belfry", "proxy"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            local = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            local.settimeout(30)
            local.connect(str(self.daemon_sock))
            local_file = local.makefile("rwb")

            def call(stream_in, stream_out, request):
                stream_in.write((json.dumps(request) + "\n").encode())
                stream_in.flush()
                line = stream_out.readline()
                if not line:
                    raise RuntimeError("the connection closed")
                return json.loads(line)

            paths = {"local": (local_file, local_file), "ssh": (proxy.stdin, proxy.stdout)}
            for label, (w, r) in paths.items():
                hello = call(w, r, {"id": 0, "op": "hello", "versions": [1]})
                if not hello.get("ok"):
                    raise RuntimeError(f"{label} hello refused: {hello}")
            revision = self.daemon({"op": "snapshot", "session": name})["revision"]
            n, warm = self.args.remote_sends, 20
            samples = {"local": [], "ssh": []}
            conflicts = 0
            for i in range(2 * (n + warm)):
                label = ("local", "ssh")[i % 2]
                w, r = paths[label]
                request = {"id": i + 1, "op": "send", "session": name,
                           "expect": {"revision": revision}, "input": [{"text": "x"}]}
                t0 = time.perf_counter_ns()
                reply = call(w, r, request)
                elapsed = time.perf_counter_ns() - t0
                if reply.get("result") == "sent":
                    revision = reply["revision"]
                    if i // 2 >= warm:
                        samples[label].append(elapsed)
                elif reply.get("result") == "conflict":
                    conflicts += 1
                    revision = reply["actual"]["revision"]
                else:
                    raise RuntimeError(f"{label} send: {reply}")
            res = {k: summary_ns(v) for k, v in samples.items()}
            res["conflicts"] = conflicts
            # 2. A whole `belfry send --expect-revision` command, local and with --host (one
            # ssh per command over the kept master connection).
            ssh_command = " ".join(self.ssh)
            runs = max(3, self.args.remote_cli_runs)
            # `ssh box true` is the floor of any command over ssh: the far login shell's
            # start-up included.
            cli = {"local": [], "ssh": [], "ssh box true": []}
            for i in range(runs + 2):
                for label in ("local", "ssh", "ssh box true"):
                    rev = self.daemon({"op": "snapshot", "session": name})["revision"]
                    host = ["--host", "box", "--ssh-command", ssh_command] if label == "ssh" else []
                    argv = [self.belfry, *host, "send", name, "--expect-revision", str(rev),
                            "--text", "y"]
                    if label == "ssh box true":
                        argv = [*self.ssh, "box", "true"]
                    t0 = time.perf_counter_ns()
                    out = self.run(argv, timeout=60, check=False)
                    elapsed = time.perf_counter_ns() - t0
                    if out.returncode != 0:
                        raise RuntimeError(f"{label} belfry send exited {out.returncode}: "
                                           f"{out.stderr.strip()}")
                    if i >= 2:
                        cli[label].append(elapsed)
            res["cli"] = {k: summary_ns(v) for k, v in cli.items()}
            # 3. Key echo through an attach client: belfry and tmux, each local and over ssh
            # (`belfry --host box attach` against `ssh -t box tmux attach`).
            tmux_attach = " ".join([*self.tmux_prefix, "attach-session", "-t", "recho"])
            clients = (
                ("belfry attach", [self.belfry, "attach", "recho"]),
                ("tmux attach", [*self.tmux_prefix, "attach-session", "-t", "recho"]),
                ("belfry --host box attach", [self.belfry, "--host", "box", "--ssh-command",
                                              ssh_command, "attach", "recho"]),
                ("ssh -t box tmux attach", [*self.ssh, "-t", "box", tmux_attach]),
            )
            keys = max(1, self.args.keys // 4)
            echo = {}
            for label, argv in clients:
                out = self.bench_json(["echo-latency", "--keys", str(keys), "--warmup", "50",
                                       "--", *argv], timeout=600)
                echo[label] = {**summary_ns(out["samples_ns"]), "timeouts": out["timeouts"]}
                log(f"remote echo {label}: p50 {echo[label]['p50_ms']:.3f} ms "
                    f"p99 {echo[label]['p99_ms']:.3f} ms")
            res["echo"] = echo
            self.results["remote"] = res
        finally:
            if proxy is not None:
                proxy.stdin.close()
                try:
                    proxy.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proxy.kill()
            self.kill_pane(name)
            self.kill_pane("recho")
            self.tmux("kill-session", "-t", "recho", check=False)
            if getattr(self, "sshd", None) is not None:
                self.run([*self.ssh, "-O", "exit", "box"], timeout=10, check=False)
                self.sshd.kill()
                self.sshd.wait()
    def idle(self):
        """What idle panes cost: `--idle-panes` panes, half aggressive agents, half with the
        rich policy and `--idle-held` held messages each, whose adapter never speaks (so
        every message stays held, and nothing but belfry itself runs). After a settling
        pause, the CPU time and the times scheduled in of the daemon and every pane host
        (every thread, /proc/PID/task/*/schedstat) over `--idle-secs`; tmux's server and GNU
        screen's with as many idle windows, and as many dtach masters, over the same window,
        for scale."""
        n, held, secs = self.args.idle_panes, self.args.idle_held, self.args.idle_secs
        rich = [f"idr{i}" for i in range(n // 2)]
        aggressive = [f"ida{i}" for i in range(n - n // 2)]
        state = self.tmp / "state"
        dtachs = [f"idd{i}" for i in range(n)]
        try:
            t0 = time.monotonic()
            stamp = int(time.time() * 1000) - 10_000_000
            for i, name in enumerate(rich):
                new = state / "inbox" / name / "new"
                new.mkdir(parents=True, exist_ok=True, mode=0o700)
                for d in (new.parent, new.parent.parent, state):
                    os.chmod(d, 0o700)
                for j in range(held):
                    rand6 = f"{(i * held + j) % 16**6:06x}"
                    (new / f"{stamp + j}-{rand6}.md").write_text(
                        f"---\nfrom: bench\nsubject: held {j}\n---\nheld message {j}\n")
            log(f"idle: {len(rich) * held} held messages written in "
                f"{time.monotonic() - t0:.1f} s")
            for name in aggressive:
                self.run([self.belfry, "new", name, "--size", "24x80", "--ding-delivery",
                          "aggressive", "--", "sleep", "1000000"], timeout=30)
            for name in rich:
                self.run([self.belfry, "new", name, "--size", "24x80", "--ding-delivery",
                          "turn-boundary+fresh-idle", "--ding-adapter", "sleep",
                          "--ding-adapter", "1000000", "--", "sleep", "1000000"], timeout=30)
            self.run([*self.tmux_prefix, "new-session", "-d", "-s", "idle", "-x", "80", "-y",
                      "24", "sleep 1000000"], timeout=30)
            for _ in range(n - 1):
                self.tmux("new-window", "-t", "idle", "sleep 1000000")
            dtach_pids = [self.start_dtach(label, "exec sleep 1000000")[1] for label in dtachs]
            screen_pid = self.start_screen("idle", "exec sleep 1000000")
            for idx in range(1, n):
                self.screen("-S", "idle", "-X", "screen", str(idx), "sleep", "1000000",
                            timeout=30)
            # Every worker lists its inbox once at start; give them and the panes time.
            time.sleep(self.args.idle_settle)
            probe = rich[0] if rich else None
            if probe:
                st = self.daemon({"op": "ding.status", "session": probe})["status"]
                if len(st["messages"]) != held:
                    raise RuntimeError(f"{probe}: {len(st['messages'])} messages listed, "
                                       f"not {held}")
            hosts = [self.pane_pid(name) for name in rich + aggressive]
            procs = {"daemon": [self.daemon_pid], "pane hosts": hosts,
                     "tmux server": [self.tmux_pid], "GNU screen server": [screen_pid],
                     "dtach masters": dtach_pids}
            before = {k: [sched_totals(p) for p in v] for k, v in procs.items()}
            w0 = time.monotonic()
            time.sleep(secs)
            wall = time.monotonic() - w0
            after = {k: [sched_totals(p) for p in v] for k, v in procs.items()}
            res = {"panes": n, "rich_panes": len(rich), "held_per_rich_pane": held,
                   "seconds": wall}
            for k in procs:
                pairs = [(a, b) for a, b in zip(before[k], after[k]) if a and b]
                cpu_ns = [b[0] - a[0] for a, b in pairs]
                runs = [b[1] - a[1] for a, b in pairs]
                res[k] = {"processes": len(pairs),
                          "cpu_percent": 100.0 * sum(cpu_ns) / (wall * 1e9),
                          "wakeups_per_s": sum(runs) / wall,
                          "max_process_cpu_percent": 100.0 * max(cpu_ns) / (wall * 1e9),
                          "max_process_wakeups_per_s": max(runs) / wall}
                log(f"idle {k}: {res[k]['cpu_percent']:.3f} % of a core, "
                    f"{res[k]['wakeups_per_s']:.1f} wake-ups/s")
            self.results["idle"] = res
        finally:
            for name in rich + aggressive:
                self.kill_pane(name)
            self.tmux("kill-session", "-t", "idle", check=False)
            self.stop_screen("idle")
            for label in dtachs:
                self.end_dtach(label)

    # ---- cleanup ---------------------------------------------------------------------

    def cleanup(self):
        try:
            self.run([self.belfry, "shutdown", "--kill-panes"], timeout=60, check=False)
        except Exception as err:  # noqa: BLE001
            log(f"shutdown: {err}")
        panes = self.rt / "panes"
        if panes.is_dir():
            for rec in panes.glob("*.json"):
                try:
                    pid = json.loads(rec.read_text())["pid"]
                    os.kill(pid, signal.SIGKILL)
                    log(f"killed leftover pane host {pid}")
                except Exception:  # noqa: BLE001
                    pass
        if self.daemon_pid and pid_alive(self.daemon_pid):
            time.sleep(0.2)
            if pid_alive(self.daemon_pid):
                os.kill(self.daemon_pid, signal.SIGKILL)
        if self.tmux_started:
            self.tmux("kill-server", check=False)
        # dtach masters and screen servers write their pid into <name>.pid (other_program,
        # start_dtach, start_screen); end_process touches only processes of this run.
        for rec in self.tmp.glob("*.pid"):
            if rec.name != "daemon.pid":
                self.end_pidfile(rec)
        # Any other dtach or screen process of this run (one started just before a signal,
        # whose program had not written its pid yet): its command line names the temp dir.
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if os.path.basename(argv[0]) in (b"dtach", b"screen", b"SCREEN"):
                self.end_process(int(proc.name))
        if shutil.which("screen"):
            self.screen("-wipe", check=False)


def machine_info():
    info = {"nproc": os.cpu_count(), "kernel": platform.release()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_total_kb"] = int(line.split()[1])
    except OSError:
        pass
    info["loadavg_start"] = Path("/proc/loadavg").read_text().split()[:3]
    try:
        info["tmux"] = subprocess.run(["tmux", "-V"], capture_output=True, text=True,
                                      timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        info["tmux"] = "not found"
    for tool, argv in (("dtach", ["dtach", "--help"]), ("screen", ["screen", "-v"])):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
            info[tool] = out.splitlines()[0].strip() if out else "?"
        except Exception:  # noqa: BLE001
            info[tool] = "not found"
    return info


def link_kind(path):
    """How an executable is linked, from its ELF header and program headers (readelf)."""
    try:
        out = subprocess.run(["readelf", "-lhW", str(path)], capture_output=True, text=True,
                             timeout=10).stdout
    except Exception:  # noqa: BLE001
        return "?"
    fixed = re.search(r"Type:\s+EXEC", out) is not None
    dynamic = "INTERP" in out
    return (("dynamic" if dynamic else "static") + ", "
            + ("fixed-address" if fixed else "position-independent"))


def build_info(belfry):
    """The command and, when they are beside it, the `belfry-host` the daemon runs and the
    `belfry-pane` each pane host runs."""
    info = {"belfry": link_kind(belfry)}
    for name in ("belfry-host", "belfry-pane"):
        beside = Path(belfry).with_name(name)
        if os.access(beside, os.X_OK):
            info[name] = link_kind(beside)
    return info


def fmt_ms(x):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def verdict(ok):
    if ok is None:
        return "—"
    return "met" if ok else "MISSED"


def render(results, args):
    lines = []
    add = lines.append
    m = results["machine"]
    add(f"belfry {results.get('commit', '?')} · {m.get('cpu', '?')} · nproc {m['nproc']} · "
        f"{m.get('tmux')} · {m.get('dtach')} · {m.get('screen')} · load avg at start {' '.join(m['loadavg_start'])}, "
        f"at end {' '.join(m.get('loadavg_end', []))}")
    build = results.get("build")
    if build:
        host = build.get("belfry-host")
        pane = build.get("belfry-pane")
        add("")
        add(f"`belfry`: {build['belfry']}" + (
            f"; the daemon runs `belfry-host` beside it: {host}" if host else
            "; the daemon runs the same executable") + (
            f"; each pane host runs `belfry-pane` beside it: {pane}" if pane else
            "; the pane hosts run the daemon's executable"))
    add("")
    targets = []
    tp = results.get("throughput")
    if tp:
        mb = args.mb
        pairs = len(tp.get("belfry+attach/sgr", {}).get("seconds", []))
        paired_note = (f"; the relay and `belfry attach` of {pairs}, run back to back"
                       if tp.get("relay/sgr") and pairs > args.reps else "")
        add(f"### 1. Output throughput ({mb:g} MB per file, 24x80, median of {args.reps}"
            f"{paired_note})")
        add("")
        add("| variant | plain: s | plain: × raw | SGR: s | SGR: × raw | server CPU s "
            "(plain / SGR) | stream delivered to client (plain / SGR) |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        raw = {k: tp[f"raw/{k}"]["median_s"] for k in ("plain", "sgr")}
        raw_bytes = {k: tp[f"raw/{k}"]["client_bytes_median"] for k in ("plain", "sgr")}
        for label, key in Bench.VARIANTS:
            cells = []
            cpu = []
            got = []
            for kind in ("plain", "sgr"):
                r = tp.get(f"{key}/{kind}")
                if not r:
                    cells += ["—", "—"]
                    continue
                if key != "raw" and r["client_bytes_median"] is not None and raw_bytes[kind]:
                    got.append(f"{100.0 * r['client_bytes_median'] / raw_bytes[kind]:.0f} %")
                ratio = r["median_s"] / raw[kind]
                cells += [f"{r['median_s']:.2f}", f"{ratio:.2f}×"]
                cpu.append("—" if r["server_cpu_s"] is None else f"{r['server_cpu_s']:.2f}")
                if key.startswith("belfry"):
                    measured = f"{ratio:.2f}×"
                    if r["client_bytes_median"] is not None and raw_bytes[kind]:
                        share = 100.0 * r["client_bytes_median"] / raw_bytes[kind]
                        measured += f" (client got {share:.0f} % of the stream)"
                    targets.append((f"throughput {label}, {kind}", "≤ 1.3× raw",
                                    measured, ratio <= 1.3))
            add(f"| {label} | {' | '.join(cells)} | {' / '.join(cpu)} | "
                f"{' / '.join(got) if got else '—'} |")
        relay = {k: tp.get(f"relay/{k}", {}).get("median_s") for k in ("plain", "sgr")}
        if all(relay.values()):
            for kind in ("plain", "sgr"):
                r = tp.get(f"belfry+attach/{kind}")
                if not r:
                    continue
                ratio = r["median_s"] / relay[kind]
                # Delivered in every repetition, not only at the median: the least share is
                # the one the verdict reads.
                got = [b for b in r["client_bytes"] if b is not None]
                share = (100.0 * min(got) / raw_bytes[kind]
                         if got and raw_bytes[kind] else None)
                delivered = "?" if share is None else f"{share:.0f} %"
                if share is not None and len(got) > 1:
                    delivered += " in the repetition that got least"
                measured = f"{ratio:.2f}× ({delivered})"
                # The verdict stays the ratio of the medians; the ratio within each repetition
                # (the two rows run back to back, in turn first) says how far this machine's
                # drift moves it.
                paired = paired_ratio(r["seconds"], tp[f"relay/{kind}"]["seconds"])
                if paired and len(paired["ratios"]) > 1:
                    measured += (f"; per repetition {', '.join(f'{x:.2f}' for x in paired['ratios'])}"
                                 f", median {paired['median']:.2f}× (95 % bootstrap interval "
                                 f"{paired['ci95_low']:.2f}–{paired['ci95_high']:.2f}×)")
                targets.append((f"`belfry attach` ÷ relay, {kind} (issue 13 target 2)",
                                "≤ 1.15×, 100 % delivered", measured,
                                ratio <= 1.15 and share is not None and share >= 99.5))
                # What one process that keeps the model and writes the client's terminal
                # itself would cost (tmux's shape): not a target, the bound of that design.
                for variant, what in (("relay+model", "the model in the relaying thread"),
                                      ("relay+model-thread", "the model on a second thread")):
                    floor = tp.get(f"{variant}/{kind}")
                    if floor:
                        targets.append((f"relay with {what} ÷ relay, {kind} (the bound of a "
                                        "server writing the client's terminal)", "—",
                                        f"{floor['median_s'] / relay[kind]:.2f}×", None))
        model = results.get("model")
        if model:
            cells = []
            for kind in ("plain", "sgr"):
                r = model[kind]
                cells += [f"{r['seconds']:.2f}", f"{r['seconds'] / raw[kind]:.2f}×"]
            add(f"| belfry screen model alone, no PTY (in-process) | {' | '.join(cells)} | "
                f"{model['plain']['cpu_s']:.2f} / {model['sgr']['cpu_s']:.2f} | — |")
        add("")
        add("Server CPU: the raw reader's own CPU; the tmux server's CPU during the run; the "
            "belfry pane host's CPU (start-up included). Client CPU is not counted. Stream "
            "delivered: bytes the attached client received (median) / bytes the program wrote "
            "through the PTY; less than 100 % means the server skipped output and redrew "
            "the screen instead.")
        tails = {k: statistics.median(tp[f"belfry+attach{v}/{k}"]["exit_tail_s"])
                 for v in ("", "-frames") for k in ("plain", "sgr")
                 if tp.get(f"belfry+attach{v}/{k}", {}).get("exit_tail_s")}
        add("")
        add("Time: from the start of the program's output until it has all reached the reader "
            "(the raw reader and the relay: their terminal read the last byte; tmux, dtach "
            "and GNU screen: the program ended; belfry detached: the pane's program ended; "
            "frames to /dev/null: the pane's program ended and its client exited; "
            "`belfry attach`: the line the program prints after the file reached the "
            "client's terminal" + (
                f", its exit after that, median {statistics.median(tails.values()):.3f} s, "
                "not counted" if tails else "") + ").")
        add("")
    s = results.get("send")
    if s:
        add(f"### 2. Guarded send round trip (persistent connection, {s['daemon']['n']} sends "
            f"each, conflicts {s['conflicts']})")
        add("")
        add("| path | p50 ms | p90 ms | p99 ms | max ms |")
        add("|---|---:|---:|---:|---:|")
        for key, label in (("daemon", "via daemon socket"), ("host", "direct to pane host"),
                           ("bound", BOUND_LABEL),
                           ("relay", "via a minimal byte relay (floor of a second hop)")):
            r = s.get(key)
            if not r:
                continue
            add(f"| {label} | {fmt_ms(r['p50_ms'])} | {fmt_ms(r['p90_ms'])} | "
                f"{fmt_ms(r['p99_ms'])} | {fmt_ms(r['max_ms'])} |")
            if key != "relay":
                targets.append((f"guarded send p99, {label}", "< 1 ms",
                                f"{r['p99_ms']:.3f} ms", r["p99_ms"] < 1.0))
        d, h = s["daemon"]["p50_ms"], s["host"]["p50_ms"]
        targets.append(("guarded send p50, daemon (forwarded) / direct", "≤ 1.2×",
                         f"{d / h:.2f}×", d / h <= 1.2))
        if s.get("bound"):
            b = s["bound"]["p50_ms"]
            targets.append(("guarded send p50, daemon socket bound to the pane / direct",
                            "≤ 1.2×", f"{b / h:.2f}×", b / h <= 1.2))
        if s.get("relay"):
            add("")
            bound = f", bound {s['bound']['p50_ms'] / h:.2f}×" if s.get("bound") else ""
            add(f"p50 ratios to direct: daemon {d / h:.2f}×{bound}, minimal relay "
                f"{s['relay']['p50_ms'] / h:.2f}×.")
        add("")
    sr = results.get("send_race")
    if sr:
        add("### 2b. Guarded send against a pane printing a line every 1 ms "
            "(snapshot, then a send guarded by its revision, on each path)")
        add("")
        add("| path | attempts | wins | win rate | p50 ms of a won send |")
        add("|---|---:|---:|---:|---:|")
        rate = {}
        for key, label in (("daemon", "via daemon socket"), ("host", "direct to pane host"),
                           ("bound", BOUND_LABEL), ("relay", "via a minimal byte relay")):
            r = sr.get(key)
            if not r:
                continue
            rate[key] = r["wins"] / r["attempts"] if r["attempts"] else float("nan")
            add(f"| {label} | {r['attempts']} | {r['wins']} | {100 * rate[key]:.1f} % | "
                f"{fmt_ms(r['sent']['p50_ms'])} |")
        add("")
        if rate["daemon"] > 0:
            ratio = rate["host"] / rate["daemon"]
            targets.append(("guarded send win rate, direct / daemon (busy pane)", "≤ 1.5×",
                            f"{ratio:.2f}×", ratio <= 1.5))
        if rate.get("bound", 0) > 0:
            ratio = rate["host"] / rate["bound"]
            targets.append(("guarded send win rate, direct / daemon socket bound to the pane "
                            "(busy pane)", "≤ 1.5×", f"{ratio:.2f}×", ratio <= 1.5))
    # The CLI rows of sections 3-4 and 3b: each belfry command beside what tmux, GNU screen
    # and dtach offer for it. dtach keeps no screen, so it has nothing to capture.
    cli_label = {
        "screen -X stuff": "`screen -S NAME -X stuff x`",
        "dtach -p": "`dtach -p SOCKET` (x on stdin)",
        "screen -X hardcopy": "`screen -S NAME -X hardcopy FILE` (writes a file, not stdout)",
    }
    cli_groups = (("belfry send", ("tmux send-keys", "screen -X stuff", "dtach -p")),
                  ("belfry peek", ("tmux capture-pane -p", "screen -X hardcopy", None)))
    no_capture = "dtach: — (dtach keeps no screen)"
    one_way = ("`screen -X` and `dtach -p` write their request to the server's socket and exit: "
               "neither protocol has a reply, so their time ends before the server has carried "
               "the request out; `belfry` and `tmux` wait for the server's answer.")
    c = results.get("cli")
    if c:
        add(f"### 3–4. CLI invocations (wall time per process, {c['belfry send']['n']} runs "
            f"each, interleaved)")
        add("")
        add("| command | p50 ms | p99 ms | p50: belfry ÷ this |")
        add("|---|---:|---:|---:|")
        for b, others in cli_groups:
            for k in (b, *others):
                if k is None:
                    add(f"| {no_capture} | — | — | — |")
                    continue
                r = c.get(k)
                if not r:
                    continue
                ratio = "" if k == b else f"{c[b]['p50_ms'] / r['p50_ms']:.2f}×"
                fail = f" ({r['failures']} failed)" if r["failures"] else ""
                add(f"| {cli_label.get(k, f'`{k}`')}{fail} | {fmt_ms(r['p50_ms'])} | "
                    f"{fmt_ms(r['p99_ms'])} | {ratio} |")
        add("")
        ck = c.get("check", {})
        yes = {True: "yes", False: "NO", None: "not checked"}
        add(f"{one_way} The pane's last line (2000) was in the output of `belfry peek`: "
            f"{yes[ck.get('peek_has_2000')]}, of `tmux capture-pane -p`: "
            f"{yes[ck.get('capture_has_2000')]}, in the file `screen -X hardcopy` wrote: "
            f"{yes[ck.get('hardcopy_has_2000')]}.")
        add("")
    busy_kinds = (
        ("busy", "3b. The same CLI commands while the pane prints continuously "
                 "(`while :; do cat FILE; done`, as fast as each tool reads it", ""),
        ("busy_paced", "3c. The same while the pane prints a steady 4 MiB a second "
                       "(`belfry-bench pace`: 4 KiB writes on a fixed schedule, which every "
                       "tool keeps up with, so each loads the machine alike",
         ", paced printer"),
    )
    for key, title, suffix in busy_kinds:
        bz = results.get(key)
        if not bz:
            continue
        pk = bz["belfry peek"]
        add(f"### {title}; {pk['rounds']} rounds, each giving every tool a "
            f"fresh busy session in turn, the order reversed every other round; "
            f"{pk['n']} runs of each command in all)")
        add("")
        add("| command | p50 ms | p90 ms | p99 ms | max ms | p99 of each round, ms | machine idle while it ran | pane printed, MB/s |")
        add("|---|---:|---:|---:|---:|---|---:|---:|")

        def busy_row(label, r):
            fail = f" ({r['failures']} failed)" if r["failures"] else ""
            each = ", ".join(f"{x:.2f}" for x in r.get("round_p99_ms", []))
            idle = r.get("machine_idle_pct")
            idle = "—" if idle is None else f"{idle:.1f} %"
            rate = r.get("printed_mb_per_s")
            rate = "—" if rate is None else f"{rate:.1f}"
            add(f"| {label}{fail} | {fmt_ms(r['p50_ms'])} | {fmt_ms(r['p90_ms'])} | "
                f"{fmt_ms(r['p99_ms'])} | {fmt_ms(r['max_ms'])} | {each} | {idle} | {rate} |")

        for b, others in reversed(cli_groups):
            for k in (b, *others):
                if k is None:
                    add(f"| {no_capture} | — | — | — | — | — | — | — |")
                elif bz.get(k):
                    busy_row(cli_label.get(k, f"`{k}`"), bz[k])
        beside = "/bin/true beside "
        starts = {k[len(beside):]: r for k, r in bz.items() if k.startswith(beside)}
        for tool, r in starts.items():
            busy_row(f"`{beside}{tool}`", r)
        add("")
        if starts:
            add("`/bin/true` ran among each tool's commands: the start of a process that asks "
                "nobody anything, on the machine as that tool's busy pane left it; beside a raw "
                "PTY reader (section 1's baseline: it reads the pane's output as fast as the "
                "terminal layer hands it over and does nothing else) it shows what reading at "
                "that rate leaves of the machine to a process that starts.")
            add("")
            for b, t in (("belfry peek", "tmux capture-pane -p"),
                         ("belfry send", "tmux send-keys")):
                if b in bz and t in bz and "belfry" in starts and "tmux" in starts:
                    add(f"`{b}` p99 over the p99 of `/bin/true` beside it: "
                        f"{bz[b]['p99_ms'] - starts['belfry']['p99_ms']:+.2f} ms; `{t}`'s: "
                        f"{bz[t]['p99_ms'] - starts['tmux']['p99_ms']:+.2f} ms.")
            add("")
        add("The machine's idle share is of both cores, over the rounds in which the command "
            "ran; the pane printed what its program's process tree wrote over the same time "
            "(`wchar` of /proc/PID/io). A multiplexer that reads its pane faster lets `cat` "
            "print more, and the kernel's terminal layer then takes more of the machine.")
        add("")
        for b, cmp in bz.get("compare", {}).items():
            t = cmp["other"]
            rb, rt = bz[b], bz[t]
            wins = sum(x <= y for x, y in zip(rb["round_p99_ms"], rt["round_p99_ms"]))
            add(f"{difference_line(b, t, cmp)}; belfry's p99 at or under tmux's in {wins} of "
                f"{len(rb['round_p99_ms'])} rounds.")
            context = ""
            if {"belfry", "tmux"} <= starts.keys():
                raw = starts.get("a raw PTY reader")
                raw = f", a raw PTY reader's {raw['p99_ms']:.2f}" if raw else ""
                context = (f"; `/bin/true` p99 beside belfry's pane "
                           f"{starts['belfry']['p99_ms']:.2f}, tmux's "
                           f"{starts['tmux']['p99_ms']:.2f}{raw}")
            targets.append((f"`{b}` p99 on a busy pane vs `{t}` (issue 13 target 4{suffix})",
                            "≤ tmux's",
                            f"{rb['p99_ms']:.2f} vs {rt['p99_ms']:.2f} ms (difference "
                            f"{cmp['ci95_low_ms']:+.2f} to {cmp['ci95_high_ms']:+.2f} ms, "
                            f"95 %){context}",
                            rb["p99_ms"] <= rt["p99_ms"]))
        add("")
        if "screen -X stuff" in bz or "dtach -p" in bz:
            ck = bz.get("check", {})
            add(f"{one_way} The `screen -X hardcopy` files held the pane's text after each "
                f"round: {'yes' if ck.get('hardcopy_has_text') else 'NO'}.")
            add("")
    e = results.get("echo")
    if e:
        add("### 5. Key echo through an attached client (pane runs `stty raw -echo; cat`)")
        add("")
        add("| client | keys | p50 ms | p90 ms | p99 ms | max ms | lost |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for k, r in e.items():
            add(f"| {k} | {r['n']} | {fmt_ms(r['p50_ms'])} | {fmt_ms(r['p90_ms'])} | "
                f"{fmt_ms(r['p99_ms'])} | {fmt_ms(r['max_ms'])} | {r['timeouts']} |")
        r = e["belfry attach"]
        targets.append(("key echo p99, belfry attach", "≤ 0.5 ms", f"{r['p99_ms']:.3f} ms",
                        r["p99_ms"] <= 0.5))
        t = e.get("tmux attach")
        cmp = results.get("echo_compare")
        if t:
            interval = (f" (difference {cmp['ci95_low_ms']:+.3f} to {cmp['ci95_high_ms']:+.3f} "
                        f"ms, 95 %)" if cmp else "")
            targets.append(("key echo p99, belfry attach vs tmux (issue 13 target 2)",
                            "≤ tmux's", f"{r['p99_ms']:.3f} vs {t['p99_ms']:.3f} ms{interval}",
                            r["p99_ms"] <= t["p99_ms"]))
        add("")
        if t and cmp:
            add(f"{difference_line('belfry attach', 'tmux attach', cmp)}.")
            add("")
    mem = results.get("memory")
    if mem:
        n = mem["panes"]
        ph = mem["pane_host_rss_kb"]
        sc_hist = mem.get("screen_scrollback_lines")
        others = f"tmux history {mem['tmux_history_lines']}"
        if "screen_per_window_kb" in mem:
            others += (f", GNU screen scrollback {sc_hist if sc_hist is not None else '?'} "
                       f"(defscrollback), dtach none")
        add(f"### 6. Memory, {n} idle panes with {mem['belfry_history_lines']} lines of "
            f"scrollback each ({others})")
        add("")
        add("| figure | MiB |")
        add("|---|---:|")
        mb = 1024.0
        add(f"| belfry pane host VmRSS, mean (min–max) | {ph['mean'] / mb:.2f} "
            f"({ph['min'] / mb:.2f}–{ph['max'] / mb:.2f}) |")
        add(f"| belfry pane host RssAnon (private heap/stack), mean | "
            f"{mem['pane_host_rss_anon_kb_mean'] / mb:.2f} |")
        add(f"| belfry pane host RssFile (mapped binary, shared), mean | "
            f"{mem['pane_host_rss_file_kb_mean'] / mb:.2f} |")
        add(f"| belfry pane host Pss, mean | {mem['pane_host_pss_kb_mean'] / mb:.2f} |")
        more = mem.get("more")
        if more:
            add(f"| belfry pane host Pss / RssAnon, mean, with {more['panes']} panes | "
                f"{more['pane_host_pss_kb_mean'] / mb:.2f} / "
                f"{more['pane_host_rss_anon_kb_mean'] / mb:.2f} |")
        add(f"| belfry pane host with no output (VmRSS / RssAnon) | "
            f"{mem['empty_pane_host_rss_kb'] / mb:.2f} / "
            f"{mem['empty_pane_host_rss_anon_kb'] / mb:.2f} |")
        add(f"| belfry daemon VmRSS, before → after | {mem['daemon_rss_kb']['before'] / mb:.2f}"
            f" → {mem['daemon_rss_kb']['after'] / mb:.2f} |")
        add(f"| belfry total VmRSS (daemon + {n} pane hosts) | "
            f"{mem['belfry_total_rss_kb'] / mb:.1f} |")
        add(f"| belfry total Pss (daemon + {n} pane hosts) | "
            f"{mem['belfry_total_pss_kb'] / mb:.1f} |")
        add(f"| belfry per pane (total VmRSS / {n}) | {mem['belfry_total_rss_kb'] / n / mb:.2f} |")
        add(f"| tmux server VmRSS, before → after | "
            f"{mem['tmux_server_rss_kb']['before'] / mb:.2f} → "
            f"{mem['tmux_server_rss_kb']['after'] / mb:.2f} |")
        add(f"| tmux per window (RSS increase / {n}) | {mem['tmux_per_window_kb'] / mb:.2f} |")
        sc = mem.get("screen_server_kb")
        if sc:
            per = mem["screen_per_window_kb"]
            add(f"| GNU screen server VmRSS, 1 idle window → + {n} windows | "
                f"{sc['before']['VmRSS'] / mb:.2f} → {sc['after']['VmRSS'] / mb:.2f} |")
            add(f"| GNU screen per window (VmRSS increase / {n}) | {per['VmRSS'] / mb:.2f} |")
            add(f"| GNU screen per window (RssAnon increase / {n}) | {per['RssAnon'] / mb:.2f} |")
            add(f"| GNU screen per window (Pss increase / {n}) | {per['Pss'] / mb:.2f} |")
        dm = mem.get("dtach_master_rss_kb")
        if dm:
            add(f"| dtach master VmRSS, mean (min–max) | {dm['mean'] / mb:.2f} "
                f"({dm['min'] / mb:.2f}–{dm['max'] / mb:.2f}) |")
            add(f"| dtach master RssAnon, mean | {mem['dtach_master_rss_anon_kb_mean'] / mb:.2f} |")
            add(f"| dtach master Pss, mean | {mem['dtach_master_pss_kb_mean'] / mb:.2f} |")
            add(f"| dtach total VmRSS ({n} masters) | {mem['dtach_total_rss_kb'] / mb:.1f} |")
        if dm:
            add("")
            add("dtach holds no history and no screen: its master only relays the PTY, so its "
                "figures are a floor with nothing kept. The window programs (`sh`, `sleep`) "
                "are not counted for any of them.")
        targets.append(("RSS per idle pane host (VmRSS mean)", "≤ 3 MB",
                        f"{ph['mean'] / mb:.2f} MiB ({ph['mean'] * 1024 / 1e6:.2f} MB)",
                        ph["mean"] * 1024 <= 3e6))
        # Issue 13: private memory and proportional share, not VmRSS, which counts the
        # shared pages of the binary in every process.
        anon = mem["pane_host_rss_anon_kb_mean"]
        targets.append(("RssAnon per idle pane host", "≤ 1 MiB", f"{anon / mb:.3f} MiB",
                        anon <= 1024))
        pss = mem["pane_host_pss_kb_mean"]
        targets.append((f"Pss per pane host with {n} panes", "≤ 1.5 MiB", f"{pss / mb:.3f} MiB",
                        pss <= 1.5 * 1024))
        if more:
            pss = more["pane_host_pss_kb_mean"]
            targets.append((f"Pss per pane host with {more['panes']} panes", "≤ 1.5 MiB",
                            f"{pss / mb:.3f} MiB", pss <= 1.5 * 1024))
        add("")
    d = results.get("dispatch")
    if d:
        first = next(iter(d.values()))
        add(f"### 7. `belfry dispatch --event before-tool` ({first['n']} runs each, "
            f"interleaved)")
        add("")
        add("| command | p50 ms | p99 ms |")
        add("|---|---:|---:|")
        for k, r in d.items():
            fail = f" ({r['failures']} failed)" if r["failures"] else ""
            add(f"| {k}{fail} | {fmt_ms(r['p50_ms'])} | {fmt_ms(r['p99_ms'])} |")
        for k in ("dispatch, no hooks file", "dispatch, 0 handlers",
                  "dispatch, 0 handlers, inside a pane"):
            r = d[k]
            targets.append((f"{k}, median", "< 2 ms", f"{r['p50_ms']:.3f} ms",
                            r["p50_ms"] < 2.0))
        add("")
    dg = results.get("ding")
    if dg:
        sr = dg["series"]
        slot = dg.get("slot_ms")
        how = (f"the three panes take turns in {slot} ms slots" if slot
               else "one message at a time")
        add(f"### 8. DING latency (pane program `belfry-bench stamp-recv`: raw mode, bracketed "
            f"paste on, every read timestamped; {how})")
        add("")
        add("| path | n | p50 ms | p90 ms | p99 ms | max ms | lost |")
        add("|---|---:|---:|---:|---:|---:|---:|")

        def row(label, samples, lost=""):
            r = summary_ns(samples)
            add(f"| {label} | {r['n']} | {fmt_ms(r['p50_ms'])} | {fmt_ms(r['p90_ms'])} | "
                f"{fmt_ms(r['p99_ms'])} | {fmt_ms(r['max_ms'])} | {lost} |")

        empty = {"to_first_ns": [], "post_ns": [], "nudge_ns": [], "after_nudge_ns": [],
                 "to_event_ns": [], "to_enter_ns": [], "lost": 0}
        cli, direct = sr.get("cli", empty), sr.get("direct", empty)
        poll, rich = sr.get("poll", empty), sr.get("rich", empty)
        for label, s_ in (
                ("aggressive: `belfry inbox post` process start → first notice byte", cli),
                ("aggressive: direct post (tmp, fsync, rename, fsync dir) + `ding.nudge` → "
                 "first notice byte", direct),
                ("aggressive: direct post, no nudge (the worker woken by inotify) → "
                 "first notice byte", poll),
                ("rich: adapter `activity` event written → first notice byte", rich)):
            if s_["to_first_ns"] or s_["lost"]:
                row(label, s_["to_first_ns"], s_["lost"])
        add("")
        add("| part | n | p50 ms | p90 ms | p99 ms | max ms |")
        add("|---|---:|---:|---:|---:|---:|")

        def part(label, samples):
            if samples:
                r = summary_ns(samples)
                add(f"| {label} | {r['n']} | {fmt_ms(r['p50_ms'])} | {fmt_ms(r['p90_ms'])} | "
                    f"{fmt_ms(r['p99_ms'])} | {fmt_ms(r['max_ms'])} |")

        part("`belfry inbox post` process, spawn → exit", cli["post_ns"])
        part("direct post: write tmp, fsync, rename into new/, fsync new/", direct["post_ns"])
        part("`ding.nudge` round trip (connection kept open)", direct["nudge_ns"])
        part("nudge reply → first notice byte (daemon worker + pane host)",
             direct["after_nudge_ns"])
        part("durable replace of a 300-byte file in the state dir (what staging a notice "
             "costs)", dg.get("durable_replace_ns", []))
        part("rich: post → adapter event written (bench adapter: inotify wake-up, `info`)",
             rich["to_event_ns"])
        part("aggressive: first notice byte → Enter",
             cli["to_enter_ns"] + direct["to_enter_ns"] + poll["to_enter_ns"])
        part("rich: first notice byte → Enter", rich["to_enter_ns"])
        add("")
        notes = []
        for k, c in dg.get("counters", {}).items():
            holds = ", ".join(f"{h} {m}" for h, m in sorted(c.get("holds", {}).items()))
            notes.append(f"{k} pane: sends {c.get('sends')}, conflicts {c.get('conflicts')}, "
                         f"holds {holds or 'none'}")
        odd = []
        for k, s_ in sr.items():
            if s_.get("mismatched"):
                odd.append(f"{k}: {s_['mismatched']} notices not naming their message")
            if s_.get("announced_again"):
                odd.append(f"{k}: {s_['announced_again']} messages announced twice")
        for k, m in dg.get("extra_bursts", {}).items():
            if m:
                odd.append(f"{k}: {m} unexpected reads in the pane")
        add("Worker counters (`ding.status`): " + "; ".join(notes) + ". "
            + ("; ".join(odd) if odd else "No stray input, every notice named its message."))
        add("")
    rm = results.get("remote")
    if rm:
        add("### Remote: over ssh to this machine (a real sshd on 127.0.0.1, one ControlMaster "
            "connection)")
        add("")
        add("| what | local p50 ms | local p99 ms | over ssh p50 ms | over ssh p99 ms | "
            "ssh ÷ local (p50) |")
        add("|---|---:|---:|---:|---:|---:|")

        def pair(label, local, far):
            ratio = far["p50_ms"] / local["p50_ms"] if local["p50_ms"] else float("nan")
            add(f"| {label} | {fmt_ms(local['p50_ms'])} | {fmt_ms(local['p99_ms'])} | "
                f"{fmt_ms(far['p50_ms'])} | {fmt_ms(far['p99_ms'])} | {ratio:.2f}× |")

        pair(f"guarded send round trip, one kept connection (n {rm['local']['n']})",
             rm["local"], rm["ssh"])
        pair(f"`belfry send --expect-revision`, whole command (n {rm['cli']['local']['n']})",
             rm["cli"]["local"], rm["cli"]["ssh"])
        floor = rm["cli"].get("ssh box true")
        if floor:
            add(f"| `ssh box true` over the same master connection: the floor of any command "
                f"over ssh | — | — | {fmt_ms(floor['p50_ms'])} | {fmt_ms(floor['p99_ms'])} | — |")
        e = rm["echo"]
        pair("key echo: `belfry attach` / `belfry --host box attach`", e["belfry attach"],
             e["belfry --host box attach"])
        pair("key echo: `tmux attach` / `ssh -t box tmux attach`", e["tmux attach"],
             e["ssh -t box tmux attach"])
        far_b, far_t = e["belfry --host box attach"], e["ssh -t box tmux attach"]
        add("")
        add(f"Key echo over ssh, belfry ÷ tmux: p50 {far_b['p50_ms'] / far_t['p50_ms']:.2f}×, "
            f"p99 {far_b['p99_ms'] / far_t['p99_ms']:.2f}× (timeouts: belfry "
            f"{far_b['timeouts']}, tmux {far_t['timeouts']}). Conflicts in the send loop: "
            f"{rm['conflicts']}.")
        add("")
    idl = results.get("idle")
    if idl:
        add(f"### 9. Idle: {idl['panes']} idle panes ({idl['rich_panes']} rich with "
            f"{idl['held_per_rich_pane']} held messages each, the rest aggressive), "
            f"{idl['seconds']:.0f} s")
        add("")
        add("| processes | n | CPU, % of one core | wake-ups/s | busiest one: CPU % / wake-ups/s |")
        add("|---|---:|---:|---:|---:|")
        for k in ("daemon", "pane hosts", "tmux server", "GNU screen server", "dtach masters"):
            r = idl.get(k)
            if not r:
                continue
            add(f"| {k} | {r['processes']} | {r['cpu_percent']:.3f} | "
                f"{r['wakeups_per_s']:.1f} | {r['max_process_cpu_percent']:.3f} / "
                f"{r['max_process_wakeups_per_s']:.1f} |")
        total = idl["daemon"]["cpu_percent"] + idl["pane hosts"]["cpu_percent"]
        wakes = idl["daemon"]["wakeups_per_s"] + idl["pane hosts"]["wakeups_per_s"]
        add(f"| belfry total | {idl['daemon']['processes'] + idl['pane hosts']['processes']} | "
            f"{total:.3f} | {wakes:.1f} | |")
        targets.append((f"idle CPU, daemon + {idl['panes']} pane hosts", "≤ 0.5 % of one core",
                        f"{total:.3f} % ({wakes:.0f} wake-ups/s)", total <= 0.5))
        add("")
    if targets:
        add("### Targets")
        add("")
        add("| target | goal | measured | |")
        add("|---|---|---:|---|")
        for name, goal, got, ok in targets:
            add(f"| {name} | {goal} | {got} | {verdict(ok)} |")
        add("")
    if results.get("errors"):
        add("### Errors")
        for k, v in results["errors"].items():
            add(f"- {k}: {v}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--belfry", required=True)
    p.add_argument("--bench", required=True)
    p.add_argument("--tmp", required=True)
    p.add_argument("--tmux-socket", required=True)
    p.add_argument("--commit", default="?")
    p.add_argument("--mb", type=float, default=100)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--pair-reps", type=int, default=11)
    p.add_argument("--variants", default="")
    p.add_argument("--sends", type=int, default=5000)
    p.add_argument("--cli-runs", type=int, default=300)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--echo-blocks", type=int, default=4)
    p.add_argument("--panes", type=int, default=100)
    p.add_argument("--more-panes", type=int, default=100)
    p.add_argument("--dispatch-runs", type=int, default=1000)
    p.add_argument("--busy-runs", type=int, default=200)
    p.add_argument("--busy-rounds", type=int, default=5)
    p.add_argument("--ding-n", type=int, default=1000)
    p.add_argument("--ding-poll-n", type=int, default=100)
    p.add_argument("--ding-slot-ms", type=int, default=200)
    p.add_argument("--remote-sends", type=int, default=1000)
    p.add_argument("--remote-cli-runs", type=int, default=30)
    p.add_argument("--idle-panes", type=int, default=200)
    p.add_argument("--idle-held", type=int, default=1000)
    p.add_argument("--idle-secs", type=float, default=60)
    p.add_argument("--idle-settle", type=float, default=15)
    p.add_argument("--only",
                   default="throughput,send,cli,busy,echo,memory,dispatch,ding,idle,remote")
    p.add_argument("--out", default="")
    args = p.parse_args()

    b = Bench(args)
    results = b.results
    results["machine"] = machine_info()
    results["commit"] = args.commit
    results["build"] = build_info(args.belfry)
    results["params"] = vars(args)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    started = time.monotonic()

    def on_term(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # A hang-up ends the run like SIGTERM, and, a handler being reset by exec, every program
    # this run starts gets SIGHUP at its default action. Under `nohup` it was ignored and
    # passed on: dtach's masters hand it to their programs, which then outlived their
    # sessions (a busy section's `cat` loop spinning on a closed terminal through every later
    # section).
    signal.signal(signal.SIGHUP, on_term)
    interrupted = False
    try:
        b.start_daemon()
        b.start_tmux()
        for section in only:
            t0 = time.monotonic()
            log(f"section {section}")
            try:
                if section == "throughput":
                    b.gen_data()
                    b.throughput()
                elif section == "send":
                    b.guarded_send()
                elif section == "cli":
                    b.cli()
                elif section == "busy":
                    b.busy()
                elif section == "echo":
                    b.echo()
                elif section == "memory":
                    b.memory()
                elif section == "dispatch":
                    b.dispatch()
                elif section == "ding":
                    b.ding()
                elif section == "remote":
                    b.remote()
                elif section == "idle":
                    b.idle()
                else:
                    raise ValueError(f"unknown section {section!r}")
            except Exception as err:  # noqa: BLE001 - report and go on with the others
                message = f"{type(err).__name__}: {err}"
                # What the failed program said on stderr says why (the command line does not).
                said = (getattr(err, "stderr", None) or "").strip()
                if said:
                    message += f"; it said: {said[-2000:]}"
                b.errors[section] = message
                log(f"section {section} failed: {message}")
            log(f"section {section} took {time.monotonic() - t0:.1f} s")
    except KeyboardInterrupt:
        interrupted = True
        b.errors["interrupted"] = "stopped by a signal; results are partial"
        log("interrupted: cleaning up")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        b.cleanup()
    results["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    results["elapsed_s"] = time.monotonic() - started
    results["errors"] = b.errors
    table = render(results, args)
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))
        (out / "results.md").write_text(table + "\n")
        log(f"results written to {out}")
    if interrupted:
        return 130
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
