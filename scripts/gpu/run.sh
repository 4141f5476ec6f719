#!/usr/bin/env bash
# The GPU measurement, from the bundle scripts/gpu/bundle.sh wrote (this file is copied into it):
#   run.sh OUTDIR                 on the GPU machine (no Node.js, no network): < 9 minutes
#   run.sh --cpu-smoke [OUTDIR]   the same steps on this machine's CPU at the tiny shape
# Writes OUTDIR/results.json (rewritten after every step), OUTDIR/log.txt (everything printed)
# and OUTDIR/summary.txt (the table, also printed last). Each step is its own process with a time
# limit, so a hang or a crash costs that step alone; its error is recorded in results.json. The
# whole run keeps to a deadline (GPU: 500 s), later steps shrinking their limits or being skipped
# (recorded as such). FLOWGRPO_GPU_STEPS='adapter|ours-train-.*' runs only the steps whose names
# it matches whole (a rerun of what failed; the rest recorded as not selected). Exit status: 0 when every step ran or was skipped with a reason, 1 when
# a step failed, 2 on a usage error.
set -uo pipefail

BUNDLE="$(cd "$(dirname "$0")" && pwd)"
MODE=gpu
if [ "${1:-}" = --cpu-smoke ]; then
  MODE=cpu-smoke
  shift
fi
OUTDIR="${1:-}"
if [ -z "$OUTDIR" ]; then
  if [ "$MODE" = gpu ]; then
    echo "usage: run.sh OUTDIR | run.sh --cpu-smoke [OUTDIR]" >&2
    exit 2
  fi
  OUTDIR="$(mktemp -d "${TMPDIR:-/tmp}/flowgrpo-gpu-smoke.XXXXXX")"
fi
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
RESULTS="$OUTDIR/results.json"
exec > >(tee -a "$OUTDIR/log.txt") 2>&1

