#!/usr/bin/env python3
"""Time to first token with a prefix-cache hit against a miss, through `splash serve` and the HTTP API.

Each trial sends a new document of about --prefix-tokens tokens with a question (a miss: the whole prompt is
computed), then the same document with another question (a hit: the shared blocks resume from the prefix cache, only
the question and the last partial block are computed). The server runs with --draft none (speculation does not
change a prefill) and no disk tier, so every miss is one. The first, untimed request of the full length warms the
backend up. Prints each trial and the median ratio miss / hit; the last line is JSON.

  python3 scripts/bench/ttft-prefix.py --splash ./splash --backend vulkan            # starts and stops the server
  python3 scripts/bench/ttft-prefix.py --splash "bun src/main.ts" --backend vulkan
  python3 scripts/bench/ttft-prefix.py --url http://127.0.0.1:8080                   # a server already running

Standard library only (the H200 device machine has Python, not Bun)."""
import argparse
import json
import statistics
import sys
import time

from serve_client import Server, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splash", default="./splash", help="the command that runs splash (default ./splash)")
    ap.add_argument("--url", help="use a server already running there instead of starting one")
    ap.add_argument("--model", default="splash-tiny", help="the model `splash serve` loads (default splash-tiny)")
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--prefix-tokens", type=int, default=8192)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--log", default="ttft-prefix-server.log", help="the server's output")
    a = ap.parse_args()

    args = [a.model, "--backend", a.backend, "--draft", "none", "--disk-cache", "0"]
    with Server(a.splash, args, a.port, a.url, a.log) as s:
        # tokens per word of the generated text, from two prompts that differ by 1,000 words
        run = int(time.time())
        short = s.chat(text(10, run), 1)["usage"]["prompt_tokens"]
        long_ = s.chat(text(1010, run + 1), 1)["usage"]["prompt_tokens"]
        words = round(a.prefix_tokens / ((long_ - short) / 1000))
        s.chat(text(words, run + 2) + "\n\nQuestion: which word comes first?", 4)  # warm-up
        rows = []
        for t in range(a.trials):
            doc = text(words, run + 10 + t)
            miss = s.chat(doc + "\n\nQuestion: which word comes first?", 4)
            hit = s.chat(doc + "\n\nQuestion: which word comes last?", 4)
            cached = hit["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
            row = {"prompt_tokens": miss["usage"]["prompt_tokens"], "miss_ttft_s": miss["ttft"], "hit_ttft_s": hit["ttft"],
                   "hit_cached_tokens": cached, "ratio": miss["ttft"] / hit["ttft"]}
            rows.append(row)
            print(f"trial {t + 1}: {row['prompt_tokens']} prompt tokens; miss {miss['ttft'] * 1e3:.1f} ms, hit "
                  f"{hit['ttft'] * 1e3:.1f} ms ({cached} tokens from the cache): {row['ratio']:.1f}x", flush=True)
        ratio = statistics.median(r["ratio"] for r in rows)
        print(f"median TTFT miss / hit at {statistics.median(r['prompt_tokens'] for r in rows):.0f} prompt tokens on "
              f"{a.backend}: {ratio:.1f}x")
        print(json.dumps({"bench": "ttft-prefix", "backend": a.backend, "model": a.model, "median_ratio": ratio, "trials": rows}))
        if any(r["hit_cached_tokens"] == 0 for r in rows):
            print("warning: a hit reported no cached tokens (is the prefix cache off?)", file=sys.stderr)


if __name__ == "__main__":
    main()
