#!/usr/bin/env python3
"""Replays a coding agent's conversation against `moerun server` (docs/SERVER.md "Prompt cache").

The conversation is scripted in the shape of a recorded agent session: a system prompt with tool
definitions of several thousand tokens, a main agent's turns (a tool call recorded as the assistant's
message, then the tool's result, file contents and test logs), two sub-agents that start from the same
system prompt and tools, one compaction of the main history (its messages replaced by a summary), and a
server restart in the middle (the server is stopped and started again with the same options). The
assistant messages are the recorded ones, not the model's replies (the history an agent sends back), and
each request generates --gen tokens greedily.

Per request: prompt tokens, tokens from cache (usage.prompt_tokens_details.cached_tokens), tokens read,
its new tokens (those after the prompt's divergence from every earlier prompt), the most a prompt
cache may read (the new tokens plus one snapshot interval), prefill seconds (timings.prompt_ms) and
wall seconds; at the end the server's peak RSS (VmHWM of each run), the cache directory's size
(largest seen) and the /metrics counters of the prompt cache, checked against --cache-ram and
--cache-disk.

With --check the exit status is 1 unless every request after the first read at most its bound, the
first request after the restart read no more than its new tokens (nothing the server had read
before the restart) and at most --restart-max percent of its prompt, and the RAM and disk bounds held.

  bench/agent_replay.py --moerun build/moerun --model M [--label NAME] [--scale 1] [--gen 8]
                        [--every 1024] [--max-requests N] [--json out.json] [--check] [--restart-max 5]
                        -- SERVER ARGS (e.g. --cache-ram 2G --cache-dir D)
Only the Python standard library; markdown on stdout."""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

WORDS = ("the function reads the buffer and returns the count of tokens that were parsed before the error "
         "while the caller checks the result against the expected value in the test and logs the path of "
         "each file that changed since the last commit on the branch").split()


def words(n, seed):
    out, x = [], seed * 2654435761 % 4294967296
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        out.append(WORDS[x % len(WORDS)])
    return " ".join(out)


def code(lines, seed):
    return "\n".join(f"static int f{seed}_{i}(int x) {{ return x * {seed + i} + {i % 7}; }} /* {words(6, seed * 31 + i)} */"
                     for i in range(lines))


def conversation(scale):
    """The requests in order: (label, messages, restart_before)."""
    s = lambda n: max(1, int(n * scale))
    system = ("You are a coding agent working in a git checkout of a C project. Follow the rules below.\n" +
              "\n".join(f"{i + 1}. {words(s(60), 100 + i)}" for i in range(60)))
    tools = [{"type": "function", "function": {
        "name": name, "description": words(s(90), 200 + i),
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": words(s(25), 300 + i)},
            "pattern": {"type": "string", "description": words(s(15), 400 + i)},
            "limit": {"type": "integer", "description": words(s(10), 500 + i)}}, "required": ["path"]}}}
        for i, name in enumerate(["read_file", "write_file", "edit_file", "grep", "run_tests", "list_dir", "git_diff", "task"])]
    head = [{"role": "system", "content": system}]
    reqs = []
    hist = [{"role": "user", "content": "The test test_parser fails since the last commit. Find the cause and fix it. " + words(s(40), 1)}]
    calls = ["list_dir", "read_file", "grep", "read_file", "run_tests", "edit_file", "run_tests", "git_diff", "read_file", "edit_file",
             "run_tests", "read_file", "edit_file", "run_tests"]
    restart_at = 10
    for t, name in enumerate(calls):
        if t == 4:  # two sub-agents with the same system prompt and tools
            for a in range(2):
                sub = [{"role": "user", "content": f"Sub-task {a + 1}: survey the module {'lexer' if a == 0 else 'writer'}. " + words(s(50), 60 + a)}]
                reqs.append((f"sub{a + 1}.1", head + sub, False))
                sub += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"s{a}", "type": "function", "function": {
                    "name": "read_file", "arguments": json.dumps({"path": f"src/mod{a}.c"})}}]},
                        {"role": "tool", "tool_call_id": f"s{a}", "content": code(s(40), 70 + a)}]
                reqs.append((f"sub{a + 1}.2", head + sub, False))
        if t == 8:  # compaction: the history so far replaced by a summary of it
            hist = [{"role": "user", "content": "Summary of the conversation so far: " + words(s(300), 80)},
                    {"role": "user", "content": "Continue with the fix. " + words(s(20), 81)}]
        reqs.append((f"turn{t + 1}", head + list(hist), t == restart_at))
        cid = f"c{t}"
        hist.append({"role": "assistant", "content": words(s(25), 90 + t), "tool_calls": [{"id": cid, "type": "function", "function": {
            "name": name, "arguments": json.dumps({"path": f"src/file{t}.c"})}}]})
        result = code(s(60), t) if name in ("read_file", "git_diff") else words(s(250), 120 + t)
        hist.append({"role": "tool", "tool_call_id": cid, "content": result})
    return reqs, tools


