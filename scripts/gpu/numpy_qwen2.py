"""A float64 numpy forward of a Qwen2 HF folder with a PEFT LoRA adapter merged in: the logits
reference of the fidelity check where transformers is not installed (the CPU smoke run), written
from the Qwen2 equations as HF's modeling_qwen2.py computes them (RMSNorm, q/k/v with bias, RoPE
on halves, GQA, causal softmax attention, SwiGLU, tied or untied head). Also the plain
safetensors reader both paths use (header length, JSON header, raw little-endian data).
"""

import json
import os
import struct

import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(data[base + start : base + end], dtype=DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def forward_logits(model_dir, adapter_dir, ids):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    w = {k: v.astype(np.float64) for k, v in read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    if adapter_dir:
        with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
            ac = json.load(f)
        scaling = ac["lora_alpha"] / (ac["r"] ** 0.5 if ac.get("use_rslora") else ac["r"])
        ad = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
        for name, a in ad.items():
            if ".lora_A." not in name:
                continue
            b = ad[name.replace(".lora_A.", ".lora_B.")]
            target = name.replace("base_model.model.", "", 1).replace(".lora_A.weight", ".weight")
            w[target] = w[target] + scaling * (b.astype(np.float64) @ a.astype(np.float64))

    H, nh = c["hidden_size"], c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or nh
    d = c.get("head_dim") or H // nh
    eps, theta = c.get("rms_norm_eps", 1e-6), c.get("rope_theta", 10000.0)
    B, T = ids.shape
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, -1)
    sin = np.concatenate([np.sin(ang)] * 2, -1)

    def rope(x):  # [B, heads, T, d]
        half = d // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    def linear(x, p, bias=False):
        y = x @ w[p + ".weight"].T
        return y + w[p + ".bias"] if bias and p + ".bias" in w else y

    mask = np.triu(np.full((T, T), -np.inf), 1)
    x = w["model.embed_tokens.weight"][ids]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, p + "self_attn.q_proj", True).reshape(B, T, nh, d).transpose(0, 2, 1, 3)
        k = linear(h, p + "self_attn.k_proj", True).reshape(B, T, kv, d).transpose(0, 2, 1, 3)
        v = linear(h, p + "self_attn.v_proj", True).reshape(B, T, kv, d).transpose(0, 2, 1, 3)
        q, k = rope(q), rope(k)
        k = np.repeat(k, nh // kv, axis=1)
        v = np.repeat(v, nh // kv, axis=1)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, nh * d)
        x = x + linear(a, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = linear(h, p + "mlp.gate_proj")
        x = x + linear(g / (1 + np.exp(-g)) * linear(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T
