#!/usr/bin/env python3
"""The Python side of the GPU measurement (scripts/gpu/run.sh); each subcommand writes one JSON.

  probe-ort  --out F                      the Python onnxruntime: version, providers, libraries
  bench      --shapes F --shape N --out F PyTorch eager + HF transformers Qwen2 (+ PEFT LoRA):
                                          decode tokens/s and the LoRA train step, float32 and
                                          bfloat16, on CUDA (on the CPU where there is no GPU)
  fidelity   --folder D --out F           our logits and LoRA gradients (written by the Node side
                                          into D, see packages/trainer-cuda/bench/gpu/fidelity.ts)
                                          against transformers + PEFT at float32 and float64

Where torch / transformers / peft are missing (the CPU smoke run's machine), `bench` reports
itself skipped with the reason, and `fidelity` compares the logits against a float64 numpy
forward of the same folder (numpy_qwen2.py) and skips only the gradient check.
Timing follows /work/.library/device/METHOD.md: warm-up first, the device synchronised before
each clock read, the median of several runs, random inputs (never zeros).
"""

import argparse
import glob
import json
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def write(path, figures):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(figures, f, indent=2, default=float)
        f.write("\n")
    os.replace(tmp, path)


def missing(*modules):
    """The first of `modules` that does not import, with why; None when all do."""
    for m in modules:
        try:
            __import__(m)
        except Exception as e:  # noqa: BLE001 - any import failure means "not usable here"
            return f"{m} is not importable here ({type(e).__name__}: {e})"
    return None


# ---------------------------------------------------------------------------------------------
def probe_ort(out):
    why = missing("onnxruntime")
    if why:
        return write(out, {"ok": False, "skipped": why})
    import onnxruntime as ort

    pkg = os.path.dirname(ort.__file__)
    libs = sorted(glob.glob(os.path.join(pkg, "**", "*.so*"), recursive=True))
    write(
        out,
        {
            "ok": True,
            "version": ort.__version__,
            "device": ort.get_device(),
            "availableProviders": ort.get_available_providers(),
            "package": pkg,
            "sharedLibraries": libs,
            "providerLibraries": [p for p in libs if "providers" in os.path.basename(p)],
            "cudaProviderPresent": any(
                p.endswith("libonnxruntime_providers_cuda.so") for p in libs
            ),
        },
    )


# ---------------------------------------------------------------------------------------------
def bench(shapes_file, name, out):
    why = missing("torch", "transformers", "peft")
    if why:
        return write(out, {"ok": False, "skipped": why})
    import torch
    import transformers
    import peft
    from transformers import Qwen2Config, Qwen2ForCausalLM

    with open(shapes_file) as f:
        shape = json.load(f)[name]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    gen = torch.Generator(device="cpu").manual_seed(1234)
    V = shape["config"]["vocab_size"]

    def model_of(dtype):
        config = Qwen2Config(**{k: v for k, v in shape["config"].items() if k != "model_type"})
        with torch.device(device):
            m = Qwen2ForCausalLM(config).to(dtype)
        return m

    def peak_mib():
        return torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None

    def reset_peak():
        if device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    runs = []
    for dtype_name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        run = {"dtype": dtype_name}
        runs.append(run)
        try:
            reset_peak()
            model = model_of(dtype).eval()
            run["attnImplementation"] = model.config._attn_implementation
            d = shape["decode"]
            rows = []
            for B in d["batches"]:
                ids = torch.randint(0, V, (B, d["prompt"]), generator=gen).to(device)

                @torch.no_grad()
                def generate(n):
                    sync()
                    t0 = time.perf_counter()
                    out = model(input_ids=ids, use_cache=True)
                    past = out.past_key_values
                    tok = out.logits[:, -1].argmax(-1, keepdim=True)
                    for _ in range(n - 1):
                        out = model(input_ids=tok, past_key_values=past, use_cache=True)
                        past = out.past_key_values
                        tok = out.logits[:, -1].argmax(-1, keepdim=True)
                    sync()
                    return (time.perf_counter() - t0) * 1000

                generate(2)
                per = []
                for _ in range(d["repeats"]):
                    one = generate(1)
                    many = generate(d["newTokens"])
                    per.append((many - one) / (d["newTokens"] - 1))
                ms = statistics.median(per)
                rows.append(
                    {"batch": B, "msPerStep": ms, "tokensPerSecond": B * 1000 / ms, "msPerStepAll": per}
                )
            run["decode"] = rows
            run["decodePeakMiB"] = peak_mib()
            del model
            reset_peak()

            t = shape["train"]
            base = model_of(dtype)
            lora = peft.LoraConfig(
                r=t["lora"]["r"],
                lora_alpha=t["lora"]["alpha"],
                lora_dropout=0.0,
                bias="none",
                task_type="CAUSAL_LM",
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            )
            model = peft.get_peft_model(base, lora)
            model.train()
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
            ids = torch.randint(0, V, (t["batch"], t["seq"]), generator=gen).to(device)

            def step():
                sync()
                t0 = time.perf_counter()
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                sync()
                return (time.perf_counter() - t0) * 1000, float(loss)

            step()
            times = []
            loss = None
            for _ in range(t["steps"]):
                ms, loss = step()
                times.append(ms)
            ms = statistics.median(times)
            run["train"] = {
                "batch": t["batch"],
                "seq": t["seq"],
                "msPerStep": ms,
                "msPerStepAll": times,
                "tokensPerSecond": t["batch"] * t["seq"] * 1000 / ms,
                "loss": loss,
                "peakMiB": peak_mib(),
                "adapterDType": str(next(p for p in model.parameters() if p.requires_grad).dtype),
            }
            del model, base, opt
            reset_peak()
        except Exception as e:  # noqa: BLE001 - one dtype failing must not lose the other
            run["error"] = f"{type(e).__name__}: {e}"
            run["trace"] = traceback.format_exc()[-2000:]
    write(
        out,
        {
            "ok": any("error" not in r for r in runs),
            "shape": name,
            "device": device,
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "tf32Matmul": torch.backends.cuda.matmul.allow_tf32,
            "runs": runs,
        },
    )


