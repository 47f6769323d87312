"""The training corpus: Python source of the installed, permissively licensed packages, turned into
chat samples, plus raw files and synthetic tool conversations.

- Packages come from importlib.metadata (name, version, license fields, file list from RECORD). A package
  is used only when its license fields name a permissive license and nothing copyleft, proprietary or
  unknown (`license_decision`); the decision for every package is recorded in the manifest.
- Files are deduplicated by content; the held-out split is by file (a hash of package/path), so no
  function of a held-out file is trained on.
- Each documented function of 4–50 lines (tests left out) becomes a conversation: the user gives a
  signature and docstring (several phrasings, including plain "Write a Python function that …"), the
  assistant answers with the function, its docstring cut to the summary, in a ```python block after an
  empty thinking block.
- A share of whole files goes in as repository text (`<|repo_name|>pkg\\n<|file_sep|>path\\ncode`).
- The drafter's requests come from files the corpus left out (`unseen_conversations`), so it learns the
  target's answers to requests the target has not seen, as in deployment."""

import ast
import hashlib
import importlib.metadata as md
import random
import re
import textwrap
from multiprocessing import Pool

from chat import render
from tools import TOOLS, tool_schema

PERMISSIVE = re.compile(
    r"\b(MIT|BSD|0BSD|Apache|ASL|PSF|Python Software Foundation|Python|ISC|Zlib|Unlicense|CC0|Public Domain|"
    r"HPND|BSL-1\.0|Boost|CNRI-Python|LLVM-exception|Permission is hereby granted|"
    r"Redistribution and use in source and binary forms)",
    re.I,
)
RESTRICTIVE = re.compile(r"\b(A?GPL|LGPL|GNU|MPL|Mozilla|EPL|Eclipse Public|CDDL|Proprietary|NVIDIA|Commons Clause|SSPL|BUSL)", re.I)

SYSTEM_PROMPTS = [
    "You are a helpful coding assistant.",
    "You are Splash, a local coding assistant. Answer with code.",
    "You write clean, correct Python.",
]


def license_decision(meta):
    """(license text recorded, allowed) from License-Expression, License and the classifiers."""
    parts = []
    if meta.get("License-Expression"):
        parts.append(meta["License-Expression"])
    lic = (meta.get("License") or "").strip()
    if lic and lic.upper() != "UNKNOWN":
        parts.append(lic if len(lic) < 300 else lic[:2000])
    parts += [c.split("::")[-1].strip() for c in (meta.get_all("Classifier") or []) if c.startswith("License ::")]
    text = " | ".join(parts)
    summary = " | ".join(p if len(p) < 120 else p[:117] + "..." for p in parts) or "none given"
    allowed = bool(PERMISSIVE.search(text)) and not RESTRICTIVE.search(text)
    return summary, allowed


def list_packages():
    """All installed distributions with their license decision and Python files (absolute path, relpath)."""
    seen, packages = set(), []
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if not name or name.lower() in seen:
            continue
        seen.add(name.lower())
        license_text, allowed = license_decision(dist.metadata)
        files = []
        for f in dist.files or []:
            if f.suffix == ".py" and "__pycache__" not in f.parts:
                files.append((str(dist.locate_file(f)), str(f)))
        packages.append({"name": name, "version": dist.version, "license": license_text, "allowed": allowed, "files": files})
    packages.sort(key=lambda p: p["name"].lower())
    return packages


def collect_files(packages, max_bytes, seed, val_percent):
    """Reads, filters and deduplicates the allowed packages' files; returns (files, per-package stats).
    A file is {package, path, text, split}."""
    rng = random.Random(seed)
    candidates = [(p["name"], a, r) for p in packages if p["allowed"] for a, r in p["files"]]
    rng.shuffle(candidates)
    hashes, files, total = set(), [], 0
    stats = {p["name"]: {"files": 0, "bytes": 0} for p in packages}
    for package, path, rel in candidates:
        if total >= max_bytes:
            break
        text = read_source(path)
        if text is None:
            continue
        digest = hashlib.sha1(text.encode()).hexdigest()
        if digest in hashes:
            continue
        hashes.add(digest)
        split = "val" if held_out(package, rel, val_percent) else "train"
        files.append({"package": package, "path": rel, "text": text, "split": split})
        size = len(text.encode())
        stats[package]["files"] += 1
        stats[package]["bytes"] += size
        total += size
    return files, stats