now_ms() { date +%s%3N; }
T0=$(date +%s)
if [ "$MODE" = gpu ]; then BUDGET=${FLOWGRPO_GPU_BUDGET_S:-500}; else BUDGET=${FLOWGRPO_GPU_BUDGET_S:-240}; fi
DEADLINE=$((T0 + BUDGET))
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
WORK="$(mktemp -d "${TMPDIR:-/tmp}/flowgrpo-gpu-work.XXXXXX")"
SAMPLER=""
cleanup() {
  [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
echo "flowgrpo GPU measurement: mode $MODE, bundle $BUNDLE, out $OUTDIR, work $WORK, budget ${BUDGET}s"

# --- unpack ----------------------------------------------------------------------------------
unxz_to() { # file.xz → dest, with xz or (no xz-utils there) Python's lzma
  if command -v xz >/dev/null; then xz -dc "$1" >"$2"; else "$PY" -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; fi
}
NODE="$WORK/node"
cp -r "$BUNDLE/app" "$WORK/app"
NATIVE="$WORK/app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
if ! unxz_to "$BUNDLE/node.xz" "$NODE" || ! unxz_to "$NATIVE/libonnxruntime.so.1.xz" "$NATIVE/libonnxruntime.so.1"; then
  echo "run.sh: could not unpack the bundle" >&2
  exit 1
fi
rm -f "$NATIVE/libonnxruntime.so.1.xz"
chmod +x "$NODE"
MEASURE=("$NODE" "$WORK/app/measure.js")
"$NODE" --version || exit 1

# --- Vulkan: the loaders the bundle carries, the NVIDIA driver's ICD -------------------------
mkdir -p "$WORK/vk"
for f in "$BUNDLE"/vulkan/*.deb; do [ -e "$f" ] && dpkg -x "$f" "$WORK/vk"; done
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
  if [ "$MODE" = gpu ] && [ "$(id -u)" = 0 ] && ls "$BUNDLE"/vulkan/*.deb >/dev/null 2>&1; then
    # The workplace's recipe for its GPU machines: the loader packages unpacked into / .
    for f in "$BUNDLE"/vulkan/*.deb; do dpkg -x "$f" /; done
    ldconfig
  else
    export LD_LIBRARY_PATH="$WORK/vk/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
NV=/usr/local/nvidia/share
if [ "$MODE" = gpu ] && [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$NV/vulkan/icd.d/nvidia_icd.json" ]; then
  # Only the NVIDIA driver: the loader then offers Dawn no software adapter to fall back to.
  export VK_DRIVER_FILES="$NV/vulkan/icd.d/nvidia_icd.json"
  export __EGL_VENDOR_LIBRARY_FILENAMES="$NV/glvnd/egl_vendor.d/10_nvidia.json"
fi

# --- device memory, sampled in the background (results.ts takes each step's window) ----------
GPUMEM=()
if command -v nvidia-smi >/dev/null; then
  (while :; do
    echo "$(now_ms) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)"
    sleep 0.2
  done) >"$WORK/gpumem.txt" &
  SAMPLER=$!
  GPUMEM=(--gpu-samples "$WORK/gpumem.txt")
fi

# --- steps -----------------------------------------------------------------------------------
mkdir -p "$WORK/steps"
"${MEASURE[@]}" init --results "$RESULTS" --mode "$MODE" || exit 1

# step NAME LIMIT_S COMMAND...: runs COMMAND --out <its JSON> within min(LIMIT, time left).
step() {
  local name=$1 limit=$2
  shift 2
  local out="$WORK/steps/$name.json" log="$WORK/steps/$name.log"
  local left=$((DEADLINE - $(date +%s) - 5))
  local start rc
  start=$(now_ms)
  if [ -n "${FLOWGRPO_GPU_STEPS:-}" ] && ! [[ "$name" =~ ^(${FLOWGRPO_GPU_STEPS})$ ]]; then
    echo "{\"ok\": false, \"skipped\": \"not selected (FLOWGRPO_GPU_STEPS=${FLOWGRPO_GPU_STEPS})\"}" >"$out"
    : >"$log"
    rc=0
  elif [ "$left" -lt 20 ]; then
    echo "{\"ok\": false, \"skipped\": \"no time left in the ${BUDGET} s budget\"}" >"$out"
    : >"$log"
    rc=0
  else
    [ "$limit" -gt "$left" ] && limit=$left
    echo "=== $name (limit ${limit} s, $((DEADLINE - $(date +%s))) s left)"
    timeout -k 10 "$limit" "$@" --out "$out" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
  fi
  "${MEASURE[@]}" record --results "$RESULTS" --name "$name" --out "$out" --rc "$rc" \
    --start "$start" --end "$(now_ms)" --log "$log" "${GPUMEM[@]}"
}

timeout 60 "$PY" "$BUNDLE/vkinfo.py" >"$WORK/vkinfo.json"
cat "$WORK/vkinfo.json"
COMMON=(--mode "$MODE" --vkinfo "$WORK/vkinfo.json")
SHAPES=(--shapes "$BUNDLE/shapes.json")

step env 60 "${MEASURE[@]}" env --mode "$MODE"
step adapter 150 "${MEASURE[@]}" adapter --vkinfo "$WORK/vkinfo.json"
step ort-probe 60 "$PY" "$BUNDLE/torch_side.py" probe-ort
step cuda-probe 150 "${MEASURE[@]}" cuda-probe --ort-probe "$WORK/steps/ort-probe.json"
step fidelity-ours 150 "${MEASURE[@]}" fidelity "${SHAPES[@]}" --work "$WORK/fidelity" "${COMMON[@]}"
step fidelity-compare 120 "$PY" "$BUNDLE/torch_side.py" fidelity --folder "$WORK/fidelity"
rm -rf "$WORK/fidelity"

if [ "$MODE" = gpu ]; then
  SHAPE=qwen2.5-0.5b
  DEVICES=(webgpu)
else
  SHAPE=tiny
  DEVICES=(cpu webgpu)
fi
for dev in "${DEVICES[@]}"; do
  step "ours-decode-$SHAPE-$dev" 150 "${MEASURE[@]}" decode "${SHAPES[@]}" --shape "$SHAPE" --device "$dev" --work "$WORK/ours" "${COMMON[@]}"
  step "ours-train-$SHAPE-$dev" 150 "${MEASURE[@]}" train "${SHAPES[@]}" --shape "$SHAPE" --device "$dev" --work "$WORK/ours" "${COMMON[@]}"
  # The same step with the projections in float16 (base_weights_dtype), and with each layer
  # recomputed in the backward (gradient_checkpointing): their speed and memory beside float32's.
  for variant in fp16 ckpt; do
    step "ours-train-$SHAPE-$dev-$variant" 120 "${MEASURE[@]}" train "${SHAPES[@]}" --shape "$SHAPE" --device "$dev" --variant "$variant" --work "$WORK/ours" "${COMMON[@]}"
  done
done
step "torch-$SHAPE" 150 "$PY" "$BUNDLE/torch_side.py" bench "${SHAPES[@]}" --shape "$SHAPE"
# Where our time goes (ORT's profiler, top ops), before the optional larger shape.
step "profile-$SHAPE-webgpu" 120 "${MEASURE[@]}" profile "${SHAPES[@]}" --shape "$SHAPE" --device webgpu --work "$WORK/ours" "${COMMON[@]}"

# The 1.5B shape only with the time that is left (each step's limit shrinks to fit).
if [ "$MODE" = gpu ]; then
  step torch-qwen2.5-1.5b 90 "$PY" "$BUNDLE/torch_side.py" bench "${SHAPES[@]}" --shape qwen2.5-1.5b
  step ours-decode-qwen2.5-1.5b-webgpu 120 "${MEASURE[@]}" decode "${SHAPES[@]}" --shape qwen2.5-1.5b --device webgpu --work "$WORK/ours" "${COMMON[@]}"
  step ours-train-qwen2.5-1.5b-webgpu 120 "${MEASURE[@]}" train "${SHAPES[@]}" --shape qwen2.5-1.5b --device webgpu --work "$WORK/ours" "${COMMON[@]}"
  step ours-train-qwen2.5-1.5b-webgpu-fp16 120 "${MEASURE[@]}" train "${SHAPES[@]}" --shape qwen2.5-1.5b --device webgpu --variant fp16 --work "$WORK/ours" "${COMMON[@]}"
fi

"${MEASURE[@]}" summary --results "$RESULTS" | tee "$OUTDIR/summary.txt"
echo "total $(($(date +%s) - T0)) s"
# A failed step (not one skipped with its reason) fails the run.
"$NODE" -e '
  const r = require(process.argv[1]);
  const failed = Object.entries(r.steps).filter(([, s]) => !s.ok && !s.skipped).map(([n]) => n);
  if (failed.length) { console.log("failed steps: " + failed.join(", ")); process.exit(1); }
' "$RESULTS"
