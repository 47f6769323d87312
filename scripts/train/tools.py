"""Synthetic tool-calling conversations in the Qwen3.5 XML format, and the checker that decides whether
a generated assistant turn is a well-formed call.

A conversation: system with a few tools (the target tool among them), a user request, an assistant turn
with an empty thinking block and one or two <tool_call> blocks, the tool results (grouped into one user
turn by the template), and a final answer that uses the results."""

import json
import random
import re

WORDS = (
    "cache parser token config server client request handler buffer stream worker queue index model "
    "schema router session logger metrics batch tensor vector matrix graph layer kernel thread socket"
).split()
DIRS = ["src", "lib", "app", "tests", "scripts", "docs", "core", "utils", "api", "cli"]
EXTS = [".py", ".ts", ".md", ".json", ".toml", ".c", ".h", ".rs", ".go", ".yaml"]
CITIES = ["Paris", "Tokyo", "Berlin", "Lagos", "Lima", "Oslo", "Cairo", "Seoul", "Denver", "Madrid", "Hanoi", "Quito"]
COMMANDS = [
    "ls -la", "git status", "pytest -q", "npm test", "make", "cargo build", "python3 main.py", "git log --oneline -5",
    "du -sh .", "wc -l *.py", "git diff --stat", "bun test", "go test ./...", "uname -a", "df -h",
]
LANGS = ["python", "typescript", "rust", "go", "c"]


def _word(rng):
    return rng.choice(WORDS)


def _path(rng):
    depth = rng.randint(0, 2)
    parts = [rng.choice(DIRS) for _ in range(depth)] + [_word(rng) + rng.choice(["", "_" + _word(rng)]) + rng.choice(EXTS)]
    return "/".join(parts)


def _arith(expression):
    a, op, b = expression.split()
    return {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]


def _ident(rng):
    return rng.choice([_word(rng), f"{_word(rng)}_{_word(rng)}", f"{_word(rng).capitalize()}{_word(rng).capitalize()}"])


