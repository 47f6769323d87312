"""Builds splash-tiny end to end in one run: corpus → tokenizer → target + MTP → DFlash drafter →
evaluation → HF reload check and golden logits → files.

    PYTHONUNBUFFERED=1 python3 scripts/train/train.py --out /tmp/splash-tiny-run      # the H200 run
    python3 scripts/train/train.py --tiny --out /tmp/tiny                             # CPU smoke test
    python3 scripts/train/train.py --out /tmp/run --resume . --resume-drafter         # more drafter training
    python3 scripts/train/train.py --out /tmp/run --resume . --drafter dflash2        # a DFlash2 drafter

Every phase is seeded; the training phases run for a wall-clock budget (their step counts are logged
and can be replayed with --target-steps / --dflash-steps). The run writes into --out:
    models/splash-tiny/...                 the model files (see models/splash-tiny/README.md)
    test/fixtures/models/splash-tiny-golden/   golden logits for the engine's parity test
    scripts/train/run/{train.log, metrics.json, corpus.json}
With --drafter dflash2 only a DFlash2 drafter is made, for the --resume output's target and starting from its DFlash
drafter (modeling.init_from_dflash): models/splash-tiny/dflash2/ and scripts/train/run/dflash2/{train.log,
metrics.json}, with τ of MTP, DFlash and DFlash2 on the same held-out prompts; nothing else is rewritten.
And, with --pack DIR, a tar of that tree split into ≤15 MiB parts (the device returns ≤16 MiB files)."""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import chat  # noqa: E402
import corpus  # noqa: E402
import evaluate  # noqa: E402
import modeling  # noqa: E402
import tokenizer as tk  # noqa: E402
import tools  # noqa: E402
import verify  # noqa: E402
import card  # noqa: E402

T0 = time.time()
LOG = []


def log(msg):
    line = f"[{time.time() - T0:7.1f}s] {msg}"
    print(line, flush=True)
    LOG.append(line)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True, help="staging root (the repo layout is recreated under it)")
    p.add_argument("--pack", help="write the tree as ≤15 MiB tar parts into this folder")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--tiny", action="store_true", help="minutes-long CPU smoke test settings")
    p.add_argument("--processes", type=int, default=os.cpu_count())
    p.add_argument("--max-corpus-bytes", type=int, default=120_000_000)
    p.add_argument("--variants", type=int, default=2, help="phrasings per function")
    p.add_argument("--val-percent", type=float, default=2.0)
    p.add_argument("--bpe-vocab", type=int, default=6080)
    p.add_argument("--tokenizer-bytes", type=int, default=24_000_000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--context", type=int, default=65536)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--mtp-weight", type=float, default=0.3)
    p.add_argument("--target-seconds", type=float, default=220)
    p.add_argument("--target-steps", type=int, help="fixed step count instead of the time budget")
    p.add_argument("--taps", default="1,3,5,7")
    p.add_argument("--block", type=int, default=8)
    p.add_argument("--draft-layers", type=int, default=3)
    p.add_argument("--draft-intermediate", type=int, default=1024)
    p.add_argument("--draft-lr", type=float, default=2e-3)
    p.add_argument("--draft-batch", type=int, default=32)
    p.add_argument("--draft-anchors", type=int, default=192)
    p.add_argument("--gen-seconds", type=float, default=25)
    p.add_argument("--gen-batch", type=int, default=1024)
    p.add_argument("--gen-tokens", type=int, default=256)
    p.add_argument("--dflash-seconds", type=float, default=90)
    p.add_argument("--dflash-steps", type=int)
    p.add_argument("--eval-code", type=int, default=96)
    p.add_argument("--eval-tools", type=int, default=96)
    p.add_argument("--eval-tau", type=int, default=32)
    p.add_argument("--eval-tokens", type=int, default=384)
    p.add_argument("--deadline", type=float, default=440, help="seconds: the target budget shrinks to fit")
    p.add_argument("--eval-reserve", type=float, default=60, help="seconds kept for evaluation, checks, files")
    p.add_argument("--autocast-cpu", action="store_true", help="bf16 autocast on CPU too (to test the GPU path)")
    p.add_argument("--resume", help="a previous --out: reuse its tokenizer and target, train the drafter again")
    p.add_argument("--resume-drafter", action="store_true",
                   help="with --resume: continue that output's drafter (same shape as the --taps/--block/--draft-* "
                        "arguments describe) instead of a new one, with a fresh warm-up and cosine schedule")
    p.add_argument("--draft-warmup", type=int, default=50)
    p.add_argument("--drafter", choices=["dflash", "dflash2"], default="dflash",
                   help="dflash2: make only a DFlash2 drafter for the --resume output (see the module docstring)")
    p.add_argument("--conv-kernel", type=int, default=2, help="DFlash2 convolution taps")
    p.add_argument("--conv-group", type=int, default=16, help="DFlash2 channels per dynamic coefficient")
    p.add_argument("--selector-rank", type=int, default=16, help="DFlash2 selector rank (hidden / 16, near the 27B drafter's 5120 / 256)")
    p.add_argument("--selector-top-k", type=int, default=16)
    a = p.parse_args()
    if a.resume_drafter and not a.resume:
        p.error("--resume-drafter needs --resume")
    if a.drafter == "dflash2" and not a.resume:
        p.error("--drafter dflash2 needs --resume (the target, and the DFlash drafter it starts from)")
    if a.tiny:
        a.max_corpus_bytes, a.tokenizer_bytes, a.bpe_vocab = 3_000_000, 2_000_000, 1200
        a.hidden, a.intermediate, a.layers, a.context = 64, 128, 4, 65536
        a.seq_len, a.batch, a.target_seconds = 128, 8, 40
        a.taps, a.draft_layers, a.draft_intermediate, a.draft_batch, a.draft_anchors = "0,1,2", 1, 128, 4, 8
        a.gen_seconds, a.gen_batch, a.gen_tokens, a.dflash_seconds = 5, 8, 24, 20
        a.eval_code, a.eval_tools, a.eval_tau, a.eval_tokens = 4, 4, 2, 24
        a.deadline, a.eval_reserve, a.draft_warmup = 10_000, 0, 3
        a.val_percent = 10.0
    return a


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------------------------- data


