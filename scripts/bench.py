#!/usr/bin/env python3
"""The benchmark behind scripts/bench.sh (Python's standard library only).

Drives each server with `janus-swarm` (the load generator, built beside the binary): simulated nodes that
behave as janusd does on the wire (a new TLS connection per request, full
handshakes, fleet-mode checks). Client and server share this machine.
"""
import argparse
import hashlib
import hmac
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid, field):
    """A /proc/PID/status field in KiB (VmRSS, VmHWM)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, kind, proc, addr, log):
        self.kind, self.proc, self.addr, self.log = kind, proc, addr, log

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        peak = proc_status(self.pid, "VmHWM")
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return peak


class Bench:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.abspath(args.bin)
        # The load generator is a tool beside the product (crates/bench), built with it.
        self.swarm_bin = os.path.join(os.path.dirname(self.bin), "janus-swarm")
        self.work = tempfile.mkdtemp(prefix="janus-bench-")
        self.run([self.bin, "certs", "fleet", "--out", self.path("fleet"), "--name", "Bench fleet"])
        self.run([self.bin, "certs", "controller", "--fleet", self.path("fleet"), "--out", self.path("controller"),
                  "--san", "127.0.0.1"])
        self.root = self.path("fleet/root.crt")

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def run(self, cmd, **kw):
        return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)

    def state(self, name, tokens=None):
        d = self.path(name)
        os.makedirs(os.path.join(d, "nodes"))
        os.makedirs(os.path.join(d, "approved"))
        if tokens is not None:
            with open(os.path.join(d, "tokens"), "w") as f:
                f.write("".join(t + "\n" for t in tokens))
        return d

    def start_ours(self, state, extra=()):
        log = open(self.path(f"ours-{os.path.basename(state)}.log"), "w+")
        # The load comes from one address standing for many nodes: no
        # per-source cap (where this build has one).
        serve_help = subprocess.run([self.bin, "serve", "--help"], capture_output=True, text=True).stdout
        one_source = ["--max-connections-per-source", "0"] if "--max-connections-per-source" in serve_help else []
        started = time.monotonic()
        proc = subprocess.Popen(
            [self.bin, "serve", "--listen", "127.0.0.1:0", "--fleet", self.path("fleet"),
             "--cert", self.path("controller.crt"), "--key", self.path("controller.key"), "--state", state,
             "--rate-burst", "100000000", "--max-pending", "100000000", *one_source, *extra],
            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log.name) as f:
                for line in f:
                    if "serving listen=" in line:
                        addr = line.split("serving listen=")[1].split()[0]
                        server = Server("ours", proc, addr, log)
                        server.startup_seconds = time.monotonic() - started
                        return server
            if proc.poll() is not None:
                sys.exit(f"bench: our server did not start: {open(log.name).read()}")
            time.sleep(0.005)
        sys.exit("bench: our server did not start in 30 s")

    def start_reference(self, state):
        port = free_port()
        log = open(self.path(f"ref-{os.path.basename(state)}.log"), "w+")
        proc = subprocess.Popen(
            [sys.executable, self.args.reference, "--listen", f"127.0.0.1:{port}", "--fleet", self.path("fleet"),
             "--cert", self.path("controller.crt"), "--key", self.path("controller.key"), "--state", state],
            stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return Server("reference", proc, f"127.0.0.1:{port}", log)
            except OSError:
                time.sleep(0.05)
        sys.exit("bench: the reference did not start")

    def swarm(self, server, nodes, polls, concurrency, extra=()):
        out = self.path(f"swarm-{time.monotonic_ns()}.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.run([self.swarm_bin, "--addr", server.addr, "--fleet-root", self.root,
                  "--nodes", str(nodes), "--polls", str(polls), "--concurrency", str(concurrency),
                  "--server-pid", str(server.pid), "--json", out, *extra])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out) as f:
            report = json.load(f)
        # The load generator's own CPU (minting the node CAs included).
        report["client_cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return report

    def wait_for_log(self, server, needle, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with open(server.log.name) as f:
                if needle in f.read():
                    return True
            time.sleep(0.05)
        return False


def phase_summary(phase):
    if not phase:
        return None
    cpu = phase.get("server_cpu_seconds")
    return {
        "per_second": round(phase["per_second"], 1),
        "p50_ms": round(phase["p50_ms"], 2),
        "p99_ms": round(phase["p99_ms"], 2),
        "max_ms": round(phase["max_ms"], 2),
        "cpu_s_per_1000": round(cpu / phase["requests"] * 1000, 3) if cpu is not None else None,
        "outcomes": phase["outcomes"],
        "requests": phase["requests"],
    }


def measure(bench, kind, sizes):
    """Every figure for one server kind."""
    start = bench.start_ours if kind == "ours" else bench.start_reference
    result = {}
    # Tokenless announcements, then polls while pending.
    state = bench.state(f"{kind}-main")
    server = start(state)
    report = bench.swarm(server, sizes["nodes"], sizes["polls"], sizes["concurrency"])
    result["announce_tokenless"] = phase_summary(report["announce"])
    result["poll_pending"] = phase_summary(report["poll"])
    requests = report["announce"]["requests"] + report["poll"]["requests"]
    result["client_cpu_s_per_1000"] = round(report["client_cpu_seconds"] / requests * 1000, 3)
    # Polls once admitted (approval files made between the phases).
    report = bench.swarm(server, sizes["nodes"] // 4, sizes["polls"] * 4, sizes["concurrency"],
                         ["--approve-in", state])
    result["poll_admitted"] = phase_summary(report["poll"])
    # Polls at rising concurrency: where does p99 pass 1 s?
    result["poll_p99_by_concurrency"] = {}
    for level in sizes["levels"]:
        report = bench.swarm(server, max(level, 16), max(2, sizes["sweep_requests"] // max(level, 16)), level)
        result["poll_p99_by_concurrency"][str(level)] = phase_summary(report["poll"])
    result["peak_rss_mib"] = round((server.stop() or 0) / 1024, 1)
    result.update(measure_tokens(bench, kind, sizes))
    return result


def measure_multi_use(bench, sizes):
    """One token of many uses, most of them spent already: each announcement
    must cost what a one-use token's does (the use found by bisection, the
    same CA's by name), not grow with the uses spent."""
    uses, spent, nodes = sizes["multi_uses"], sizes["multi_spent"], sizes["multi_nodes"]
    state = bench.state("ours-multi-use", [])
    bench.run([bench.bin, "tokens", "add", "--state", state, "--uses", str(uses)], input="")
    token = open(os.path.join(state, "tokens")).read().split()[0]
    # The first `spent` uses, as earlier admissions left them: markers in
    # the ledger, named with the state's key, linked to one holder record.
    key_path = os.path.join(state, "token-uses.key")
    if not os.path.exists(key_path):
        with open(key_path, "wb") as f:
            f.write(os.urandom(32))
        os.chmod(key_path, 0o600)
    mac = hmac.new(open(key_path, "rb").read(), token.encode(), hashlib.sha256).hexdigest()
    ledger = os.path.join(state, "token-uses")
    os.makedirs(ledger, exist_ok=True)
    holder = os.path.join(bench.work, "multi-holder.json")
    with open(holder, "w") as f:
        f.write('{"id":"' + "0" * 32 + '"}')
    for n in range(1, spent + 1):
        os.link(holder, os.path.join(ledger, f"{mac}-{n}"))
    server = bench.start_ours(state)
    token_list = bench.path("multi-token-list")
    with open(token_list, "w") as f:
        f.write((token + "\n") * nodes)
    report = bench.swarm(server, nodes, 0, sizes["concurrency"], ["--tokens", token_list])
    server.stop()
    result = phase_summary(report["announce"])
    result["admitted_in_answer"] = report["admitted_in_answer"]
    result["uses"], result["spent_before"] = uses, spent
    return result