# ---------------------------------------------------------------------------------------------
def compare(ours, ref):
    import numpy as np

    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        return {"error": f"shape {list(ours.shape)} vs reference {list(ref.shape)}"}
    diff = ours - ref
    return {
        "maxAbs": float(np.max(np.abs(diff))),
        "relNorm": float(np.linalg.norm(diff) / np.linalg.norm(ref)),
        "finite": bool(np.all(np.isfinite(ours))),
    }


def fidelity(folder, out):
    why = missing("numpy")
    if why:
        return write(out, {"ok": False, "skipped": why})
    import numpy as np
    from numpy_qwen2 import forward_logits, read_safetensors

    with open(os.path.join(folder, "batch.json")) as f:
        ids = np.array(json.load(f)["input_ids"], dtype=np.int64)
    ours = read_safetensors(os.path.join(folder, "ours.safetensors"))
    result = {"ok": True, "batch": list(ids.shape), "logits": {}}
    devices = [k.split(".", 1)[1] for k in ours if k.startswith("logits.")]

    torch_missing = missing("torch", "transformers", "peft")
    if torch_missing:
        result["reference"] = "numpy float64 forward (numpy_qwen2.py): " + torch_missing
        ref = forward_logits(os.path.join(folder, "model"), os.path.join(folder, "adapter"), ids)
        for dev in devices:
            result["logits"][f"{dev} vs numpy float64"] = compare(ours[f"logits.{dev}"], ref)
        result["grads"] = {"skipped": "needs torch + PEFT: " + torch_missing}
    else:
        import torch
        import transformers
        from peft import PeftModel

        result["reference"] = f"transformers {transformers.__version__} + PEFT, CPU, eager attention"
        path = os.path.join(folder, "model")
        try:  # transformers 5 names it dtype; 4.x torch_dtype
            model = transformers.AutoModelForCausalLM.from_pretrained(
                path, dtype=torch.float32, attn_implementation="eager"
            )
        except TypeError:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                path, torch_dtype=torch.float32, attn_implementation="eager"
            )
        model = PeftModel.from_pretrained(model, os.path.join(folder, "adapter"), is_trainable=True)
        tids = torch.from_numpy(ids)
        out32 = model(input_ids=tids, labels=tids)
        logits32 = out32.logits.detach().numpy().copy()
        out32.loss.backward()
        grads = {}
        for n, p in model.named_parameters():
            if p.requires_grad and p.grad is not None:
                grads[n.replace(".default", "")] = p.grad.detach().numpy().copy()
        loss32 = float(out32.loss)
        with torch.no_grad():
            logits64 = model.double()(input_ids=tids).logits.numpy()
        for dev in devices:
            result["logits"][f"{dev} vs transformers float32"] = compare(ours[f"logits.{dev}"], logits32)
            result["logits"][f"{dev} vs transformers float64"] = compare(ours[f"logits.{dev}"], logits64)
        result["logits"]["transformers float32 vs float64"] = compare(logits32, logits64)
        per = {}
        for name, g in grads.items():
            mine = ours.get(f"grad.{name}")
            per[name] = compare(mine, g) if mine is not None else {"error": "absent from ours"}
        rel = [v["relNorm"] for v in per.values() if "relNorm" in v]
        with open(os.path.join(folder, "ours.json")) as f:
            our_loss = json.load(f)["loss"]
        result["grads"] = {
            "tensors": len(per),
            "maxRelNorm": max(rel) if rel else None,
            "missing": [k for k, v in per.items() if "error" in v],
            "lossOurs": our_loss,
            "lossPeft": loss32,
            "perTensor": per,
        }
        if not rel or len(rel) != len(per):
            result["ok"] = False
            result["error"] = "gradients missing on one side"
    write(out, result)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["probe-ort", "bench", "fidelity"])
    p.add_argument("--out", required=True)
    p.add_argument("--shapes")
    p.add_argument("--shape")
    p.add_argument("--folder")
    a = p.parse_args()
    if a.command == "probe-ort":
        probe_ort(a.out)
    elif a.command == "bench":
        bench(a.shapes, a.shape, a.out)
    else:
        fidelity(a.folder, a.out)


if __name__ == "__main__":
    main()