def _tool_texts(args):
    seed, start, n = args
    out = []
    for i in range(start, start + n):
        conv = tools.sample_conversation(random.Random(f"{seed}/{i}"))
        out.append(chat.render(conv["messages"], conv["tools"]))
    return out


def tool_texts(seed, n, processes):
    step = max(1, n // (processes * 4))
    jobs = [(seed, s, min(step, n - s)) for s in range(0, n, step)]
    with Pool(processes) as pool:
        return [t for part in pool.map(_tool_texts, jobs) for t in part]


def prompt_of(text):
    """The prompt of a rendered training conversation: everything up to its first assistant answer."""
    head = text.split(chat.EMPTY_THINK)[0]
    return head + chat.EMPTY_THINK


def build_data(a, out_root):
    packages = corpus.list_packages()
    allowed = [p for p in packages if p["allowed"]]
    log(f"packages: {len(packages)} installed, {len(allowed)} with a permissive license")
    files, stats = corpus.collect_files(packages, a.max_corpus_bytes, a.seed, a.val_percent)
    log(f"files: {len(files)} after dedup ({sum(len(f['text']) for f in files) / 1e6:.1f} MB), "
        f"{sum(f['split'] == 'val' for f in files)} held out")
    samples = corpus.build_samples(files, a.seed, a.variants, a.processes)
    for split in samples:
        log(f"{split}: " + ", ".join(f"{k} {len(v)} texts" for k, v in samples[split].items()))
    n_code = len(samples["train"]["code"])
    samples["train"]["tool"] = tool_texts(f"{a.seed}/train", max(8, n_code // 5), a.processes)
    samples["val"]["tool"] = tool_texts(f"{a.seed}/val", max(4, len(samples["val"]["code"]) // 5), a.processes)
    eval_code = corpus.eval_functions(files, a.eval_code, a.seed)
    eval_tools = [tools.sample_conversation(random.Random(f"{a.seed}/eval/{i}"), with_answer=False)
                  for i in range(a.eval_tools)]
    unseen, n_files = corpus.unseen_conversations(packages, files, a.seed, a.val_percent, 5 * a.gen_batch,
                                                  a.processes)
    draft_prompts = [chat.render(m, t, True, False) for m, t in unseen]
    log(f"drafter prompts: {len(draft_prompts)} functions the target never saw, from {n_files} further files")
    manifest = {
        "packages": [
            {"name": p["name"], "version": p["version"], "license": p["license"], "used": p["allowed"],
             "files": stats[p["name"]]["files"], "bytes": stats[p["name"]]["bytes"]}
            for p in packages
        ],
        "files": len(files),
        "heldout_files": sum(f["split"] == "val" for f in files),
        "texts": {s: {k: len(v) for k, v in samples[s].items()} for s in samples},
        "drafter_prompts": {"unseen_functions": len(draft_prompts), "files_read": n_files},
    }
    (out_root / "scripts/train/run/corpus.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return samples, eval_code, eval_tools, draft_prompts, manifest


def encode_all(tok, texts):
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)] if texts else []


def encode_chats(tok, texts, split_share, seed):
    """Chat texts to ids. For `split_share` of them the prompt (ending in "<think>\n") and the rest are
    encoded separately, as they are at inference with thinking enabled (the prompt then ends in a lone
    "\n" token instead of the "\n\n" the whole text would give)."""
    rng = random.Random(seed)
    marker = "<think>\n"
    heads, tails, plain = [], [], []
    for i, t in enumerate(texts):
        cut = t.find(marker + "\n</think>")
        if cut >= 0 and rng.random() < split_share:
            heads.append((i, t[:cut + len(marker)]))
            tails.append(t[cut + len(marker):])
        else:
            plain.append((i, t))
    out = [None] * len(texts)
    for (i, _), ids in zip(plain, encode_all(tok, [t for _, t in plain])):
        out[i] = ids
    for (i, _), h, tl in zip(heads, encode_all(tok, [h for _, h in heads]), encode_all(tok, tails)):
        out[i] = h + tl
    return out


def encode_until(tok, texts, budget, batch=2000):
    """Encodes texts in order until they hold `budget` tokens."""
    out, used = [], 0
    for start in range(0, len(texts), batch):
        for ids in encode_all(tok, texts[start:start + batch]):
            if used >= budget:
                return out
            out.append(ids)
            used += len(ids)
    return out


def stream_of(docs, seed):
    docs = list(docs)
    random.Random(seed).shuffle(docs)
    return np.concatenate([np.asarray(d, dtype=np.int32) for d in docs]) if docs else np.zeros(0, np.int32)


def chunk(stream, length):
    n = len(stream) // (length + 1)
    return torch.from_numpy(stream[: n * (length + 1)].reshape(n, length + 1).astype(np.int64))


# --------------------------------------------------------------------------------------------- target


def bench_layers(model, a, device, out_metrics):
    """Forward+backward time of one GDN layer and one gated-attention layer at the training shape
    (transformers' torch path: no flash-linear-attention or causal-conv1d kernels on the machine)."""
    layers = model.model.language_model.layers
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    x = torch.randn(a.batch, a.seq_len, a.hidden, device=device, requires_grad=True)
    pos = torch.arange(a.seq_len, device=device)[None].expand(a.batch, -1)
    rope = modeling.text_rope(model, x, pos)
    res = {}
    for name, idx in (("gdn", model.config.text_config.layer_types.index("linear_attention")),
                      ("attention", model.config.text_config.layer_types.index("full_attention"))):
        for i in range(7):
            if i == 2:
                sync()
                t = time.time()
            with torch.autocast(device.type, dtype=torch.bfloat16):
                y = layers[idx](x, position_embeddings=rope, attention_mask=None)
            y.float().sum().backward()
        sync()
        res[f"{name}_layer_fwd_bwd_ms"] = round((time.time() - t) / 5 * 1000, 2)
    model.zero_grad(set_to_none=True)
    out_metrics["layer_bench"] = {"batch": a.batch, "seq_len": a.seq_len, **res}
    log(f"layer bench (fwd+bwd, {a.batch}x{a.seq_len}): {res}")


def schedule_length(step, t_start, mark, seconds, device):
    """(total steps that fit `seconds`, (time, seconds per step)) from the rate since the last mark."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    now = time.time()
    per_step = (now - t_start) / step if mark is None else (now - mark[0]) / (step - mark[2])
    total = step + max(1, int((seconds - (now - t_start)) / per_step))
    return total, (now, per_step, step)


def train_target(a, model, mtp, train_chunks, device, out_metrics):
    params = [p for n, p in model.named_parameters() if not n.startswith("model.visual.")] + list(mtp.parameters())
    named = [(n, p) for n, p in model.named_parameters() if not n.startswith("model.visual.")]
    named += [("mtp." + n, p) for n, p in mtp.named_parameters()]
    decay = [p for n, p in named if p.ndim >= 2 and "embed_tokens" not in n]
    no_decay = [p for n, p in named if not (p.ndim >= 2 and "embed_tokens" not in n)]
    assert len(decay) + len(no_decay) == len(params)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")
    text = model.model.language_model
    gen = torch.Generator().manual_seed(a.seed)
    order, cursor, epoch = torch.randperm(len(train_chunks), generator=gen), 0, 0
    train_chunks = train_chunks.to(device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda" or a.autocast_cpu)
    bench_layers(model, a, device, out_metrics)
    warmup = 100 if not a.tiny else 5
    total = a.target_steps or 10**9
    step, t_start, tokens, history, mark = 0, time.time(), 0, [], None
    model.train()
    mtp.train()
    while step < total:
        if cursor + a.batch > len(order):
            order, cursor, epoch = torch.randperm(len(train_chunks), generator=gen), 0, epoch + 1
        x = train_chunks[order[cursor:cursor + a.batch].to(device)]
        cursor += a.batch
        lr = modeling.cosine_lr(step, total, warmup, a.lr, a.lr * 0.1)
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast:
            inp = x[:, :-1]
            h = text(input_ids=inp, use_cache=False).last_hidden_state
            logits = model.lm_head(h)
            loss_main = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            pos = torch.arange(inp.shape[1] - 1, device=device)[None].expand(inp.shape[0], -1)
            m = mtp(text.embed_tokens(inp[:, 1:]), h[:, :-1], modeling.text_rope(model, h, pos))
            mlog = model.lm_head(m)
            loss_mtp = F.cross_entropy(mlog.float().view(-1, mlog.shape[-1]), x[:, 2:].reshape(-1))
            loss = loss_main + a.mtp_weight * loss_mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        tokens += inp.numel()
        if step in (30, 150) and not a.target_steps:
            # size the schedule from the measured step time so the cosine ends with the budget; measured
            # again once warm-up effects are gone (the first steps are slower)
            total, mark = schedule_length(step, t_start, mark, a.target_seconds, device)
            log(f"target: {mark[1] * 1000:.0f} ms/step, {inp.numel() / mark[1] / 1e3:.0f}K tok/s → {total} steps")
        if step % 100 == 0 or step == total or step in (1, 10):
            rec = {"step": step, "loss": round(loss_main.item(), 4), "mtp_loss": round(loss_mtp.item(), 4),
                   "grad_norm": round(gnorm.item(), 3), "lr": lr, "epoch": epoch, "tokens": tokens,
                   "seconds": round(time.time() - t_start, 1)}
            history.append(rec)
            log(f"target step {step}/{total} loss {rec['loss']} mtp {rec['mtp_loss']} gnorm {rec['grad_norm']} "
                f"lr {lr:.2e} epoch {epoch}")
    if device.type == "cuda":
        torch.cuda.synchronize()
    out_metrics["target_training"] = {
        "steps": step, "tokens": tokens, "seconds": round(time.time() - t_start, 1), "batch": a.batch,
        "seq_len": a.seq_len, "lr": a.lr, "warmup": warmup, "epochs_started": epoch + 1,
        "final_loss": history[-1]["loss"], "final_mtp_loss": history[-1]["mtp_loss"], "history": history,
    }
    model.eval()
    mtp.eval()


# -------------------------------------------------------------------------------------------- drafter


def generate_drafter_data(a, model, prompts, device, eos, pad):
    """Greedy answers of the target to training prompts, for as long as the budget allows."""
    t_start, seqs = time.time(), []
    for start in range(0, len(prompts), a.gen_batch):
        if time.time() - t_start > a.gen_seconds:
            break
        batch = prompts[start:start + a.gen_batch]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            outs = evaluate.generate(model, batch, a.gen_tokens, eos, pad, len(batch), device)
        for p, o in zip(batch, outs):
            if len(o) > 1:
                seqs.append((p + o, len(p)))
    log(f"drafter data: {len(seqs)} generated answers, {sum(len(s) - p for s, p in seqs)} tokens "
        f"in {time.time() - t_start:.1f}s")
    return seqs


def drafter_batches(a, gen_seqs, train_chunks, gen):
    """Endless batches (ids [B,L], lo [B], hi [B], valid [B]): anchors are drawn in [lo, hi]; positions
    ≥ valid are padding. Three quarters of the rows are the target's own answers (anchors inside the
    answer), the rest corpus chunks (anchors anywhere)."""
    L = a.seq_len
    n_gen = a.draft_batch * 3 // 4 if gen_seqs else 0
    while True:
        ids = torch.zeros(a.draft_batch, L, dtype=torch.long)
        lo = torch.ones(a.draft_batch, dtype=torch.long)
        valid = torch.full((a.draft_batch,), L, dtype=torch.long)
        for r in range(a.draft_batch):
            if r < n_gen:
                seq, plen = gen_seqs[torch.randint(len(gen_seqs), (1,), generator=gen).item()]
                ids[r, :len(seq)] = torch.tensor(seq)
                lo[r], valid[r] = plen, len(seq)
            else:
                ids[r] = train_chunks[torch.randint(len(train_chunks), (1,), generator=gen).item()][:L]
        hi = torch.maximum(valid - a.block, lo)
        yield ids, lo, hi, valid


def train_drafter(a, model, drafter, taps, gen_seqs, train_chunks, device, mask_id, out_metrics):
    selector = isinstance(drafter, modeling.Drafter2)
    opt = torch.optim.AdamW(drafter.parameters(), lr=a.draft_lr, betas=(0.9, 0.95), weight_decay=0.01,
                            fused=device.type == "cuda")
    gen = torch.Generator().manual_seed(a.seed + 1)
    batches = drafter_batches(a, gen_seqs, train_chunks, gen)
    embed = model.model.language_model.embed_tokens
    B, nb = a.block, a.draft_anchors
    weights = torch.exp(-torch.arange(B - 1, dtype=torch.float32, device=device) / 4.0)  # γ = 4 for block 8
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda" or a.autocast_cpu)
    total = a.dflash_steps or 10**9
    warmup = a.draft_warmup
    step, t_start, history, mark = 0, time.time(), [], None
    drafter.train()
    while step < total:
        ids, lo, hi, valid = (t.to(device) for t in next(batches))
        bsz, L = ids.shape
        u = torch.rand(bsz, nb, generator=None, device=device)
        anchors = lo[:, None] + (u * (hi - lo + 1)[:, None]).long().clamp(max=(hi - lo)[:, None])
        lr = modeling.cosine_lr(step, total, warmup, a.draft_lr, a.draft_lr * 0.1)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.no_grad(), autocast:
            h = model.model.language_model(input_ids=ids, use_cache=False).last_hidden_state
            ctx = taps.concat()
            offs = torch.arange(B - 1, device=device)
            lab_pos = anchors[:, :, None] + offs  # logits at a+j-1 predict position a+j, j = 1..B-1
            hsel = torch.gather(h, 1, lab_pos.reshape(bsz, -1, 1).expand(-1, -1, h.shape[-1]))
            labels = model.lm_head(hsel).argmax(-1).view(bsz, nb, B - 1)
            block_ids = torch.full((bsz, nb, B), mask_id, dtype=torch.long, device=device)
            block_ids[:, :, 0] = torch.gather(ids, 1, anchors)
            block_emb = embed(block_ids.view(bsz, -1))
        block_pos = (anchors[:, :, None] + torch.arange(B, device=device)).view(bsz, -1)
        mask = modeling.block_mask(anchors, B, L)
        ctx_pos = torch.arange(L, device=device)[None].expand(bsz, -1)
        with autocast:
            out = drafter(block_emb, block_pos, ctx.detach(), ctx_pos, mask)
            rows = out.view(bsz, nb, B, -1)[:, :, 1:]
            logits = model.lm_head(rows).float()
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
            ok = (lab_pos + 1 < valid[:, None, None]).float()  # the labelled position a+j exists
            w = ok * weights
            loss = (ce.view(bsz, nb, B - 1) * w).sum() / w.sum().clamp(min=1.0)
            if selector:
                # the walk taught with the target's tokens as each row's predecessor (what an accepted prefix
                # gives it), over the row's top-k: rows whose label is not a candidate cannot be chosen
                unary, cand = torch.topk(logits.detach(), drafter.top_k, dim=-1)
                prev = torch.cat([block_ids[:, :, :1], labels[:, :, :-1]], dim=-1)
                sel = drafter.scores(rows.float(), unary, cand, prev)
                hit = cand == labels[..., None]
                sw = w * hit.any(-1)
                sel_ce = F.cross_entropy(sel.reshape(-1, sel.shape[-1]), hit.float().argmax(-1).reshape(-1), reduction="none")
                loss = loss + (sel_ce.view(bsz, nb, B - 1) * sw).sum() / sw.sum().clamp(min=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        if step in (20, 100) and not a.dflash_steps:
            total, mark = schedule_length(step, t_start, mark, a.dflash_seconds, device)
            log(f"drafter: {mark[1] * 1000:.0f} ms/step → {total} steps")
        if step % 100 == 0 or step == total or step in (1, 10):
            with torch.no_grad():
                pick = cand.gather(-1, sel.argmax(-1, keepdim=True))[..., 0] if selector else logits.argmax(-1)
                hit = (pick == labels).float() * ok
                acc = (hit.sum(dim=(0, 1)) / ok.sum(dim=(0, 1)).clamp(min=1.0)).tolist()
            rec = {"step": step, "loss": round(loss.item(), 4), "row_accuracy": [round(v, 3) for v in acc]}
            history.append(rec)
            log(f"drafter step {step}/{total} loss {rec['loss']} row acc {rec['row_accuracy']}")
    out_metrics["dflash_training"] = {
        "steps": step, "seconds": round(time.time() - t_start, 1), "batch": a.draft_batch, "anchors_per_row": nb,
        "lr": a.draft_lr, "warmup": warmup, "loss_decay_gamma": 4.0, "generated_sequences": len(gen_seqs),
        "generated_tokens": sum(len(s) - p for s, p in gen_seqs), "history": history,
    }
    drafter.eval()


# ----------------------------------------------------------------------------------------------- main


def prepare_tokens(a, samples, out_metrics, model_dir):
    """Tokenizer (trained, or reused with --resume), the packed training chunks and held-out chunks."""
    if a.resume:
        shutil.copy(Path(a.resume) / "models/splash-tiny/tokenizer.json", model_dir / "tokenizer.json")
        tok = tk.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        log("tokenizer: reused from --resume")
    else:
        sample = []
        pools = [samples["train"]["code"], samples["train"]["raw"], samples["train"]["tool"]]
        for share, texts in zip((0.5, 0.4, 0.1), pools):
            used = 0
            for t in texts:
                if used > share * a.tokenizer_bytes:
                    break
                sample.append(t)
                used += len(t)
        tok = tk.train_tokenizer(sample, a.bpe_vocab)
        log(f"tokenizer: {tok.get_vocab_size()} tokens trained on {sum(map(len, sample)) / 1e6:.1f} MB")
    tk.save_tokenizer(tok, model_dir, a.context)
    shutil.copy(chat.TEMPLATE_PATH, model_dir / "chat_template.jinja")

    encoded = {}
    for split in ("train", "val"):
        enc = {k: encode_chats(tok, samples[split][k], 0.3, f"{a.seed}/{split}/{k}") for k in ("code", "tool")}
        code_tokens = sum(map(len, enc["code"]))
        tool_cum = np.cumsum([len(d) for d in enc["tool"]])
        enc["tool"] = enc["tool"][: int(np.searchsorted(tool_cum, 0.3 * code_tokens)) + 1]
        enc["raw"] = encode_until(tok, samples[split]["raw"], 0.45 * code_tokens)
        encoded[split] = enc
    picked = {k: int(sum(map(len, v))) for k, v in encoded["train"].items()}
    train_stream = stream_of([d for k in ("code", "raw", "tool") for d in encoded["train"][k]], a.seed)
    train_chunks = chunk(train_stream, a.seq_len)
    val_chunks = {k: chunk(stream_of(encoded["val"][k], a.seed), a.seq_len)[:64] for k in ("code", "raw", "tool")}
    sample_texts = samples["train"]["code"][:2000]
    total_bytes = sum(len(t.encode()) for t in sample_texts)
    total_toks = sum(len(d) for d in encode_all(tok, sample_texts))
    out_metrics["data"] = {
        "train_tokens_by_kind": picked, "train_tokens": int(len(train_stream)), "train_chunks": len(train_chunks),
        "val_chunks": {k: len(v) for k, v in val_chunks.items()},
        "bytes_per_token_code": total_bytes / max(1, total_toks),
        "vocab_size": (tok.get_vocab_size() + 63) // 64 * 64, "tokenizer_size": tok.get_vocab_size(),
        "thinking_split_share": 0.3,
    }
    log(f"data: {len(train_stream) / 1e6:.1f}M train tokens {picked}, {len(train_chunks)} chunks of {a.seq_len}")
    return tok, train_chunks, val_chunks


def main():
    a = parse_args()
    seed_all(a.seed)
    out_root = Path(a.out)
    model_dir = out_root / "models/splash-tiny"
    golden_dir = out_root / "test/fixtures/models/splash-tiny-golden"
    run_dir = out_root / "scripts/train/run" / ("dflash2" if a.drafter == "dflash2" else "")
    for d in (model_dir / a.drafter, golden_dir, run_dir):
        d.mkdir(parents=True, exist_ok=True)
    import tokenizers
    import transformers
    metrics = {"args": vars(a), "torch": torch.__version__, "python": sys.version.split()[0],
               "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    try:
        # corpus and tokens first: the worker pools fork before CUDA starts
        samples, eval_code, eval_tools, draft_prompts, manifest = build_data(a, out_root)
        tok, train_chunks, val_chunks = prepare_tokens(a, samples, metrics, model_dir)
        metrics["data"]["eval_prompts"] = {"code": len(eval_code), "tools": len(eval_tools)}
        ids = tk.token_ids(tok)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        metrics["device"] = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
        log(f"device {metrics['device']}, torch {torch.__version__}, transformers {transformers.__version__}")

        # target + MTP
        size = {"hidden": a.hidden, "intermediate": a.intermediate, "layers": a.layers, "context": a.context}
        config = modeling.target_config(metrics["data"]["vocab_size"], ids, size)
        seed_all(a.seed)
        model, mtp = modeling.new_target(config)
        model.to(device)
        mtp.to(device)
        if a.resume:
            verify.load_target(model, mtp, Path(a.resume) / "models/splash-tiny")
            old = json.loads((Path(a.resume) / "scripts/train/run/metrics.json").read_text())
            metrics["target_training"] = old.get("target_training", {"resumed_from": a.resume})
            # what the resumed output's own run did and measured, for the card's before/after
            metrics["previous_run"] = {k: old[k] for k in ("total_seconds", "dflash_training") if k in old}
            if "eval" in old:
                metrics["previous_run"]["tau"] = old["eval"]["tau"]
            log("target: loaded from --resume")
        else:
            log(f"target: {modeling.count(modeling.target_state(model, mtp)) / 1e6:.2f}M params "
                f"(MTP {modeling.count(mtp) / 1e6:.2f}M)")
            later = a.gen_seconds + a.dflash_seconds + a.eval_reserve
            budget = min(a.target_seconds, a.deadline - (time.time() - T0) - later)
            if budget < a.target_seconds:
                log(f"target: budget cut to {budget:.0f}s to keep the run inside {a.deadline:.0f}s")
            a.target_seconds = max(budget, 30.0)
            train_target(a, model, mtp, train_chunks, device, metrics)
        # what ships is bf16: round the weights so everything after this sees the shipped model
        with torch.no_grad():
            for p in list(model.parameters()) + list(mtp.parameters()):
                p.copy_(p.to(torch.bfloat16).float())
        if a.drafter == "dflash":
            log(f"target written: {write_target(model, mtp, config, model_dir, ids)}")
            if a.pack:
                (run_dir / "train.log").write_text("\n".join(LOG) + "\n")
                pack(out_root, Path(a.pack), "partial")

        # DFlash (or DFlash2) drafter
        taps_ids = [int(t) for t in a.taps.split(",")]
        dcfg = modeling.drafter_config(model.config.text_config, taps_ids, a.block, ids["<|MASK|>"],
                                       a.draft_layers, a.draft_intermediate)
        seed_all(a.seed + 2)
        resumed = Path(a.resume or ".") / "models/splash-tiny"
        if a.drafter == "dflash2":
            v1_cfg = dcfg
            dcfg = modeling.drafter2_config(dcfg, a.conv_kernel, a.conv_group, a.selector_rank, a.selector_top_k)
            drafter = modeling.Drafter2(dcfg).to(device)
            if a.resume_drafter:
                modeling.load_drafter2(drafter, resumed / "dflash2")
                log("drafter: continuing the DFlash2 one from --resume")
            else:
                modeling.init_from_dflash(drafter, resumed / "dflash")
                log("drafter: DFlash2 started from --resume's DFlash drafter (identity convolutions, zero selector term)")
        else:
            drafter = modeling.Drafter(dcfg).to(device)
            if a.resume_drafter:
                modeling.load_drafter(drafter, resumed / "dflash")
                log("drafter: continuing the one from --resume")
        taps = modeling.Taps(model, taps_ids)
        eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
        # the target's answers to coding requests it never saw (topped up with training requests when the
        # corpus left no files over) and to tool requests
        top_up = samples["train"]["code"][: max(0, 5 * a.gen_batch - len(draft_prompts))]
        gen_prompts = draft_prompts + [prompt_of(t) for t in top_up]
        tool_prompts = [prompt_of(t) for t in samples["train"]["tool"][: a.gen_batch]]
        pool = {"unseen_code": len(draft_prompts), "training_code": len(top_up), "tool": len(tool_prompts)}
        gen_prompts += tool_prompts
        random.Random(a.seed).shuffle(gen_prompts)
        gen_prompt_ids = [p for p in encode_all(tok, gen_prompts) if len(p) <= a.seq_len - a.gen_tokens]
        gen_seqs = generate_drafter_data(a, model, gen_prompt_ids, device, eos, ids["<|endoftext|>"])
        log(f"drafter: {modeling.count(drafter) / 1e6:.2f}M params, taps {taps_ids}, block {a.block}")
        budget = a.deadline - (time.time() - T0) - a.eval_reserve
        if budget < a.dflash_seconds and not a.dflash_steps:
            log(f"drafter: budget cut to {budget:.0f}s to keep the run inside {a.deadline:.0f}s")
            a.dflash_seconds = max(budget, 20.0)
        train_drafter(a, model, drafter, taps, gen_seqs, train_chunks, device, ids["<|MASK|>"], metrics)
        metrics["dflash_training"]["prompt_pool"] = pool
        with torch.no_grad():
            for p in drafter.parameters():
                p.copy_(p.to(torch.bfloat16).float())
        (model_dir / a.drafter / "config.json").write_text(json.dumps(dcfg, indent=2) + "\n")
        if a.drafter == "dflash2":
            modeling.save_sharded(drafter.checkpoint_state(), model_dir / "dflash2")
            dflash = modeling.Drafter(v1_cfg).to(device)
            modeling.load_drafter(dflash, resumed / "dflash")
            dflash.eval()
            metrics["eval"] = {"tau": run_tau(a, model, mtp, {"dflash": dflash, "dflash2": drafter}, taps, tok, ids, eval_code, device)}
            metrics["total_seconds"] = round(time.time() - T0, 1)
            metrics["params"] = {"dflash2": modeling.count(drafter)}
            return
        modeling.save_sharded(drafter.state_dict(), model_dir / "dflash")

        # evaluation, then the transformers reload check and golden logits (fp32 on the bf16 weights)
        metrics["eval"] = run_eval(a, model, mtp, drafter, taps, tok, ids, val_chunks, eval_code, eval_tools, device)
        metrics["verify"] = verify.check_and_golden(model_dir, golden_dir, model, mtp, drafter, tok, device, log)

        metrics["sizes"] = {str(p.relative_to(out_root)): p.stat().st_size for p in sorted(out_root.rglob("*"))
                            if p.is_file() and "run" not in p.relative_to(out_root).parts}
        metrics["total_seconds"] = round(time.time() - T0, 1)
        metrics["params"] = {"target_text": modeling.count(modeling.target_state(model, mtp)) - modeling.count(mtp),
                             "mtp": modeling.count(mtp), "dflash": modeling.count(drafter)}
        card.write_spec(model_dir, config, ids, metrics)
        card.write_card(model_dir, config, dcfg, metrics, manifest)
        print_table(metrics)
    finally:
        (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, default=str) + "\n")
        (run_dir / "train.log").write_text("\n".join(LOG) + "\n")
        if a.pack:
            pack(out_root, Path(a.pack), "final")


def write_target(model, mtp, config, model_dir, ids):
    config.dtype = "bfloat16"
    config.text_config.dtype = "bfloat16"
    config.save_pretrained(model_dir)
    gen_cfg = {"bos_token_id": None, "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
               "pad_token_id": ids["<|endoftext|>"], "do_sample": True, "temperature": 0.7, "top_p": 0.8,
               "top_k": 20}
    (model_dir / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2) + "\n")
    for old in model_dir.glob("model*.safetensors*"):
        old.unlink()
    return modeling.save_sharded(modeling.target_state(model, mtp), model_dir)


def run_eval(a, model, mtp, drafter, taps, tok, ids, val_chunks, eval_code, eval_tools, device):
    res = {}
    t = time.time()
    losses = {k: evaluate.heldout_loss(model, v.to(device), 16) for k, v in val_chunks.items() if len(v)}
    res["heldout_loss"] = losses
    log(f"held-out loss (nats/token): {losses}")
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    pad = ids["<|endoftext|>"]
    for mode, thinking in (("no_think", False), ("think", None)):
        prompts = [tok.encode(chat.render(c["messages"], None, True, thinking), add_special_tokens=False).ids
                   for c in eval_code]
        outs = evaluate.generate(model, prompts, a.eval_tokens, eos, pad, 128, device)
        answers = [evaluate.answer_part(tok.decode(o, skip_special_tokens=False)) for o in outs]
        checks = [evaluate.parses(x) for x in answers]
        res[f"code_{mode}"] = {"n": len(answers), "parse_rate": evaluate.mean([c[0] for c in checks]),
                               "defines_function_rate": evaluate.mean([c[1] for c in checks]),
                               "mean_answer_tokens": evaluate.mean([len(o) for o in outs]),
                               "samples": [{"prompt": c["messages"][-1]["content"], "answer": x}
                                           for c, x in list(zip(eval_code, answers))[:3]]}
        log(f"code ({mode}): parse rate {res[f'code_{mode}']['parse_rate']:.3f} over {len(answers)}")
    prompts = [tok.encode(chat.render(c["messages"], c["tools"], True, False), add_special_tokens=False).ids
               for c in eval_tools]
    outs = evaluate.generate(model, prompts, 160, eos, pad, 128, device)
    answers = [evaluate.answer_part(tok.decode(o, skip_special_tokens=False)) for o in outs]
    checks = [evaluate.tool_call_ok(x, c["tools"], c["expected"]) for x, c in zip(answers, eval_tools)]
    res["tools"] = {"n": len(answers), "well_formed_rate": evaluate.mean([c[0] for c in checks]),
                    "right_function_rate": evaluate.mean([c[1] for c in checks]),
                    "samples": [{"prompt": c["messages"][-1]["content"], "answer": x}
                                for c, x in list(zip(eval_tools, answers))[:3]]}
    log(f"tools: well-formed {res['tools']['well_formed_rate']:.3f}, right function {res['tools']['right_function_rate']:.3f}")
    res["tau"] = run_tau(a, model, mtp, {"dflash": drafter}, taps, tok, ids, eval_code, device)
    demo = [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number"}]
    out = evaluate.generate(model, [tok.encode(chat.render(demo, None, True, False)).ids], 200, eos, pad, 1, device)[0]
    res["demo"] = {"prompt": demo[0]["content"], "answer": evaluate.answer_part(tok.decode(out, skip_special_tokens=False))}
    log("demo answer:\n" + res["demo"]["answer"])
    res["seconds"] = round(time.time() - t, 1)
    return res


def run_tau(a, model, mtp, drafters, taps, tok, ids, eval_code, device):
    """Acceptance lengths on held-out coding prompts (thinking off), greedy continuations of ≤ eval_tokens: MTP
    with 3 chained drafts and each of `drafters` (name -> DFlash or DFlash2 drafter) with one block."""
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    pad = ids["<|endoftext|>"]
    tau_prompts = [tok.encode(chat.render(c["messages"], None, True, False), add_special_tokens=False).ids
                   for c in eval_code[: a.eval_tau]]
    conts = evaluate.generate(model, tau_prompts, min(a.eval_tokens, 256), eos, pad, 128, device)
    lengths = {"mtp": [], **{name: [] for name in drafters}}
    for p, c in zip(tau_prompts, conts):
        seq = torch.tensor(p + c, device=device)
        lengths["mtp"] += evaluate.tau_mtp(model, mtp, seq, len(p), 3)
        for name, d in drafters.items():
            lengths[name] += evaluate.tau_dflash(model, d, seq, len(p), a.block, ids["<|MASK|>"], taps)
    res = {"prompts": len(tau_prompts), "generated_tokens": sum(map(len, conts)), "mtp_k3": evaluate.mean(lengths["mtp"]),
           "mtp_cycles": len(lengths["mtp"]), "mtp_histogram": [lengths["mtp"].count(i) for i in range(1, 5)]}
    for name in drafters:
        res[f"{name}_block{a.block}"] = evaluate.mean(lengths[name])
        res[f"{name}_cycles"] = len(lengths[name])
        res[f"{name}_histogram"] = [lengths[name].count(i) for i in range(1, a.block + 1)]
    log("tau: MTP k=3 " + f"{res['mtp_k3']:.2f}" + "".join(f", {n} block {a.block} {res[f'{n}_block{a.block}']:.2f}" for n in drafters))
    return res


def print_table(m):
    e = m["eval"]
    rows = [
        ("held-out loss code/raw/tool", " / ".join(f"{v:.3f}" for v in e["heldout_loss"].values())),
        ("parse rate (thinking off)", f"{e['code_no_think']['parse_rate']:.3f} (n={e['code_no_think']['n']})"),
        ("parse rate (thinking on)", f"{e['code_think']['parse_rate']:.3f}"),
        ("tool calls well-formed", f"{e['tools']['well_formed_rate']:.3f} (n={e['tools']['n']})"),
        ("tau MTP k=3", f"{e['tau']['mtp_k3']:.2f} ({e['tau']['mtp_cycles']} cycles)"),
        ("tau DFlash block 8", f"{e['tau']['dflash_block8']:.2f} ({e['tau']['dflash_cycles']} cycles)"),
        ("target steps / tokens", f"{m['target_training'].get('steps')} / {m['target_training'].get('tokens')}"),
        ("total seconds", f"{m['total_seconds']}"),
    ]
    width = max(len(r[0]) for r in rows)
    log("\n" + "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows))


def pack(out_root, dest, label):
    """The whole output tree as one tar split into ≤15 MiB parts in `dest` (replacing earlier parts)."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("splash-tiny-*.tar.part*"):
        old.unlink()
    tar = dest / f"splash-tiny-{label}.tar"
    subprocess.run(["tar", "-cf", str(tar), "-C", str(out_root), "."], check=True)
    subprocess.run(["split", "-b", "15M", "-d", str(tar), f"{tar}.part"], check=True)
    tar.unlink()
    log(f"packed into {sorted(p.name for p in dest.glob('splash-tiny-*.tar.part*'))}")


if __name__ == "__main__":
    main()