def measure_tokens(bench, kind, sizes):
    """Announcements with tokens, against a large tokens file."""
    start = bench.start_ours if kind == "ours" else bench.start_reference
    result = {}
    tokens = [f"bench-token-{i:07d}-{os.urandom(6).hex()}" for i in range(sizes["token_file"])]
    state = bench.state(f"{kind}-tokens", tokens)
    used = tokens[: sizes["token_nodes"]]
    token_list = bench.path(f"{kind}-token-list")
    with open(token_list, "w") as f:
        f.write("\n".join(used) + "\n")
    server = start(state)
    report = bench.swarm(server, sizes["token_nodes"], 0, sizes["concurrency"], ["--tokens", token_list])
    result["announce_token"] = phase_summary(report["announce"])
    result["announce_token"]["admitted_in_answer"] = report["admitted_in_answer"]
    # A mass boot: the next tokens, 64 nodes at a time.
    burst = tokens[sizes["token_nodes"]: 2 * sizes["token_nodes"]]
    with open(token_list, "w") as f:
        f.write("\n".join(burst) + "\n")
    report = bench.swarm(server, sizes["token_nodes"], 0, 64, ["--tokens", token_list])
    result["announce_token_64"] = phase_summary(report["announce"])
    result["announce_token_64"]["admitted_in_answer"] = report["admitted_in_answer"]
    # Spent tokens are blanked by a thread of the server's just after each
    # answer: give it a moment (polled, 10 s at most) to catch up.
    deadline = time.monotonic() + 10
    while True:
        with open(os.path.join(state, "tokens")) as f:
            left = f.read().split()
        if left == tokens[2 * sizes["token_nodes"]:] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    server.stop()
    if kind == "ours":
        result["announce_multi_use"] = measure_multi_use(bench, sizes)
    result["announce_token"]["tokens_file_exact"] = (
        left == tokens[2 * sizes["token_nodes"]:]
        and result["announce_token"]["admitted_in_answer"] == sizes["token_nodes"]
        and result["announce_token_64"]["admitted_in_answer"] == sizes["token_nodes"])
    return result