def read_source(path):
    """A file's text, or None when it is unreadable, not UTF-8, too small or large, or looks generated."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(300_001)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not (200 <= len(raw) <= 300_000) or "\x00" in text:
        return None
    lines = text.count("\n") + 1
    if len(text) / lines > 120:  # generated or minified
        return None
    return text


def held_out(package, rel, val_percent):
    """The held-out split is by file: a hash of package/path, the same on every machine."""
    return int(hashlib.sha1(f"{package}/{rel}".encode()).hexdigest(), 16) % 1000 < val_percent * 10


IMPERATIVE = re.compile(r"^([A-Z][a-z]+)\b")


def third_person(summary):
    """'Return the n-th number.' -> 'returns the n-th number' (None when it does not start with a verb)."""
    m = IMPERATIVE.match(summary)
    if not m:
        return None
    word = m.group(1)
    lw = word.lower()
    if lw in {"the", "a", "an", "this", "if", "when", "for", "in", "helper", "internal", "private", "utility"}:
        return None
    if lw.endswith("s") and not lw.endswith("ss"):
        verb = lw
    elif lw.endswith(("sh", "ch", "x", "z", "ss", "o")):
        verb = lw + "es"
    elif lw.endswith("y") and lw[-2:-1] not in "aeiou":
        verb = lw[:-1] + "ies"
    else:
        verb = lw + "s"
    rest = summary[len(word):].rstrip(". ")
    return verb + rest


def _definitions(body):
    """Functions and methods at module and class level (nested functions stay part of their parent)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _definitions(node.body)


def short_docstring(source, first, last, summary):
    """`source` with its docstring (lines first..last, 0-based, of the dedented function) cut to the
    one-paragraph summary, or None when that cannot be done safely."""
    lines = source.splitlines()
    opening, closing = lines[first].lstrip(), lines[last].rstrip()
    quotes = opening[:3]
    if first == 0 or quotes not in ('"' * 3, "'" * 3) or not closing.endswith(quotes):
        return None
    if '"' * 3 in summary or "\\" in summary or summary.endswith('"'):
        return None
    indent = lines[first][: len(lines[first]) - len(opening)]
    short = "\n".join(lines[:first] + [indent + '"' * 3 + summary + '"' * 3] + lines[last + 1:])
    try:
        ast.parse(short)
    except SyntaxError:
        return None
    return short


def is_test(path, name):
    parts = path.replace("\\", "/").split("/")
    return (name.startswith("test") or parts[-1].startswith("test_")
            or any(p in ("test", "tests", "testing") for p in parts[:-1]))


def functions_of(text, path=""):
    """Documented functions of a module (tests left out): dicts {name, source, answer, stub, summary}.
    `source` is the function as written (dedented); `answer` the same with the docstring cut to its
    summary, which keeps answers short (long docstring sections are where a tiny model starts looping)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines()
    out = []
    for node in _definitions(tree.body):
        doc = ast.get_docstring(node)
        if not doc or len(doc) < 20 or len(node.body) < 2 or is_test(path, node.name):
            continue
        rest = node.body[1:]
        if len(rest) == 1 and isinstance(rest[0], (ast.Pass, ast.Raise)):
            continue
        start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        end = node.end_lineno
        if not 4 <= end - start <= 50:
            continue
        block = "\n".join(lines[start:end])
        if len(block) > 2400 or "\t" in block:
            continue
        source = textwrap.dedent(block)
        stub = "\n".join(source.splitlines()[: node.body[0].end_lineno - start])
        summary = " ".join(doc.split("\n\n")[0].split())
        if len(summary) > 240:
            summary = summary[:240].rsplit(" ", 1)[0] + " ..."
        doc_lines = (node.body[0].lineno - 1 - start, node.body[0].end_lineno - 1 - start)
        answer = short_docstring(source, *doc_lines, summary)
        out.append({"name": node.name, "source": source, "answer": answer or source, "stub": stub,
                    "summary": summary})
    return out


def code_prompt(fn, rng):
    """A user request for `fn`, in one of several phrasings."""
    header = fn["stub"].split('"""')[0].split("'''")[0].strip()
    natural = third_person(fn["summary"])
    choice = rng.randrange(5)
    if choice == 0 and natural:
        return f"Write a Python function that {natural}."
    if choice == 1 and natural:
        return f"Write a Python function `{fn['name']}` that {natural}."
    if choice == 2:
        return f"Implement this Python function:\n\n```python\n{fn['stub']}\n```"
    if choice == 3:
        return f"{fn['summary']}\n\nWrite it in Python with this signature:\n\n```python\n{header}\n```"
    return f"Complete the following function.\n\n```python\n{fn['stub']}\n```"


