#!/usr/bin/env python3
"""Tokens per second with and without each drafter, 1 and 4 streams, through `splash serve` and the HTTP API.

For each drafter (none, mtp, dflash, dflash2) the script starts `splash serve --draft <it>`, warms it up with
--warmup requests one at a time (the backend, and the adaptive draft length's cost model), then for each stream count runs --requests greedy requests (short Python functions, what splash-tiny
writes; the same prompts for every drafter, so greedy outputs — speculation is lossless — are the same tokens),
that many at once. It reports the generated tokens per second of wall time over all streams, each request's decode
rate (tokens after the first / the time between the first and the last), and the mean acceptance length from
/metrics (tokens per verify cycle). The last line is JSON.

  python3 scripts/bench/draft-throughput.py --splash ./splash --backend vulkan
  python3 scripts/bench/draft-throughput.py --splash "bun src/main.ts" --backend vulkan --requests 4 --max-tokens 32

Standard library only (the H200 device machine has Python, not Bun)."""
import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from serve_client import Server

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Python function that reverses a string.",
    "Write a Python function that checks whether a number is prime.",
    "Write a Python function that counts the vowels in a string.",
    "Write a Python function that returns the largest element of a list.",
    "Write a Python function that merges two sorted lists.",
    "Write a Python function that computes the factorial of n.",
    "Write a Python function that removes duplicates from a list, keeping the order.",
]


def spec_counts(s):
    m = s.metrics()
    pick = lambda name: sum(v for k, v in m.items() if k.startswith(name + "{"))
    return pick("splash_spec_cycles_total"), pick("splash_spec_accepted_tokens_total")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splash", default="./splash", help="the command that runs splash (default ./splash)")
    ap.add_argument("--model", default="splash-tiny")
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--drafters", default="none,mtp,dflash,dflash2")
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--requests", type=int, default=8, help="requests per stream count")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=4, help="requests before the timed ones, one at a time")
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--log", default="draft-throughput-server.log", help="the servers' output")
    a = ap.parse_args()

    rows = []
    for drafter in a.drafters.split(","):
        args = [a.model, "--backend", a.backend, "--draft", drafter, "--disk-cache", "0"]
        with Server(a.splash, args, a.port, None, a.log) as s:
            for i in range(a.warmup):
                s.chat(PROMPTS[-1 - i % len(PROMPTS)], a.max_tokens)
            for streams in (int(x) for x in a.streams.split(",")):
                before = spec_counts(s) if drafter != "none" else (0, 0)
                t0 = time.monotonic()
                with ThreadPoolExecutor(streams) as pool:
                    out = list(pool.map(lambda i: s.chat(PROMPTS[i % len(PROMPTS)], a.max_tokens), range(a.requests)))
                wall = time.monotonic() - t0
                after = spec_counts(s) if drafter != "none" else (0, 0)
                cycles, accepted = after[0] - before[0], after[1] - before[1]
                tokens = sum(r["usage"]["completion_tokens"] for r in out)
                decode = [(r["usage"]["completion_tokens"] - 1) / r["decode"] for r in out if r["decode"] > 0]
                row = {"drafter": drafter, "streams": streams, "requests": a.requests, "tokens": tokens, "wall_s": wall,
                       "tokens_per_s": tokens / wall, "decode_tokens_per_s_per_stream": statistics.median(decode) if decode else 0.0,
                       "acceptance_length": (accepted + cycles) / cycles if cycles else None}
                rows.append(row)
                acc = f"{row['acceptance_length']:.2f}" if row["acceptance_length"] else "-"
                print(f"{drafter:8s} {streams} stream(s): {tokens} tokens in {wall:.2f} s = {row['tokens_per_s']:.1f} tok/s; "
                      f"per stream {row['decode_tokens_per_s_per_stream']:.1f} tok/s (median); acceptance length {acc}", flush=True)
    base = {r["streams"]: r["tokens_per_s"] for r in rows if r["drafter"] == "none"}
    for r in rows:
        if r["drafter"] != "none" and r["streams"] in base:
            r["speedup"] = r["tokens_per_s"] / base[r["streams"]]
            print(f"{r['drafter']:8s} {r['streams']} stream(s): {r['speedup']:.2f}x --draft none")
    print(json.dumps({"bench": "draft-throughput", "backend": a.backend, "model": a.model, "max_tokens": a.max_tokens, "rows": rows}))


if __name__ == "__main__":
    main()
