#!/usr/bin/env python3
"""Runs the workspace's test binaries two at a time (cargo runs them one after the other).

    scripts/run-tests.py [--clippy] [--jobs N] [-- ARGS for every test binary]

Builds them with `cargo test --workspace --release --no-run`, then runs each the way cargo
would (in its package's directory, with CARGO_MANIFEST_DIR set), N at a
time (default 2, or REEL_TEST_JOBS), longest first by the durations the previous run recorded
in target/test-durations.json. A binary's output is printed whole when it ends, never
interleaved with another's. Then the doc tests (`cargo test --doc`). Exit status 1 if any
binary failed, naming them all.

With --clippy the build is also the lint: clippy-driver compiles the workspace's own crates
(RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` runs it) with `-D warnings`, so a lint fails the
build. After the test build, `cargo build --workspace --release --all-targets --all-features`
under the same wrapper lints whatever that build did not make (bins outside test mode,
examples, benches, a feature the tests do not turn on; today only reel-datagen's bin), so it
covers what `cargo clippy --workspace --all-targets --all-features --release -- -D warnings`
covers, without clippy's own check build of every crate: on 2 cores the lints added ~40 s to
this build where that step took ~165 s.

Why: several suites mostly wait (S3 servers answering 503 on purpose, leases expiring, the
drive model's timing, processes killed and restarted), so on two cores a second binary beside
them costs little: the 76 binaries took 447 s one after the other, 228 s two at a time
(2026-12-04, 2-core AMD EPYC).
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

args = sys.argv[1:]
jobs = int(os.environ.get("REEL_TEST_JOBS", "2"))
clippy = args[:1] == ["--clippy"]
if clippy:
    args = args[1:]
if args[:1] == ["--jobs"]:
    jobs, args = int(args[1]), args[2:]
if args[:1] == ["--"]:
    args = args[1:]

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)
durations_file = os.path.join(root, "target", "test-durations.json")

# The cargo commands' environment: with --clippy, the lints ride on the build. The doc tests
# below use the same, so cargo does not rebuild the libraries without the wrapper.
cargo_env = dict(os.environ)
if clippy:
    try:
        driver = subprocess.run(["rustup", "which", "clippy-driver"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        driver = shutil.which("clippy-driver")  # a toolchain without rustup
    if not driver:
        sys.exit("run-tests.py --clippy: no clippy-driver (rustup component add clippy)")
    # How `cargo clippy -- ARGS` hands ARGS to the driver.
    cargo_env.update(RUSTC_WORKSPACE_WRAPPER=driver,
                     CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__")

build = subprocess.run(
    ["cargo", "test", "--workspace", "--release", "--no-run", "--message-format=json-render-diagnostics"],
    stdout=subprocess.PIPE,
    text=True,
    env=cargo_env,
)
if build.returncode != 0:
    sys.exit(build.returncode)
if clippy:
    # What clippy --all-targets --all-features lints and the test build did not make: it builds
    # a package's bins only for its integration tests (reel-datagen's has none).
    rest = subprocess.run(["cargo", "build", "--workspace", "--release", "--all-targets",
                           "--all-features"], env=cargo_env)
    if rest.returncode != 0:
        sys.exit(rest.returncode)

binaries = []
for line in build.stdout.splitlines():
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("profile", {}).get("test"):
        continue
    if not msg.get("executable"):
        continue
    package_dir = os.path.dirname(msg["manifest_path"])
    name = msg["target"]["name"]
    kind = msg["target"]["kind"][0]
    source = os.path.relpath(msg["target"]["src_path"], package_dir)
    label = f"unittests {source}" if kind in ("lib", "bin") else source
    binaries.append({
        "key": f"{os.path.basename(package_dir)}/{kind}/{name}",
        "label": f"{os.path.basename(package_dir)}: {label}",
        "exe": msg["executable"],
        "dir": package_dir,
    })

# Seconds each took on a 2-core machine (2026-12-05/06), for a checkout without a previous run.
SLOWEST = {"reel-chunkstore/test/crash": 50, "reel/test/emulation": 52, "reel/test/libiscsi": 39,
           "reel-chunkstore/test/crash_s3": 33, "reel-backend/test/s3": 30, "reel/test/cluster": 28,
           "reel/test/api_login_flood": 14}
try:
    with open(durations_file) as f:
        known = json.load(f)
except (OSError, ValueError):
    known = dict(SLOWEST)
# The slowest of the last run first, so the last to start are short; unknown ones count as 10 s.
binaries.sort(key=lambda b: -known.get(b["key"], 10))

lock = threading.Lock()
queue = list(binaries)
failed = []
took = {}


def worker():
    while True:
        with lock:
            if not queue:
                return
            b = queue.pop(0)
        env = dict(os.environ, CARGO_MANIFEST_DIR=b["dir"])
        t0 = time.monotonic()
        run = subprocess.run([b["exe"], *args], cwd=b["dir"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        seconds = time.monotonic() - t0
        with lock:
            took[b["key"]] = round(seconds, 1)
            out = run.stdout.decode("utf-8", "replace")
            sys.stdout.write(f"\n     Running {b['label']} ({os.path.relpath(b['exe'], root)}), {seconds:.1f} s\n{out}")
            if run.returncode != 0:
                failed.append(f"{b['label']} (exit {run.returncode})")
                sys.stdout.write(f"FAILED: {b['label']} exited {run.returncode}\n")
            sys.stdout.flush()


t0 = time.monotonic()
threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
for t in threads:
    t.start()
for t in threads:
    t.join()
known.update(took)
with open(durations_file, "w") as f:
    json.dump(known, f, indent=1, sort_keys=True)
print(f"\n{len(binaries)} test binaries, {jobs} at a time: {time.monotonic() - t0:.0f} s "
      f"(one after the other: {sum(took.values()):.0f} s)")

doc = subprocess.run(["cargo", "test", "--workspace", "--release", "--doc"], env=cargo_env)
if doc.returncode != 0:
    failed.append("doc tests")
if failed:
    print("test binaries that failed:\n  " + "\n  ".join(failed), file=sys.stderr)
    sys.exit(1)