def pending_node(bench, server, name):
    """Announces one node with the agent; its (id, poll secret)."""
    with open(bench.root) as f:
        root = f.read()
    user_data = bench.path(f"{name}-user-data.json")
    with open(user_data, "w") as f:
        json.dump({"controller_address": server.addr, "controller_ca_cert": root,
                   "controller_fleet_root_cert": root, "network": {"hostname": name}}, f)
    node = bench.path(f"{name}-node")
    subprocess.run([bench.bin, "agent", "--user-data", user_data, "--dir", node, "--once"],
                   capture_output=True, check=False)
    with open(os.path.join(node, "enrollment.json")) as f:
        enrollment = json.load(f)
    return enrollment["id"], enrollment["secret"]


def wrk(url, seconds, headers=()):
    args = ["wrk", "-t2", "-c16", f"-d{seconds}s", "--latency"]
    for h in headers:
        args += ["-H", h]
    run = subprocess.run(args + [url], capture_output=True, text=True)
    out = {}
    for line in run.stdout.splitlines():
        parts = line.split()
        if line.startswith("Requests/sec:"):
            out["per_second"] = float(parts[1])
        elif len(parts) == 2 and parts[0] == "99%":
            out["p99"] = parts[1]
        elif "Non-2xx" in line or "Socket errors" in line:
            out.setdefault("notes", []).append(line.strip())
    return out


def keep_alive(bench, sizes, kind):
    """wrk over keep-alive HTTP/1.1 connections (orchestrator clients): a
    pending poll, and for ours /healthz too; ours runs with --keep-alive, the
    reference (HTTP/1.0) closes every connection whatever the client asks."""
    if not shutil.which("wrk"):
        return {"skipped": "wrk is not installed (apt-get install wrk)"}
    state = bench.state(f"{kind}-keepalive")
    server = bench.start_ours(state, ["--keep-alive"]) if kind == "ours" else bench.start_reference(state)
    node_id, secret = pending_node(bench, server, f"{kind}-wrk")
    out = {"poll_pending": wrk(f"https://{server.addr}/register/{node_id}", sizes["wrk_seconds"],
                               [f"Authorization: Bearer {secret}"])}
    if kind == "ours":
        out["healthz"] = wrk(f"https://{server.addr}/healthz", sizes["wrk_seconds"])
    server.stop()
    return out


def ceiling(bench, sizes):
    server = bench.start_ours(bench.state("ceiling"))
    report = bench.swarm(server, sizes["nodes"], sizes["polls"], sizes["concurrency"], ["--only-get", "/healthz"])
    server.stop()
    return phase_summary(report["poll"])