# name, description, {param: (type, description, value generator)}, required, user phrasings, result, answer
TOOLS = [
    ("read_file", "Read the contents of a file in the workspace.",
     {"path": ("string", "Path of the file, relative to the workspace root.", _path)}, ["path"],
     ["Show me {path}", "What is in {path}?", "Open {path} and tell me what it does.", "Read the file {path}.",
      "Can you look at {path}?", "Print the contents of {path}"],
     lambda a, rng: f"# {a['path']}\n" + "\n".join(f"line {i}: {_word(rng)}" for i in range(1, rng.randint(3, 6))),
     lambda a, r: f"`{a['path']}` has {r.count(chr(10))} lines; it mostly deals with {r.split()[-1]}."),
    ("write_file", "Create or overwrite a file with the given content.",
     {"path": ("string", "Path of the file to write.", _path),
      "content": ("string", "The full new content of the file.", lambda rng: f"{_word(rng)} = {rng.randint(0, 99)}\n")},
     ["path", "content"],
     ["Write {content!r} into {path}", "Create {path} containing {content!r}", "Save {content!r} to the file {path}."],
     lambda a, rng: json.dumps({"ok": True, "bytes": len(a["content"])}),
     lambda a, r: f"Wrote {json.loads(r)['bytes']} bytes to `{a['path']}`."),
    ("list_directory", "List the files and folders in a directory.",
     {"path": ("string", "Directory to list.", lambda rng: rng.choice(DIRS + ["."]))}, ["path"],
     ["List the files in {path}", "What files are in the {path} folder?", "ls {path}", "Show the directory {path}."],
     lambda a, rng: "\n".join(sorted({_word(rng) + rng.choice(EXTS) for _ in range(rng.randint(2, 5))})),
     lambda a, r: f"`{a['path']}` contains {len(r.splitlines())} entries: " + ", ".join(r.splitlines()) + "."),
    ("run_command", "Run a shell command in the workspace and return its output.",
     {"command": ("string", "The shell command to run.", lambda rng: rng.choice(COMMANDS)),
      "timeout": ("integer", "Seconds before the command is stopped.", lambda rng: rng.choice([10, 30, 60, 120]))},
     ["command"],
     ["Run `{command}`", "Please execute {command}", "Can you run {command} for me?", "Run {command} and tell me the result."],
     lambda a, rng: f"exit code {rng.choice([0, 0, 0, 1])}\n{_word(rng)} {_word(rng)}",
     lambda a, r: f"`{a['command']}` finished with {r.splitlines()[0]}."),
    ("search_code", "Search the codebase for a text pattern.",
     {"pattern": ("string", "Text or regular expression to find.", _ident),
      "path": ("string", "Folder to search in.", lambda rng: rng.choice(DIRS))},
     ["pattern"],
     ["Find where {pattern} is used", "Search the code for {pattern}", "Where is {pattern} defined?", "grep for {pattern} in {path}"],
     lambda a, rng: "\n".join(f"{_path(rng)}:{rng.randint(1, 400)}: {a['pattern']}" for _ in range(rng.randint(1, 3))),
     lambda a, r: f"`{a['pattern']}` appears {len(r.splitlines())} time(s), first in {r.split(':')[0]}."),
    ("get_weather", "Get the current weather for a city.",
     {"city": ("string", "Name of the city.", lambda rng: rng.choice(CITIES)),
      "unit": ("string", "celsius or fahrenheit.", lambda rng: rng.choice(["celsius", "fahrenheit"]))},
     ["city"],
     ["What's the weather in {city}?", "How warm is it in {city} right now?", "Weather for {city} please", "Is it raining in {city}?"],
     lambda a, rng: json.dumps({"city": a["city"], "temperature": rng.randint(-5, 35), "sky": rng.choice(["clear", "rain", "cloudy"])}),
     lambda a, r: f"In {a['city']} it is {json.loads(r)['temperature']} degrees and {json.loads(r)['sky']}."),
    ("calculate", "Evaluate an arithmetic expression.",
     {"expression": ("string", "The expression, e.g. 2 * (3 + 4).",
                     lambda rng: f"{rng.randint(2, 999)} {rng.choice('+-*')} {rng.randint(2, 99)}")},
     ["expression"],
     ["What is {expression}?", "Compute {expression}", "Calculate {expression} for me."],
     lambda a, rng: str(_arith(a["expression"])),
     lambda a, r: f"{a['expression']} = {r}."),
    ("git_commit", "Commit the staged changes with a message.",
     {"message": ("string", "The commit message.", lambda rng: f"{rng.choice(['Fix', 'Add', 'Update', 'Remove'])} {_word(rng)} {_word(rng)}")},
     ["message"],
     ["Commit with the message '{message}'", "Make a commit: {message}", "git commit -m \"{message}\""],
     lambda a, rng: f"[main {rng.randrange(16**7):07x}] {a['message']}",
     lambda a, r: f"Committed as {r.split()[1].rstrip(']')}."),
    ("http_get", "Fetch a URL and return the response body.",
     {"url": ("string", "The URL to fetch.", lambda rng: f"https://{_word(rng)}.example.com/{_word(rng)}")},
     ["url"],
     ["Fetch {url}", "Download {url} and summarize it", "What does {url} return?"],
     lambda a, rng: json.dumps({"status": 200, "title": f"{_word(rng)} {_word(rng)}"}),
     lambda a, r: f"{a['url']} answered 200 with the title \"{json.loads(r)['title']}\"."),
    ("create_issue", "Open an issue in the project tracker.",
     {"title": ("string", "Issue title.", lambda rng: f"{_word(rng).capitalize()} {_word(rng)} fails"),
      "priority": ("integer", "1 (highest) to 4.", lambda rng: rng.randint(1, 4))},
     ["title"],
     ["Open an issue titled '{title}'", "File a bug: {title}", "Create an issue \"{title}\" with priority {priority}"],
     lambda a, rng: json.dumps({"id": rng.randint(10, 999)}),
     lambda a, r: f"Opened issue #{json.loads(r)['id']}: {a['title']}."),
    ("run_tests", "Run the project's tests, optionally only those matching a filter.",
     {"filter": ("string", "Only run tests whose name contains this.", _ident)},
     [],
     ["Run the tests for {filter}", "Run the test suite", "Do the {filter} tests pass?"],
     lambda a, rng: f"{rng.randint(1, 60)} passed, {rng.choice([0, 0, 1, 2])} failed",
     lambda a, r: f"Test run: {r}."),
    ("translate", "Translate text into another language.",
     {"text": ("string", "Text to translate.", lambda rng: f"the {_word(rng)} is ready"),
      "language": ("string", "Target language.", lambda rng: rng.choice(["French", "German", "Spanish", "Japanese"]))},
     ["text", "language"],
     ["Translate '{text}' into {language}", "How do you say '{text}' in {language}?"],
     lambda a, rng: f"[{a['language']}] {a['text']}",
     lambda a, r: f"In {a['language']}: {r.split('] ', 1)[1]}."),
]
TOOL_BY_NAME = {t[0]: t for t in TOOLS}
SYSTEMS = [
    "",
    "You are a helpful assistant.",
    "You are a coding agent working in the user's repository. Use the tools when they help.",
    "You are Splash, a local coding assistant. Be concise.",
]
LEADS = ["", "", "", "Let me check.", "I'll do that.", "Sure."]


