"""PyTorch eager LoRA train step at any vocabulary, batch and length, with the loss whole or chunked.

The model and the step are ../shared/anchors/torch/train_step.py's (a Qwen2-style decoder with
tied LM head, LoRA r=16, alpha=32 on q, k, v, o, gate, up, down; loss = mean next-token NLL;
forward + backward, no optimizer step), with the shape given on the command line, so that the
train-memory bench can run it at the real Qwen2.5 vocabulary. CHUNK = 0: the loss as
train_step.py computes it (F.cross_entropy over the whole [B·(T−1), V] logits). CHUNK > 0: the
LM head and the cross-entropy of CHUNK rows at a time, each chunk recomputed in the backward
(torch.utils.checkpoint), so that only one chunk's logits and their gradient exist at once: the
usual chunked loss in PyTorch (TRL's and Liger-Kernel's chunked losses take row chunks too).
CKPT = 1 (optional, default 0): each decoder layer under torch.utils.checkpoint as well, what HF's
`gradient_checkpointing` does: the backward recomputes a layer's activations from its input.

Usage:  python3 torch-train-step.py H L HEADS KV_HEADS I V B T THREADS STEPS CHUNK [CKPT]
Prints one line: ms_med=… tok_s=… loss=… (run with OMP_WAIT_POLICY=PASSIVE, as train_step.py).
"""
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def main():
    H, L, nh, nkv, I, V, B, T, threads, steps, chunk = (int(a) for a in sys.argv[1:12])
    ckpt = len(sys.argv) > 12 and sys.argv[12] == "1"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    hd = H // nh
    r, alpha = 16, 32
    scaling = alpha / r
    eps, theta = 1e-6, 1e6

    def w(*s):
        return torch.randn(*s) * 0.02

    lora_params = []

    def lora(o, i):
        A = ((torch.rand(r, i) * 2 - 1) / math.sqrt(i)).requires_grad_()
        Bm = (torch.randn(o, r) * 0.01).requires_grad_()
        lora_params.extend([A, Bm])
        return A, Bm

    emb = w(V, H)
    layers = [
        dict(
            ln1=torch.ones(H), ln2=torch.ones(H),
            q=w(nh * hd, H), qb=torch.zeros(nh * hd), k=w(nkv * hd, H), kb=torch.zeros(nkv * hd),
            v=w(nkv * hd, H), vb=torch.zeros(nkv * hd), o=w(H, nh * hd),
            g=w(I, H), u=w(I, H), d=w(H, I),
            lq=lora(nh * hd, H), lk=lora(nkv * hd, H), lv=lora(nkv * hd, H), lo=lora(H, nh * hd),
            lg=lora(I, H), lu=lora(I, H), ld=lora(H, I),
        )
        for _ in range(L)
    ]
    fnorm = torch.ones(H)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
    ang = torch.outer(torch.arange(T).float(), inv)
    cos, sin = ang.cos()[None, None], ang.sin()[None, None]
    causal = torch.full((T, T), float("-inf")).triu(1)

    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    def lin(x, W, b, ab):
        A, Bm = ab
        return F.linear(x, W, b) + F.linear(F.linear(x, A), Bm) * scaling

    def rope(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def chunk_nll(h, targets):
        return F.cross_entropy(F.linear(h, emb), targets, reduction="sum")

    def layer(x, p):
        g = nh // nkv
        h = rms(x, p["ln1"])
        q = lin(h, p["q"], p["qb"], p["lq"]).view(B, T, nh, hd).transpose(1, 2)
        k = lin(h, p["k"], p["kb"], p["lk"]).view(B, T, nkv, hd).transpose(1, 2)
        v = lin(h, p["v"], p["vb"], p["lv"]).view(B, T, nkv, hd).transpose(1, 2)
        q, k = rope(q), rope(k)
        qg = q.reshape(B, nkv, g * T, hd)
        s = (qg @ k.transpose(-1, -2)).view(B, nkv, g, T, T) / math.sqrt(hd) + causal
        pr = s.softmax(-1).view(B, nkv, g * T, T)
        a = (pr @ v).view(B, nh, T, hd).transpose(1, 2).reshape(B, T, H)
        x = x + lin(a, p["o"], None, p["lo"])
        h2 = rms(x, p["ln2"])
        mlp = F.silu(lin(h2, p["g"], None, p["lg"])) * lin(h2, p["u"], None, p["lu"])
        return x + lin(mlp, p["d"], None, p["ld"])

    def loss_of(ids):
        x = F.embedding(ids, emb)
        for p in layers:
            x = checkpoint(layer, x, p, use_reentrant=False) if ckpt else layer(x, p)
        h = rms(x, fnorm)[:, :-1].reshape(-1, H)
        targets = ids[:, 1:].reshape(-1)
        if chunk == 0:
            return F.cross_entropy(F.linear(h, emb), targets)
        total = sum(
            checkpoint(chunk_nll, h[i : i + chunk], targets[i : i + chunk], use_reentrant=False)
            for i in range(0, h.shape[0], chunk)
        )
        return total / h.shape[0]

    ids = torch.randint(0, V, (B, T))

    def step():
        for p in lora_params:
            p.grad = None
        loss = loss_of(ids)
        loss.backward()
        return loss.item()

    first_loss = step()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1000)
    med = statistics.median(ts)
    print(f"torch V={V} B={B} T={T} chunk={chunk} ckpt={int(ckpt)} threads={threads} ms_med={med:.2f} "
          f"tok_s={B * T / med * 1000:.1f} loss={first_loss:.4f}")


if __name__ == "__main__":
    main()