class Server:
    def __init__(self, moerun, model, args, log):
        self.cmd = [moerun, "server", "-m", model, *args]
        self.log = log

    def start(self):
        for _ in range(3):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
            s.close()
            self.p = subprocess.Popen(self.cmd + ["--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=open(self.log, "a"))
            t0 = time.time()
            while self.p.poll() is None and time.time() - t0 < 1800:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5).read()
                    return time.time() - t0
                except Exception:
                    time.sleep(0.2)
            if self.p.poll() is None:
                self.p.kill()
        raise RuntimeError("server did not start: " + open(self.log).read()[-800:])

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=36000) as r:
            return json.loads(r.read().decode("utf-8", "surrogateescape"))

    def metrics(self):
        out = {}
        for line in urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30).read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k[len("moerun_"):]] = float(v)
        return out

    def peak_rss(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
        return int(m.group(1)) * 1024 if m else 0

    def stop(self):
        self.p.terminate()
        self.p.wait(120)


def dir_bytes(d):
    if not d or not os.path.isdir(d):
        return 0
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))


def size_arg(args, name):
    if name not in args:
        return None
    v = args[args.index(name) + 1]
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)(i?B)?", v, re.I)
    if not m:
        return None
    mul = {"": 1 << 20 if not m.group(2) else 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return float(m.group(1)) * mul


def common(a, b):
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moerun", default="build/moerun")
    ap.add_argument("--model", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--scale", type=float, default=1.0, help="text sizes (1: a system prompt + tools of ~12k tokens)")
    ap.add_argument("--gen", type=int, default=8)
    ap.add_argument("--every", type=int, default=1024, help="the server's --cache-every (for the bound)")
    ap.add_argument("--max-requests", type=int, default=0, help="stop after N requests (0: all)")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the bounds held (see above)")
    ap.add_argument("--restart-max", type=float, default=5.0, help="--check: percent of its prompt the restart's first request may read")
    ap.add_argument("server_args", nargs="*")
    a = ap.parse_args()
    sargs = a.server_args
    cache_dir = sargs[sargs.index("--cache-dir") + 1] if "--cache-dir" in sargs else None
    if cache_dir:
        shutil.rmtree(cache_dir, ignore_errors=True)  # a cold start: the first request reads everything
    log = f"/tmp/agent_replay.{os.getpid()}.log"
    srv = Server(a.moerun, a.model, sargs, log)
    reqs, tools = conversation(a.scale)
    if a.max_requests > 0:
        reqs = reqs[:a.max_requests]
    load0 = os.getloadavg()[0]
    t_load = srv.start()
    rows, seen, rss, dmax, mets = [], [], [], 0, []
    t_all = time.time()
    for label, msgs, restart in reqs:
        if restart:
            mets.append(srv.metrics())
            rss.append(srv.peak_rss())
            srv.stop()
            srv.start()
            label += " (restarted)"
        text = srv.post("/apply-template", {"messages": msgs, "tools": tools})["prompt"]
        ids = srv.post("/tokenize", {"content": text})["tokens"]
        d = max([common(ids, x) for x in seen] + [0])
        seen.append(ids)
        t0 = time.time()
        r = srv.post("/v1/chat/completions", {"messages": msgs, "tools": tools, "max_tokens": a.gen, "temperature": 0, "seed": 1})
        wall = time.time() - t0
        u, tm = r["usage"], r.get("timings", {})
        n, cached = u["prompt_tokens"], u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        # the BOS the server may add before the template's text is not in ids: n - len(ids) is 0 or 1
        new = n - d - (n - len(ids)) if seen[:-1] else n
        bound = new + a.every if seen[:-1] else n
        m = srv.metrics()
        dmax = max(dmax, dir_bytes(cache_dir))
        rows.append({"label": label, "prompt": n, "cached": cached, "read": n - cached, "new": new, "bound": bound,
                     "prefill_s": tm.get("prompt_ms", 0) / 1e3, "wall_s": wall,
                     "ram_bytes": m.get("prompt_cache_ram_bytes", 0), "disk_bytes": m.get("prompt_cache_disk_bytes", 0)})
        print(f"{label}: {n} tokens, {cached} cached, {wall:.2f} s", file=sys.stderr)
    mets.append(srv.metrics())
    rss.append(srv.peak_rss())
    srv.stop()
    total = time.time() - t_all
    ram_cap, disk_cap = size_arg(sargs, "--cache-ram"), size_arg(sargs, "--cache-disk")
    print(f"### {a.label or os.path.basename(a.model)}: {' '.join(sargs) or '(no cache options)'}\n")
    print("| request | prompt | from cache | read | new | bound | prefill s | wall s |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for x in rows:
        ok = "" if x["read"] <= x["bound"] else " (over)"
        print(f"| {x['label']} | {x['prompt']} | {x['cached']} | {x['read']}{ok} | {x['new']} | {x['bound']} | {x['prefill_s']:.2f} | {x['wall_s']:.2f} |")
    tot_p, tot_r = sum(x["prompt"] for x in rows), sum(x["read"] for x in rows)
    over = [x["label"] for x in rows[1:] if x["read"] > x["bound"]]
    restarted = next((x for x in rows if "restarted" in x["label"]), None)
    after = (f"after the restart read {restarted['read']} of {restarted['prompt']} ({100.0 * restarted['read'] / restarted['prompt']:.2f} %, "
             f"its new tokens {restarted['new']})" if restarted else "no restart")
    ram_peak, disk_peak = max(x["ram_bytes"] for x in rows), max(x["disk_bytes"] for x in rows)
    print(f"\n{len(rows)} requests: {tot_p} prompt tokens, {tot_r} read ({100.0 * tot_r / tot_p:.1f} %), "
          f"prefill {sum(x['prefill_s'] for x in rows):.1f} s, wall {total:.1f} s (server start {t_load:.1f} s); "
          f"over the bound: {', '.join(over) or 'none'}; {after}; "
          f"peak RSS {max(rss) / 2**20:.0f} MiB; cache RAM peak {ram_peak / 2**20:.1f} MiB"
          f"{' (bound %.0f MiB %s)' % (ram_cap / 2**20, 'held' if ram_peak <= ram_cap else 'EXCEEDED') if ram_cap is not None else ''}, "
          f"cache directory peak {dmax / 2**20:.1f} MiB"
          f"{' (bound %.0f MiB %s)' % (disk_cap / 2**20, 'held' if disk_peak <= disk_cap and dmax <= disk_cap else 'EXCEEDED') if disk_cap else ''}; "
          f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    last = mets[-1]
    keys = [k for k in last if k.startswith("prompt_cache") or k in ("prompt_cached_tokens_total", "pager_read_bytes_per_second")]
    print("metrics (last run): " + ", ".join(f"{k} {last[k]:.0f}" for k in keys))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"label": a.label, "args": sargs, "rows": rows, "peak_rss": rss, "dir_peak": dmax, "metrics": mets}, f, indent=1)
    if a.check:
        bad = [f"{x} read more than its bound" for x in over]
        if not restarted:
            bad.append("no restart among the requests")
        elif restarted["read"] > restarted["new"] or restarted["read"] > a.restart_max / 100 * restarted["prompt"]:
            bad.append(f"{restarted['label']} read {restarted['read']} of {restarted['prompt']} tokens "
                       f"(its new tokens {restarted['new']}, at most {a.restart_max:g} %)")
        if ram_cap is not None and ram_peak > ram_cap:
            bad.append(f"cache RAM {ram_peak} bytes above --cache-ram")
        if disk_cap and max(disk_peak, dmax) > disk_cap:
            bad.append(f"cache directory {max(disk_peak, dmax)} bytes above --cache-disk")
        print("check: " + ("; ".join(bad) if bad else "ok"))
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
