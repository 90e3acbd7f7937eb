#!/usr/bin/env python3
"""The server's prompt cache (docs/SERVER.md "Prompt cache") on one model: a conversation of an agent
(system prompt and tools, turns with a tool call and its result, a sub-agent with the same system
prompt, a compacted history) answered byte for byte as by a server without the cache; a prompt that
diverges reads only the tokens after the last snapshot at or before the divergence (plus one
interval); a restart on the same --cache-dir restores (the next prompt reads only the tokens it adds
to one read before the restart, <= 5 % of it); corrupted,
truncated, other-version and foreign-model files are refused and the request answered from scratch;
a tiny --cache-disk and a directory that cannot be written never fail a request; POST /slots/N.

usage: server_cache.py MOERUN MODEL NAME PARALLEL   (prints "ok NAME_x" / "FAIL NAME_x: why")
"""
import json, os, shutil, socket, struct, subprocess, sys, tempfile, time, urllib.error, urllib.request

MOERUN, MODEL, NAME, PARALLEL = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
EVERY = 64
TMP = tempfile.mkdtemp(prefix="mr-pcache-")
failed = 0


def check(name, cond, why=""):
    global failed
    if cond:
        print(f"ok {NAME}_{name}")
    else:
        failed += 1
        print(f"FAIL {NAME}_{name}: {why}")
    sys.stdout.flush()


class Server:
    def __init__(self, *args):
        self.err = os.path.join(TMP, "srv.err")
        for _ in range(3):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
            s.close()
            self.p = subprocess.Popen([MOERUN, "server", "-m", MODEL, "--port", str(self.port), "-t", "2", "-c", "4096",
                                       *args], stdout=subprocess.DEVNULL, stderr=open(self.err, "w"))
            for _ in range(300):
                if self.p.poll() is not None:
                    break
                try:
                    if b'"ok"' in urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2).read():
                        return
                except Exception:
                    time.sleep(0.1)
            self.stop()
            if "cannot listen" not in open(self.err).read():
                break
        raise RuntimeError("server did not start: " + open(self.err).read()[-500:])

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                return r.status, json.loads(r.read().decode("utf-8", "surrogateescape"))
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode("utf-8", "surrogateescape") or "{}")

    def metrics(self):
        out = {}
        for line in urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10).read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k] = float(v)
        return out

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(30)


WORDS = ("the repository holds a parser a scheduler and the tests of each module read the file before you change it "
         "keep the functions short and name what they do run the tests after each change and report what failed").split()


def text(n, seed):
    return " ".join(WORDS[(seed * 7 + i * (seed % 5 + 1)) % len(WORDS)] for i in range(n))


SYSTEM = "You are a coding agent working in a checkout. " + text(900, 3)
TOOLS = [{"type": "function", "function": {"name": n, "description": text(40, i + 11),
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}
         for i, n in enumerate(["read_file", "run_tests", "grep"])]
U1 = {"role": "user", "content": "Fix the failing test in the parser. " + text(30, 5)}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
    "name": "read_file", "arguments": json.dumps({"path": "src/parser.c"})}}]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": text(120, 7)}
A2 = {"role": "assistant", "content": "The parser drops the last token."}
U2 = {"role": "user", "content": "Now run the tests."}


def conv(*msgs):
    return [{"role": "system", "content": SYSTEM}, *msgs]


TURNS = [conv(U1), conv(U1, CALL, RESULT), conv({"role": "user", "content": "Sub-task: list the modules. " + text(25, 17)}),
         conv({"role": "user", "content": "Summary of the work so far: " + text(60, 19)}, U2)]
NEXT = conv(U1, CALL, RESULT, A2, U2)  # after the restart: TURNS[1] and two more messages


def ask(srv, msgs):
    st, r = srv.post("/v1/chat/completions", {"messages": msgs, "tools": TOOLS, "max_tokens": 6, "temperature": 0, "seed": 1})
    if st != 200:
        return st, None, 0, 0
    u = r["usage"]
    return st, json.dumps(r["choices"], ensure_ascii=False), u["prompt_tokens"], u.get("prompt_tokens_details", {}).get("cached_tokens", 0)


