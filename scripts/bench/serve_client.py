"""A `splash serve` under test and its HTTP API, from the Python standard library alone (the H200 device machine
has Python but no Bun or Node): start the server, wait for /health, stream one chat completion timing its first
token, read /metrics. Used by ttft-prefix.py and draft-throughput.py."""
import json
import os
import random
import signal
import subprocess
import time
import urllib.error
import urllib.request


class Server:
    """`splash serve` started with `command` (e.g. "./splash" or "bun src/main.ts") and `args`, on
    127.0.0.1:port, or an already running one at `url` (then nothing is started)."""

    def __init__(self, command=None, args=(), port=8099, url=None, log=None, start_timeout=600):
        self.proc = None
        self.url = url or f"http://127.0.0.1:{port}"
        if url:
            with urllib.request.urlopen(self.url + "/health", timeout=30) as r:
                self.model = json.load(r)["models"][0]
            return
        cmd = command.split() + ["serve", "--port", str(port), *args]
        self.log = open(log, "ab") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{' '.join(cmd)} exited with {self.proc.returncode} (log: {log})")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        self.model = json.load(r)["models"][0]
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"{' '.join(cmd)} did not answer /health in {start_timeout} s (log: {log})")
            time.sleep(0.5)

    def close(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def metrics(self):
        """/metrics as {name{labels}: value}."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def chat(self, content, max_tokens, temperature=0.0, seed=None, timeout=3600):
        """Streams one chat completion. Returns the seconds to the first generated token (ttft) and to the end
        (total), the seconds between the first and the last token (decode), and the usage."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "reasoning_effort": "none",
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if seed is not None:
            body["seed"] = seed
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        t0 = time.monotonic()
        first = last = None
        usage = None
        try:
            r = urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"HTTP {e.code}: {e.read().decode()[:500]}") from None
        with r:
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices", []):
                    delta = choice.get("delta", {})
                    if delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"):
                        last = time.monotonic()
                        first = first or last
        end = time.monotonic()
        if usage is None:
            raise RuntimeError("the stream carried no usage chunk")
        return {"ttft": (first or end) - t0, "total": end - t0, "decode": (last - first) if first else 0.0,
                "usage": usage}


WORDS = ("river stone lantern quiet orbit maple signal harbor copper meadow window thunder garden pocket silver "
         "engine canvas marble violet anchor feather compass mirror shadow winter summer valley ladder candle "
         "puzzle rocket basket pepper falcon island jacket kettle lemon magnet needle oyster parrot quartz ribbon "
         "saddle tunnel umbrella velvet walnut yellow zipper").split()


def text(n_words, seed):
    """n_words of prose-like text from a seed: the same text for the same seed, a different one for another."""
    rng = random.Random(seed)
    out = []
    for i in range(n_words):
        out.append(rng.choice(WORDS))
        if i % 12 == 11:
            out[-1] += "."
    return " ".join(out)