def tool_schema(tool):
    name, desc, params, required = tool[:4]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": t, "description": d} for p, (t, d, _) in params.items()},
                "required": list(required),
            },
        },
    }


def _arguments(tool, rng):
    """A request and its call: optional parameters are passed exactly when the request mentions them."""
    name, _, params, required, phrasings = tool[:5]
    phrasing = rng.choice(phrasings)
    values = {p: gen(rng) for p, (_, _, gen) in params.items()}
    args = {p: v for p, v in values.items() if p in required or "{" + p in phrasing}
    return phrasing.format(**values), values, args


def sample_conversation(rng, with_answer=True):
    """One synthetic tool conversation: {"messages", "tools", "expected": tool name}."""
    tool = rng.choice(TOOLS)
    others = [t for t in TOOLS if t is not tool]
    chosen = rng.sample(others, rng.randint(1, 5)) + [tool]
    rng.shuffle(chosen)
    tools = [tool_schema(t) for t in chosen]
    messages = []
    system = rng.choice(SYSTEMS)
    if system:
        messages.append({"role": "system", "content": system})
    if rng.random() < 0.2:  # an earlier exchange, so calls also follow history
        messages.append({"role": "user", "content": "Hello!"})
        messages.append({"role": "assistant", "content": "Hello! How can I help?"})
    n_calls = 2 if rng.random() < 0.15 else 1
    calls = [_arguments(tool, rng) for _ in range(n_calls)]
    request = calls[0][0]
    if n_calls == 2:
        second = calls[1][0]
        request = f"{request} Also, {second[0].lower()}{second[1:]}"
    messages.append({"role": "user", "content": request})
    if with_answer:
        messages.append({
            "role": "assistant",
            "content": rng.choice(LEADS),
            "reasoning_content": "",
            "tool_calls": [{"type": "function", "function": {"name": tool[0], "arguments": args}} for _, _, args in calls],
        })
        results = [tool[5](args, rng) for _, _, args in calls]
        for r in results:
            messages.append({"role": "tool", "content": r})
        answer = " ".join(tool[6](args, r) for (_, _, args), r in zip(calls, results))
        messages.append({"role": "assistant", "content": answer, "reasoning_content": ""})
    return {"messages": messages, "tools": tools, "expected": tool[0]}


CALL_RE = re.compile(r"<tool_call>\n<function=([^>\n]+)>\n(.*?)</function>\n</tool_call>", re.S)
PARAM_RE = re.compile(r"<parameter=([^>\n]+)>\n(.*?)\n</parameter>\n", re.S)


def parse_tool_calls(text, tools):
    """Returns [(name, {param: value})] when every <tool_call> in `text` is well formed (strict tag layout,
    a known function, known parameters, required ones present, integers parse), else None."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    blocks = text.count("<tool_call>")
    if blocks == 0 or blocks != text.count("</tool_call>"):
        return None
    calls = []
    for m in CALL_RE.finditer(text):
        name, body = m.group(1), m.group(2)
        if name not in schemas:
            return None
        params = {}
        pos = 0
        for p in PARAM_RE.finditer(body):
            if p.start() != pos:
                return None
            params[p.group(1)] = p.group(2)
            pos = p.end()
        if pos != len(body):
            return None
        props, required = schemas[name]["properties"], schemas[name].get("required", [])
        if any(k not in props for k in params) or any(k not in params for k in required):
            return None
        for k, v in params.items():
            if props[k].get("type") == "integer" and not re.fullmatch(r"-?\d+", v.strip()):
                return None
        calls.append((name, params))
    if len(calls) != blocks:
        return None
    return calls