def prompt_ids(srv, msgs):
    _, t = srv.post("/apply-template", {"messages": msgs, "tools": TOOLS})
    _, k = srv.post("/tokenize", {"content": t["prompt"]})
    return k["tokens"]


def common(a, b):
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def hash64(data, seed):
    """mr_hash64 (src/base/hash.c), to seal a header this test rewrites"""
    M = (1 << 64) - 1
    P1, P2, P3, P4, P5 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M
    rnd = lambda v, w: (rotl((v + w * P2) & M, 31) * P1) & M
    n, p = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while n - p >= 32:
            for i in range(4):
                v[i] = rnd(v[i], struct.unpack_from("<Q", data, p + 8 * i)[0])
            p += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for i in range(4):
            h = ((h ^ rnd(0, v[i])) * P1 + P4) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while n - p >= 8:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, p)[0]), 27) * P1 + P4) & M
        p += 8
    while p < n:
        h = (rotl(h ^ ((data[p] * P5) & M), 11) * P1) & M
        p += 1
    h ^= h >> 33; h = (h * P2) & M
    h ^= h >> 29; h = (h * P3) & M
    h ^= h >> 32
    return h


def reseal(path, version=None, model_id=None):
    """rewrite the 96-byte header's version or model identity with a valid header hash"""
    b = bytearray(open(path, "rb").read())
    if version is not None:
        struct.pack_into("<I", b, 8, version)
    if model_id is not None:
        struct.pack_into("<Q", b, 16, model_id)
    struct.pack_into("<Q", b, 88, hash64(bytes(b[:88]), 0))
    open(path, "wb").write(b)


def snap_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".mrsnap")) if os.path.isdir(d) else []


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) if os.path.isdir(d) else 0


