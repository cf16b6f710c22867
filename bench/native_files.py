#!/usr/bin/env python3
"""Issue 39's acceptance row: `belfry new --adapter claude`, `belfry hooks apply`, `belfry
hooks status` and `belfry doctor` beside a 2.5 MB `~/.claude.json` and a 500 KB
`.claude/settings.json` (a harness's own state file is commonly megabytes; a team's settings
file with a long permission list hundreds of kilobytes).

Real binaries, a real daemon, a temporary HOME, runtime and state; nothing of the user's is
read or written. Each command runs BENCH_NATIVE_RUNS times (default 11) and the median and
the slowest are printed, with the file sizes. Not a timed test: run it on demand and put its
row into docs/performance.md.

    python3 bench/native_files.py                  # builds belfry in release mode first
    BELFRY_BIN=target/release/belfry python3 bench/native_files.py
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_NATIVE_RUNS", "11"))
STATE_BYTES = int(os.environ.get("BENCH_NATIVE_STATE_BYTES", str(2_500_000)))
SETTINGS_BYTES = int(os.environ.get("BENCH_NATIVE_SETTINGS_BYTES", str(500_000)))
ADAPTER_PACKAGE = "belfry-adapter-engine"
# A command that hangs or crawls fails the run rather than holding it.
DEADLINE_S = 120


def belfry_bin():
    """`belfry`, with `belfry-adapter` beside it: the rich DING default `belfry new` decides
    needs the activity executable, and the commands are timed on that path."""
    given = os.environ.get("BELFRY_BIN")
    if given and (Path(given).resolve().parent / "belfry-adapter").is_file():
        return Path(given).resolve()
    if given:
        sys.exit(f"no belfry-adapter beside {given}: build it there (cargo build --release -p {ADAPTER_PACKAGE})")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    subprocess.run(
        ["cargo", "build", "--release", "-p", "belfry-cli", "--bin", "belfry", "-p", ADAPTER_PACKAGE],
        cwd=ROOT,
        check=True,
    )
    return target / "release" / "belfry"


def state_file(project, size):
    """~/.claude.json as the harness keeps it: a map of every project it ran in (each with
    its history and allowed tools), tips, and the trust of this project."""
    projects = {}
    n = 0
    text = ""
    while len(text) < size:
        for _ in range(200):
            projects[f"/home/user/src/repo-{n}"] = {
                "allowedTools": [f"Bash(make:{n})", "Bash(ls:*)", "Read"],
                "history": [{"display": f"fix the build, step {n}, then test", "pastedContents": {}}],
                "hasTrustDialogAccepted": n % 2 == 0,
                "lastCost": 0.125,
                "lastSessionId": f"{n:08x}-0000-4000-8000-000000000000",
            }
            n += 1
        projects[str(project)] = {"hasTrustDialogAccepted": True, "allowedTools": []}
        text = json.dumps(
            {"numStartups": 42, "hasCompletedOnboarding": True, "tipsHistory": {"t": 3}, "projects": projects},
            indent=2,
        )
    return text + "\n"


def settings_file(size):
    """.claude/settings.json with a long permission list (strict JSON: the harness reads
    no comments)."""
    allow = []
    text = ""
    while len(text) < size:
        allow.extend(f"Bash(./scripts/task-{len(allow) + i}.sh:*)" for i in range(500))
        text = json.dumps({"model": "some-model", "permissions": {"allow": allow, "deny": []}}, indent=2)
    return text + "\n"


def main():
    belfry = belfry_bin()
    commit = os.environ.get("BENCH_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    base = Path(tempfile.mkdtemp(prefix="belfry-native-"))
    try:
        home, project = base / "home", base / "project"
        (project / ".claude").mkdir(parents=True)
        home.mkdir()
        project = project.resolve()
        shutil.copy(ROOT / "examples/claude/belfry-hooks.kdl", project / "belfry-hooks.kdl")
        (home / ".claude.json").write_text(state_file(project, STATE_BYTES))
        (project / ".claude/settings.json").write_text(settings_file(SETTINGS_BYTES))
        (project / "belfry.kdl").write_text('agent "declared" { command "sleep" "600"; adapter "claude"; }\n')
        env = dict(os.environ)
        env.pop("BELFRY_SOCKET", None)
        env.pop("BELFRY_SESSION", None)
        env.update(
            HOME=str(home),
            BELFRY_RUNTIME_DIR=str(base / "run"),
            BELFRY_STATE=str(base / "state"),
            XDG_STATE_HOME=str(base / "xdg-state"),
            XDG_CONFIG_HOME=str(base / "xdg-config"),
            BELFRY_HOOKS_DETECT="0",
            PATH=f"{belfry.parent}:{env.get('PATH', '')}",
        )

        def run(args, check=True):
            started = time.perf_counter()
            done = subprocess.run(
                [str(belfry), *args], cwd=project, env=env, capture_output=True, text=True, timeout=DEADLINE_S
            )
            elapsed = time.perf_counter() - started
            if check and done.returncode != 0:
                sys.exit(f"belfry {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
            return elapsed, done

        # The first apply writes the settings file; what is timed is the apply of a project
        # already applied (the usual one) and the other commands after it.
        run(["hooks", "apply"])
        _, status = run(["hooks", "status"])
        if "claude: installed" not in status.stdout:
            sys.exit(f"hooks are not installed:\n{status.stdout}{status.stderr}")
        run(["new", "warm-up", "--", "sleep", "600"])  # starts the daemon
        commands = {
            "belfry new --adapter claude": lambda i: ["new", f"agent-{i}", "--adapter", "claude", "--", "sleep", "600"],
            "belfry hooks apply": lambda i: ["hooks", "apply"],
            "belfry hooks status": lambda i: ["hooks", "status"],
            "belfry doctor declared": lambda i: ["doctor", "declared"],
        }
        times = {name: [] for name in commands}
        for i in range(RUNS):
            for name, args in commands.items():
                elapsed, done = run(args(i), check=not name.startswith("belfry doctor"))
                if name.startswith("belfry new") and "stays aggressive" in done.stderr:
                    sys.exit(f"the rich default was refused:\n{done.stderr}")
                times[name].append(elapsed)
        run(["shutdown", "--kill-panes"], check=False)
        settings_size = (project / ".claude/settings.json").stat().st_size
        state_size = (home / ".claude.json").stat().st_size
        print(f"belfry {commit}, {belfry}")
        print(f"~/.claude.json {state_size / 1e6:.2f} MB, .claude/settings.json {settings_size / 1e3:.0f} KB, {RUNS} runs each, interleaved")
        print("| command | median s | slowest s |")
        print("|---|---:|---:|")
        for name, values in times.items():
            print(f"| `{name}` | {statistics.median(values):.3f} | {max(values):.3f} |")
    finally:
        # The daemon of this run, if one is left (a run that stopped half-way).
        subprocess.run(
            [str(belfry), "shutdown", "--kill-panes"],
            env={**os.environ, "BELFRY_RUNTIME_DIR": str(base / "run")},
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
