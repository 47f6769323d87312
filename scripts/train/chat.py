"""The chat format of splash-tiny: rendering through the same jinja2 environment transformers uses, so
training text is byte-identical to what `apply_chat_template` (and the engine's @huggingface/jinja,
checked by check_template.py) produces at inference."""

from pathlib import Path

from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATE_PATH = Path(__file__).with_name("chat_template.jinja")
TEMPLATE = TEMPLATE_PATH.read_text()

EMPTY_THINK = "<think>\n\n</think>\n\n"


def render(messages, tools=None, add_generation_prompt=False, enable_thinking=None):
    kwargs = {}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    out, _ = render_jinja_template(
        conversations=[messages],
        tools=tools,
        chat_template=TEMPLATE,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    return out[0]


def example_conversations():
    """Conversations that exercise every branch of the template (used to compare renderers)."""
    tool = {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file — returns its text.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
    call = {"type": "function", "function": {"name": "read_file", "arguments": {"path": "src/a.py", "limit": 20}}}
    return [
        {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True, "enable_thinking": False},
        {
            "messages": [
                {"role": "system", "content": "  Be brief.  "},
                {"role": "user", "content": "Write code"},
                {"role": "assistant", "content": "```python\npass\n```"},
                {"role": "user", "content": "Again"},
                {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nok", "reasoning_content": None},
            ],
        },
        {
            "messages": [
                {"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "Show src/a.py"},
                {"role": "assistant", "content": "", "tool_calls": [call, call]},
                {"role": "tool", "content": "print(1)"},
                {"role": "tool", "content": "print(2)"},
                {"role": "assistant", "content": "Done.", "reasoning_content": "  The file prints.  "},
            ],
            "tools": [tool],
            "add_generation_prompt": True,
        },
        {
            "messages": [
                {"role": "user", "content": "Read it"},
                {
                    "role": "assistant",
                    "content": "Reading.",
                    "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "x", "flags": ["a", 1], "deep": {"k": "v"}}}}],
                },
                {"role": "tool", "content": "data"},
            ],
            "tools": [tool],
            "add_generation_prompt": True,
            "enable_thinking": False,
        },
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in "},
                        {"type": "image", "image": "file://x.png"},
                        {"type": "text", "text": " and "},
                        {"type": "video", "video": "file://y.mp4"},
                    ],
                }
            ],
            "add_generation_prompt": True,
        },
    ]