def main():
    cache = os.path.join(TMP, "cache")
    # the reference: no prompt cache (each slot's own history only)
    off = Server("--parallel", "1")
    ref = [ask(off, t) for t in TURNS + [NEXT]]
    ids = [prompt_ids(off, t) for t in TURNS + [NEXT]]
    off.stop()
    check("ref", all(r[0] == 200 for r in ref), str([r[0] for r in ref]))

    on = Server("--parallel", PARALLEL, "--cache-ram", "256M", "--cache-dir", cache, "--cache-every", str(EVERY))
    got = [ask(on, t) for t in TURNS]
    same = sum(g[1] == r[1] for g, r in zip(got, ref))
    check("same_as_off", same == len(TURNS), f"{same} of {len(TURNS)} replies equal to the cache-off server's")
    # each turn after the first reads at most the tokens after its divergence from the earlier prompts
    # (the last snapshot at or before it) plus one interval
    bad = []
    for i in range(1, len(TURNS)):
        d = max(common(ids[i], ids[j]) for j in range(i))
        n, cached = got[i][2], got[i][3]
        if n - cached > len(ids[i]) - d + EVERY + 1:
            bad.append(f"turn {i}: {n} tokens, {cached} cached, diverges at {d}")
    check("reads_tail", not bad and got[2][3] > 0, "; ".join(bad) or f"sub-agent cached {got[2][3]}")
    m = on.metrics()
    check("metrics", m.get("moerun_prompt_cache_stores_total", 0) >= len(TURNS) and m.get("moerun_prompt_cache_ram_bytes", 1e18) <= 256 << 20 and m.get("moerun_prompt_cache_disk_bytes", 0) > 0,
          str({k: v for k, v in m.items() if "prompt_cache" in k}))
    # POST /slots/N?action=save|restore|erase, names kept in the cache directory
    st, sv = on.post("/slots/0?action=save", {"filename": "slot0.bin"})
    st2, er = on.post("/slots/0?action=erase", {})
    st3, rs = on.post("/slots/0?action=restore", {"filename": "slot0.bin"})
    st4, _ = on.post("/slots/0?action=save", {"filename": "../escape.bin"})
    st5, _ = on.post("/slots/0?action=restore", {"filename": "missing.bin"})
    check("slot_save_restore", st == 200 and sv["n_saved"] > 0 and os.path.isfile(os.path.join(cache, "slot0.bin")) and st2 == 200
          and st3 == 200 and rs["n_restored"] == sv["n_saved"] and st4 == 400 and st5 == 400
          and not os.path.exists(os.path.join(TMP, "escape.bin")), f"{st} {sv} {st2} {er} {st3} {rs} {st4} {st5}")
    on.stop()

    # a restart on the same directory: the next turn restores (reads <= 5 % of its prompt)
    on = Server("--parallel", PARALLEL, "--cache-ram", "256M", "--cache-dir", cache, "--cache-every", str(EVERY))
    st, rep, n, cached = ask(on, NEXT)
    m = on.metrics()
    check("restart_metrics", m.get("moerun_prompt_cache_hits_total", 0) == 1 and m.get("moerun_prompt_cache_disk_reads_total", 0) == 1
          and m.get("moerun_prompt_cache_tokens_restored_total", 0) == cached and m.get("moerun_prompt_cached_tokens_total", 0) == cached,
          str({k: v for k, v in m.items() if "cache" in k}))
    # the server read all of TURNS[1]'s prompt before the restart: only what NEXT adds is read (a BOS
    # the server puts before the template's text, not in ids, is in both)
    new = len(ids[4]) - common(ids[4], ids[1])
    check("restart_restores", st == 200 and rep == ref[4][1] and n - cached <= 0.05 * n and n - cached <= new,
          f"status {st}, {n} prompt tokens, {cached} cached (its new tokens {new}), same reply {rep == ref[4][1]}")
    on.stop()

    # bad files: every snapshot of this model corrupted one way or another, and a foreign model's file;
    # the request is answered from scratch with the same reply
    files = snap_files(cache)
    for i, f in enumerate(files):
        p = os.path.join(cache, f)
        kind = i % 4
        if kind == 0:  # a byte of the state flipped
            with open(p, "r+b") as fh:
                fh.seek(os.path.getsize(p) - 5)
                c = fh.read(1)
                fh.seek(-1, 1)
                fh.write(bytes([c[0] ^ 0x40]))
        elif kind == 1:  # truncated
            os.truncate(p, os.path.getsize(p) - 100)
        elif kind == 2:  # another format version, header sealed
            reseal(p, version=99)
        else:  # another model's identity, header sealed
            reseal(p, model_id=0x1234567890ABCDEF)
    on = Server("--parallel", PARALLEL, "--cache-ram", "256M", "--cache-dir", cache, "--cache-every", str(EVERY))
    st, rep, n, cached = ask(on, NEXT)
    m = on.metrics()
    check("bad_files_refused", st == 200 and rep == ref[4][1] and cached == 0 and m.get("moerun_prompt_cache_bad_files_total", 0) >= 1
          and m.get("moerun_requests_errors_total", 1) == 0,
          f"{len(files)} files, status {st}, same {rep == ref[4][1]}, cached {cached}, bad {m.get('moerun_prompt_cache_bad_files_total')}")
    on.stop()

    # a tiny disk bound, then the directory replaced by a file: every request answered the same
    small = os.path.join(TMP, "small")
    on = Server("--parallel", PARALLEL, "--cache-ram", "0", "--cache-dir", small, "--cache-disk", "1K", "--cache-every", str(EVERY))
    a = [ask(on, t) for t in TURNS[:2]]
    size = dir_bytes(small)
    shutil.rmtree(small)
    open(small, "w").close()  # writes fail now: not a directory
    b = [ask(on, t) for t in TURNS[2:]]
    m = on.metrics()
    on.stop()
    same = sum(g[1] == r[1] for g, r in zip(a + b, ref))
    check("full_disk", same == len(TURNS) and size <= 1024 and m.get("moerun_requests_errors_total", 1) == 0,
          f"{same} of {len(TURNS)} equal, directory {size} bytes, errors {m.get('moerun_requests_errors_total')}")


try:
    main()
except Exception as e:  # a failure to start or to talk to the server
    print(f"FAIL {NAME}_run: {type(e).__name__}: {e}")
    failed += 1
finally:
    shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if failed else 0)