def code_conversation(fn, rng, tools_share=0.1, system_share=0.15):
    """messages, tools for one function sample (sometimes with a system prompt or an unused tool list)."""
    messages = []
    tools = None
    if rng.random() < tools_share:
        tools = [tool_schema(t) for t in rng.sample(TOOLS, rng.randint(1, 4))]
    if rng.random() < system_share:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    messages.append({"role": "user", "content": code_prompt(fn, rng)})
    return messages, tools


def answer_text(fn):
    return f"```python\n{fn['answer']}\n```"


def _file_samples(args):
    """Worker: the samples of one file -> (split, [(kind, text, key)]). Each function is asked for in
    `variants` phrasings (all of them share the function's key)."""
    file, seed, variants = args
    rng = random.Random(f"{seed}/{file['package']}/{file['path']}")
    samples = []
    for fn in functions_of(file["text"], file["path"]):
        key = hashlib.sha1(fn["source"].encode()).hexdigest()
        for _ in range(variants):
            messages, tools = code_conversation(fn, rng)
            messages.append({"role": "assistant", "content": answer_text(fn), "reasoning_content": ""})
            samples.append(("code", render(messages, tools), key))
    doc = f"<|repo_name|>{file['package']}\n<|file_sep|>{file['path']}\n{file['text']}<|endoftext|>"
    samples.append(("raw", doc, None))
    return file["split"], samples


def eval_functions(files, n, seed):
    """Held-out coding prompts: documented functions from held-out files (deterministic)."""
    rng = random.Random(seed)
    fns = []
    for f in files:
        if f["split"] == "val":
            fns += functions_of(f["text"], f["path"])
    rng.shuffle(fns)
    seen, out = set(), []
    for fn in fns:
        if fn["source"] in seen:
            continue
        seen.add(fn["source"])
        messages, _ = code_conversation(fn, rng, tools_share=0.0, system_share=0.0)
        out.append({"messages": messages, "reference": fn["source"]})
        if len(out) == n:
            break
    return out


def _unseen_functions(candidate):
    _package, path, rel = candidate
    text = read_source(path)
    return [] if text is None else functions_of(text, rel)


def unseen_conversations(packages, files, seed, val_percent, n, processes):
    """Coding requests the target never trained on, for the drafter's data (the paper's recipe: the
    target's own answers to new prompts): documented functions of the allowed packages' files that the
    corpus left out (past --max-corpus-bytes), never from a held-out file nor equal to a function of one.
    Deterministic; at most n (messages, tools) pairs, and how many files were read."""
    used = {(f["package"], f["path"]) for f in files}
    held = {fn["source"] for f in files if f["split"] == "val" for fn in functions_of(f["text"], f["path"])}
    candidates = sorted((p["name"], a, r) for p in packages if p["allowed"] for a, r in p["files"]
                        if (p["name"], r) not in used and not held_out(p["name"], r, val_percent))
    rng = random.Random(f"{seed}/unseen")
    rng.shuffle(candidates)
    out, seen, n_files = [], set(), 0
    with Pool(processes) as pool:
        for fns in pool.imap(_unseen_functions, candidates, chunksize=8):
            n_files += 1
            for fn in fns:
                if fn["source"] in held or fn["source"] in seen:
                    continue
                seen.add(fn["source"])
                out.append(code_conversation(fn, rng))
            if len(out) >= n:
                break
    return out[:n], n_files


def build_samples(files, seed, variants, processes):
    """Rendered training/validation texts by kind ("code": lists of phrasings per function, "raw": whole
    files). A function is kept once (the copy whose texts sort first, so the result does not depend on
    worker order) and dropped from training when a held-out file has it too."""
    raw = {"train": [], "val": []}
    code = {"train": {}, "val": {}}
    with Pool(processes) as pool:
        jobs = [(f, seed, variants) for f in files]
        for split, samples in pool.imap_unordered(_file_samples, jobs, chunksize=8):
            by_key = {}
            for kind, text, key in samples:
                if kind == "raw":
                    raw[split].append(text)
                else:
                    by_key.setdefault(key, []).append(text)
            for key, texts in by_key.items():
                if key not in code[split] or texts < code[split][key]:
                    code[split][key] = texts
    for key in code["val"]:
        code["train"].pop(key, None)
    out = {}
    for split in ("train", "val"):
        rng = random.Random(f"{seed}/{split}")
        texts = [t for key in sorted(code[split]) for t in code[split][key]]
        out[split] = {"code": texts, "raw": sorted(raw[split])}
        for texts in out[split].values():
            rng.shuffle(texts)
    return out
