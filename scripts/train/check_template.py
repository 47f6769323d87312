"""Checks that chat_template.jinja renders identically in Python jinja2 (transformers) and in
@huggingface/jinja (the engine's renderer, run through bun). Run from the repository root:
    python3 scripts/train/check_template.py [-v]
(The suite's test/unit/chat/template.test.ts checks the committed template against Python goldens too.)"""

import json
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from chat import example_conversations, render  # noqa: E402
from tools import sample_conversation  # noqa: E402


def main():
    cases = example_conversations()
    rng = random.Random(1)
    for _ in range(8):
        conv = sample_conversation(rng)
        cases.append({"messages": conv["messages"], "tools": conv["tools"]})
    python_out = [
        render(c["messages"], c.get("tools"), c.get("add_generation_prompt", False), c.get("enable_thinking"))
        for c in cases
    ]
    bun = Path("node_modules/.bin/bun")
    js = subprocess.run(
        [str(bun), "scripts/train/render_template.ts"], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    js_out = json.loads(js.stdout)
    bad = [i for i, (a, b) in enumerate(zip(python_out, js_out)) if a != b]
    for i in bad:
        print(f"case {i} differs\n--- python\n{python_out[i]!r}\n--- js\n{js_out[i]!r}")
    print(f"{len(cases) - len(bad)}/{len(cases)} cases identical")
    if "-v" in sys.argv:
        for out in python_out[:6]:
            print("=" * 60)
            print(out)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