def many_records(bench, sizes):
    """Startup, `nodes list`, RSS and poll rate with a large state directory."""
    ca = bench.path("scale-ca")
    bench.run([bench.bin, "certs", "node-ca", "--name", "scale", "--out", ca])
    with open(ca + ".crt") as f:
        pem = f.read()
    state = bench.state("ours-scale")
    nodes = os.path.join(state, "nodes")
    # Announced now: records older than --pending-max-age (7 days) would be
    # forgotten by the first pass, which would then measure forgetting.
    announced_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for i in range(sizes["records"]):
        node_id = os.urandom(16).hex()
        with open(os.path.join(nodes, node_id + ".json"), "w") as f:
            json.dump({"id": node_id, "name": f"scale-{i}", "address": "10.0.0.1:9505", "ca_cert_pem": pem,
                       "admitted": False, "poll_secret_sha256": "0" * 64, "ca_sha256": "0" * 64,
                       "announced_at": announced_at, "peer_address": "10.0.0.1:40000"}, f, indent=2)
    out = {"records": sizes["records"]}
    server = bench.start_ours(state)
    out["startup_seconds"] = round(server.startup_seconds, 3)
    # Steady state: after the startup scan that counts pending records (off the request path).
    started = time.monotonic()
    bench.wait_for_log(server, "state scanned")
    out["first_scan_seconds"] = round(time.monotonic() - started, 3)
    report = bench.swarm(server, 100, sizes["polls"] * 10, sizes["concurrency"])
    out["poll"] = phase_summary(report["poll"])
    out["rss_mib_serving"] = round((proc_status(server.pid, "VmRSS") or 0) / 1024, 1)
    out["peak_rss_mib"] = round((server.stop() or 0) / 1024, 1)
    started = time.monotonic()
    listed = subprocess.run([bench.bin, "nodes", "list", "--json", "--state", state], capture_output=True, check=True)
    out["nodes_list_seconds"] = round(time.monotonic() - started, 3)
    out["nodes_listed"] = listed.stdout.count(b"\n") + 1
    # The same poll load with ~100 records, for the ratio.
    small = bench.start_ours(bench.state("ours-small"))
    report = bench.swarm(small, 100, sizes["polls"] * 10, sizes["concurrency"])
    small.stop()
    out["poll_with_100_records"] = phase_summary(report["poll"])
    return out


