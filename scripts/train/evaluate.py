"""Evaluation in PyTorch, greedy: held-out loss, parse rate of coding answers, well-formed tool calls, and
the mean acceptance length τ of the MTP head (k chained drafts) and of a DFlash or DFlash2 drafter (one block;
DFlash2 drafts its selector's greedy walk).

τ is measured exactly for greedy verification without running a verifier: the target's greedy
continuation G of a prompt is computed once; a cycle starting at anchor position s drafts tokens, accepts
the longest prefix equal to G[s+1:], and moves to s + accepted + 1 (the bonus token is G's next token).
τ = mean over cycles of (accepted + 1), counting the bonus, as in speculative-decoding.md §2.1."""

import ast
import math

import torch
import torch.nn.functional as F

from modeling import Drafter2, text_rope
from tools import parse_tool_calls


@torch.no_grad()
def heldout_loss(model, chunks, batch):
    """Mean next-token cross-entropy (nats) over [N, L+1] token chunks."""
    total, n = 0.0, 0
    for i in range(0, len(chunks), batch):
        x = chunks[i:i + batch]
        h = model.model.language_model(input_ids=x[:, :-1], use_cache=False).last_hidden_state
        logits = model.lm_head(h).float()
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        n += x[:, 1:].numel()
    return total / max(1, n)


@torch.no_grad()
def generate(model, prompts, max_new, eos_ids, pad_id, batch, device):
    """Greedy continuations (token lists, cut after the first eos) of token-list prompts, batched with
    left padding (exact for this architecture: padded GDN inputs are zeroed, attention masks them)."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out = [None] * len(prompts)
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        width = max(len(prompts[i]) for i in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(idx):
            ids[row, width - len(prompts[i]):] = torch.tensor(prompts[i])
            mask[row, width - len(prompts[i]):] = 1
        gen = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new,
                             do_sample=False, eos_token_id=list(eos_ids), pad_token_id=pad_id)
        for row, i in enumerate(idx):
            toks = gen[row, width:].tolist()
            for j, t in enumerate(toks):
                if t in eos_ids:
                    toks = toks[:j + 1]
                    break
            out[i] = toks
    return out


def answer_part(text):
    """The visible answer of an assistant turn: after </think>, without the end marker."""
    text = text.split("</think>")[-1]
    return text.split("<|im_end|>")[0].strip()


def extract_code(answer):
    if "```" in answer:
        body = answer.split("```", 1)[1]
        if body.startswith("python"):
            body = body[len("python"):]
        return body.split("```", 1)[0].strip("\n")
    return answer


def parses(answer):
    code = extract_code(answer)
    if not code.strip():
        return False, False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False, False
    return True, any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(tree))


def tool_call_ok(answer, tools, expected):
    calls = parse_tool_calls(answer, tools)
    return calls is not None, calls is not None and all(name == expected for name, _ in calls)


@torch.no_grad()
def tau_dflash(model, drafter, seq, prompt_len, block, mask_id, taps):
    """Acceptance lengths of DFlash (or DFlash2) cycles along the greedy sequence `seq` (1-D LongTensor on device)."""
    x = seq[None]
    model.model.language_model(input_ids=x, use_cache=False)
    ctx_all = taps.concat()
    embed = model.model.language_model.embed_tokens
    n = seq.shape[0]
    s, lengths = prompt_len, []
    while s < n - 1:
        ids = torch.full((1, block), mask_id, dtype=torch.long, device=seq.device)
        ids[0, 0] = seq[s]
        pos = torch.arange(s, s + block, device=seq.device)[None]
        h = drafter(embed(ids), pos, ctx_all[:, :s], torch.arange(s, device=seq.device)[None], None)
        logits = model.lm_head(h[:, 1:])[0]
        draft = drafter.walk(h[0, 1:], logits, seq[s]) if isinstance(drafter, Drafter2) else logits.argmax(-1)
        avail = min(block - 1, n - 1 - s)
        match = (draft[:avail] == seq[s + 1:s + 1 + avail]).long()
        acc = int(match.cumprod(0).sum().item())
        lengths.append(acc + 1)
        s += acc + 1
    return lengths


@torch.no_grad()
def tau_mtp(model, mtp, seq, prompt_len, k):
    """Acceptance lengths of k-step chained MTP drafting along the greedy sequence `seq`."""
    x = seq[None]
    h_all = model.model.language_model(input_ids=x, use_cache=False).last_hidden_state
    embed = model.model.language_model.embed_tokens
    e_all = embed(x)
    n = seq.shape[0]
    s, lengths = prompt_len, []
    while s < n - 1:
        next_e = e_all[:, 1:s + 1]   # embed(t_{i+1}) for i = 0..s-1
        hid = h_all[:, :s]           # normed target hidden at i
        drafts = []
        for j in range(k):
            pos = torch.arange(next_e.shape[1], device=seq.device)[None]
            m = mtp(next_e, hid, text_rope(model, hid, pos))
            d = model.lm_head(m[:, -1]).argmax(-1)
            drafts.append(d)
            next_e = torch.cat([next_e, embed(d)[:, None]], dim=1)
            hid = torch.cat([hid, m[:, -1:]], dim=1)
        draft = torch.cat(drafts)
        avail = min(k, n - 1 - s)
        match = (draft[:avail] == seq[s + 1:s + 1 + avail]).long()
        acc = int(match.cumprod(0).sum().item())
        lengths.append(acc + 1)
        s += acc + 1
    return lengths


def mean(xs):
    return sum(xs) / len(xs) if xs else math.nan
