#!/usr/bin/env python3
"""Time to next token while a long prompt arrives (docs/SERVER.md "Scheduling and continuous batching").

D streamed greedy requests decode on a running `moerun server --parallel N`; once each has streamed a
few tokens, a request with a P-token prompt arrives. Reported per round: the window from its arrival
to its first token (its prefill), the longest gap between two streamed tokens of any decoding request
inside that window, their mean gap and their aggregate tokens/s in the window, the same aggregate
before the arrival, and the 1-minute load average at the start and end. Every round uses fresh prompts
(a nonce first), so the prompt cache does not shorten the prefill.

  bench/server_mixed.py --port 8080 [--decoders 3] [--prompt-tokens 2000] [--gen 400] [--rounds 1]
                        [--label NAME]
Only the Python standard library; one line per round on stdout (a markdown table row)."""
import argparse
import http.client
import json
import os
import random
import threading
import time

WORDS = ("the river runs past the old mill where children play under a grey sky while the baker counts "
         "loaves and the bell rings twice for noon across fields of barley and stone walls").split()


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("%s: %d %s" % (path, r.status, data[:200]))
    return json.loads(data)


def stream(port, body, times, first=None):
    """POST a streamed completion; append the arrival time of every chunk that carries text."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("stream: %d %s" % (r.status, r.read()[:200]))
    while True:
        line = r.fp.readline()
        if not line:
            break
        if line.startswith(b"data: {") and b'"text":"' in line and b'"text":""' not in line:
            t = time.monotonic()
            times.append(t)
            if first is not None and not first.is_set():
                first.set()
    c.close()


def load1():
    return os.getloadavg()[0]


def one_round(a, rnd):
    nonce = "%d-%d" % (os.getpid(), random.randrange(1 << 30))
    text = " ".join(random.choice(WORDS) for _ in range(a.prompt_tokens * 2))
    ids = post(a.port, "/tokenize", {"content": "Note %s: %s" % (nonce, text)})["tokens"][: a.prompt_tokens]
    times = [[] for _ in range(a.decoders)]
    th = []
    for d in range(a.decoders):
        body = {"prompt": "Story %s-%d: once upon a time" % (nonce, d), "max_tokens": a.gen, "temperature": 0}
        t = threading.Thread(target=stream, args=(a.port, body, times[d]))
        t.start()
        th.append(t)
    while min(len(x) for x in times) < 5:
        time.sleep(0.01)
    l0 = load1()
    t_arrive = time.monotonic()
    first = threading.Event()
    long_times = []
    lt = threading.Thread(target=stream, args=(a.port, {"prompt": ids, "max_tokens": 2, "temperature": 0}, long_times, first))
    lt.start()
    first.wait()
    t_first = time.monotonic()
    l1 = load1()
    for t in th + [lt]:
        t.join()
    win = t_first - t_arrive
    max_gap, gaps, n_win, n_before, t_start = 0.0, [], 0, 0, min(x[0] for x in times)
    for x in times:
        for i in range(1, len(x)):
            if x[i] > t_arrive and x[i - 1] < t_first:  # a gap that overlaps the prefill
                max_gap = max(max_gap, x[i] - x[i - 1])
                gaps.append(x[i] - x[i - 1])
        n_win += sum(1 for t in x if t_arrive < t <= t_first)
        n_before += sum(1 for t in x if t <= t_arrive)
    ended = sum(1 for x in times if x[-1] < t_first)
    print("| %s | %d | %.1f / %.1f | %.2f | %.2f | %.3f | %.2f | %.2f |%s" % (
        a.label, rnd, l0, l1, win, max_gap, sum(gaps) / len(gaps) if gaps else 0.0, n_win / win if win > 0 else 0.0,
        n_before / (t_arrive - t_start) if t_arrive > t_start else 0.0,
        " (%d decoder(s) ended before the prompt's first token)" % ended if ended else ""), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--decoders", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=2000)
    p.add_argument("--gen", type=int, default=400)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--label", default="")
    a = p.parse_args()
    for r in range(a.rounds):
        one_round(a, r + 1)


if __name__ == "__main__":
    main()