def million_state(bench, directory, records=1_000_000, pending=100):
    """A state of `records` node records, all but `pending` of them admitted
    (record says so, `approved/<id>` exists), made once and kept: it takes
    minutes."""
    done = os.path.join(directory, ".complete")
    if os.path.exists(done):
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(os.path.join(directory, "nodes"))
    os.makedirs(os.path.join(directory, "approved"))
    os.chmod(directory, 0o700)
    ca = bench.path("million-ca")
    bench.run([bench.bin, "certs", "node-ca", "--name", "scale", "--out", ca])
    with open(ca + ".crt") as f:
        pem = f.read()
    for i in range(records):
        node_id = os.urandom(16).hex()
        admitted = i >= pending
        with open(os.path.join(directory, "nodes", node_id + ".json"), "w") as f:
            json.dump({"id": node_id, "name": f"scale-{i}", "address": "10.0.0.1:9505", "ca_cert_pem": pem,
                       "admitted": admitted, "poll_secret_sha256": "0" * 64, "ca_sha256": "0" * 64,
                       "announced_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "peer_address": "10.0.0.1:40000"}, f)
        if admitted:
            open(os.path.join(directory, "approved", node_id), "w").close()
    open(done, "w").close()
    return directory


def million(bench, sizes, directory, idle_seconds):
    """1,000,000 records, 100 pending: startup, the first maintenance pass
    (wall time and server CPU), idle CPU, `nodes list --pending`, RSS, and
    the poll rate against the same load on ~100 records."""
    state = million_state(bench, directory)
    before = set(os.listdir(os.path.join(state, "nodes")))
    out = {"records": len(before)}
    server = bench.start_ours(state, ["--maintenance-every", "60s"])
    out["startup_seconds"] = round(server.startup_seconds, 3)
    cpu_at_start = cpu_seconds(server.pid)
    started = time.monotonic()
    bench.wait_for_log(server, "state scanned", seconds=600)
    out["first_pass_seconds"] = round(time.monotonic() - started, 3)
    out["first_pass_cpu_seconds"] = round(cpu_seconds(server.pid) - cpu_at_start, 3)
    cpu_idle_from = cpu_seconds(server.pid)
    time.sleep(idle_seconds)
    out["idle_seconds"] = idle_seconds
    out["idle_cpu_percent_of_a_core"] = round(100 * (cpu_seconds(server.pid) - cpu_idle_from) / idle_seconds, 2)
    report = bench.swarm(server, 100, sizes["polls"] * 10, sizes["concurrency"])
    out["poll"] = phase_summary(report["poll"])
    out["rss_mib_serving"] = round((proc_status(server.pid, "VmRSS") or 0) / 1024, 1)
    out["peak_rss_mib"] = round((server.stop() or 0) / 1024, 1)
    started = time.monotonic()
    listed = subprocess.run([bench.bin, "nodes", "list", "--pending", "--json", "--state", state],
                            capture_output=True)
    out["nodes_list_pending_seconds"] = round(time.monotonic() - started, 3)
    out["nodes_list_pending_lines"] = listed.stdout.count(b"\n") + 1
    # Leave the state as it was: the swarm's own records go.
    for name in set(os.listdir(os.path.join(state, "nodes"))) - before:
        os.remove(os.path.join(state, "nodes", name))
    small = bench.start_ours(bench.state("million-small"))
    report = bench.swarm(small, 100, sizes["polls"] * 10, sizes["concurrency"])
    small.stop()
    out["poll_with_100_records"] = phase_summary(report["poll"])
    return out


def polls(bench, sizes):
    """Polls of pending nodes (a new TLS connection each), as in the main table."""
    server = bench.start_ours(bench.state("polls"))
    report = bench.swarm(server, sizes["nodes"] // 10, sizes["polls"] * 10, sizes["concurrency"])
    server.stop()
    return {"poll_pending": phase_summary(report["poll"])}


def ratio(a, b):
    return round(a / b, 2) if a and b else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--reference", help="registration-server.py, to measure side by side")
    p.add_argument("--quick", action="store_true", help="small sizes: checks the benchmark runs, measures little")
    p.add_argument("--out", default="bench-results.json")
    p.add_argument("--only", choices=["tokens", "million", "polls"],
                   help="measure one phase alone: tokens (ours, and the reference if given), or million "
                        "(1,000,000 records, 100 pending; the state is made once, minutes, and kept)")
    p.add_argument("--million-dir", default="/var/tmp/janus-bench-million",
                   help="where --only million keeps its state between runs")
    p.add_argument("--idle-seconds", type=int, default=180, help="how long --only million measures idle CPU")
    args = p.parse_args()
    sizes = (
        dict(nodes=100, polls=5, concurrency=16, token_file=2000, token_nodes=100, levels=[16],
             sweep_requests=400, records=2000, wrk_seconds=1, multi_uses=1000, multi_spent=900, multi_nodes=100)
        if args.quick else
        dict(nodes=1000, polls=10, concurrency=16, token_file=100_000, token_nodes=1000, levels=[16, 64, 256],
             sweep_requests=6000, records=100_000, wrk_seconds=5, multi_uses=10_000, multi_spent=9_000,
             multi_nodes=1000)
    )
    bench = Bench(args)
    if args.only == "polls":
        print(json.dumps({"ours": polls(bench, sizes)}, indent=2))
        shutil.rmtree(bench.work, ignore_errors=True)
        return
    if args.only == "million":
        results = {"million": million(bench, sizes, args.million_dir, args.idle_seconds)}
        print(json.dumps(results, indent=2))
        shutil.rmtree(bench.work, ignore_errors=True)
        return
    if args.only == "tokens":
        results = {"ours": measure_tokens(bench, "ours", sizes)}
        if args.reference:
            results["reference"] = measure_tokens(bench, "reference", sizes)
        print(json.dumps(results, indent=2))
        shutil.rmtree(bench.work, ignore_errors=True)
        return
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, {platform.release()}",
        "sizes": sizes,
        "ours": measure(bench, "ours", sizes),
        "ceiling_healthz": ceiling(bench, sizes),
        "keep_alive_wrk": keep_alive(bench, sizes, "ours"),
        "scale": many_records(bench, sizes),
    }
    if args.reference:
        results["reference"] = measure(bench, "reference", sizes)
        results["reference_keep_alive_wrk"] = keep_alive(bench, sizes, "reference")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print_table(results)
    print(f"\n(JSON: {args.out}; work files: {bench.work})")
    shutil.rmtree(bench.work, ignore_errors=True)


def print_table(r):
    ours, ref, ceil = r["ours"], r.get("reference"), r["ceiling_healthz"]

    def row(label, key, field, ceiling_value=None):
        o = ours[key][field] if ours.get(key) else None
        f = ref[key][field] if ref and ref.get(key) else None
        cells = [label, fmt(o), fmt(f), fmt(ratio(o, f)), fmt(ceiling_value), fmt(ratio(o, ceiling_value))]
        print("| " + " | ".join(cells) + " |")

    print(f"Benchmark {r['date']} on {r['machine']}; client and server share the machine.\n")
    print("| metric | ours | reference | ours/reference | ceiling (/healthz) | ours/ceiling |")
    print("|---|---|---|---|---|---|")
    row("announcements/s, tokenless (fsync'd record)", "announce_tokenless", "per_second")
    row(f"announcements/s, with tokens ({r['sizes']['token_file']}-token file)", "announce_token", "per_second")
    row("announcements/s, with tokens, 64 at a time", "announce_token_64", "per_second")
    row(f"announcements/s, one {r['sizes']['multi_uses']:,}-use token ({r['sizes']['multi_spent']:,} spent before)",
        "announce_multi_use", "per_second")
    row("polls/s, pending (new TLS connection each)", "poll_pending", "per_second", ceil["per_second"])
    row("polls/s, admitted (trust in the answer)", "poll_admitted", "per_second", ceil["per_second"])
    row("poll p50 ms, pending", "poll_pending", "p50_ms", ceil["p50_ms"])
    row("poll p99 ms, pending", "poll_pending", "p99_ms", ceil["p99_ms"])
    row("announce p99 ms, tokenless", "announce_tokenless", "p99_ms")
    row("server CPU s per 1,000 announcements", "announce_tokenless", "cpu_s_per_1000")
    row("server CPU s per 1,000 polls", "poll_pending", "cpu_s_per_1000", ceil["cpu_s_per_1000"])
    print(f"| client (swarm) CPU s per 1,000 requests | {fmt(ours['client_cpu_s_per_1000'])} | "
          f"{fmt((ref or {}).get('client_cpu_s_per_1000'))} | | | |")
    o_rss, f_rss = ours["peak_rss_mib"], (ref or {}).get("peak_rss_mib")
    print(f"| peak RSS MiB | {fmt(o_rss)} | {fmt(f_rss)} | {fmt(ratio(o_rss, f_rss))} | | |")
    print(f"\nTokens file exact after the token run: ours {ours['announce_token']['tokens_file_exact']}"
          + (f", reference {ref['announce_token']['tokens_file_exact']}" if ref else ""))
    print("\nPoll p99 (ms) by concurrency:")
    for level, phase in ours["poll_p99_by_concurrency"].items():
        other = ref["poll_p99_by_concurrency"][level]["p99_ms"] if ref else None
        print(f"  {level:>4}: ours {fmt(phase['p99_ms'])}  reference {fmt(other)}")
    s = r["scale"]
    print(f"\nWith {s['records']} node records: startup {s['startup_seconds']} s (then the pending count's scan,"
          f" off the request path: {s['first_scan_seconds']} s), `nodes list` {s['nodes_list_seconds']} s,"
          f" RSS serving {s['rss_mib_serving']} MiB (peak {s['peak_rss_mib']}), polls/s {s['poll']['per_second']}"
          f" vs {s['poll_with_100_records']['per_second']} with ~100 records"
          f" ({fmt(ratio(s['poll']['per_second'], s['poll_with_100_records']['per_second']))})")
    print(f"Keep-alive load (wrk -t2 -c16; ours with --keep-alive): ours {r['keep_alive_wrk']}")
    if "reference_keep_alive_wrk" in r:
        print(f"  reference (HTTP/1.0: closes every connection): {r['reference_keep_alive_wrk']}")


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"
    return str(v)


if __name__ == "__main__":
    main()
