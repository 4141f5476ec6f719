#!/usr/bin/env bash
# Writes the GPU measurement bundle (default .gpu-bundle/ at the repository's root; git-ignored):
# everything the GPU machine needs that it lacks — it has no Node.js and reaches no registry —
# in at most 64 MiB (the device tool's limit for what travels with a call; checked, exit 1 above):
#   node.xz                      this machine's node binary (x86-64 Linux), xz-compressed
#   app/flowgrpo.js              the CLI, one file (packages/cli/scripts/bundle.mjs)
#   app/measure.js               the measuring steps, one file (packages/trainer-cuda/bench/gpu)
#   app/session-worker-main.js   @flowgrpo/models' session worker
#   app/node_modules/            onnxruntime-node + onnxruntime-common; the native library
#                                libonnxruntime.so.1 (WebGPU EP inside) xz-compressed
#   vulkan/*.deb                 the Vulkan/EGL/GL loaders (the GPU machine has none), from apt
#   *.py, shapes.json, run.sh    the Python side, the shapes both sides measure, the driver
#   manifest.json                versions, sizes, and what could not be bundled
# Then `.gpu-bundle/run.sh OUTDIR` on the GPU machine, `.gpu-bundle/run.sh --cpu-smoke` here.
# Usage: scripts/gpu/bundle.sh [OUTDIR]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$ROOT/.gpu-bundle}"
LIMIT=$((64 * 1024 * 1024))
VULKAN_DEBS=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)

node -e 'process.exit(process.platform === "linux" && process.arch === "x64" ? 0 : 1)' || {
  echo "bundle.sh: the GPU machine is x86-64 Linux; this node is $(node -p 'process.platform + "-" + process.arch')" >&2
  exit 1
}
command -v xz >/dev/null || { echo "bundle.sh: xz is needed (apt-get install xz-utils)" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/app/node_modules" "$OUT/vulkan"
notes=()

echo "bundle: JavaScript (esbuild)"
node "$HERE/bundle-js.mjs" "$OUT/app"
rm -f "$OUT"/app/*.map
echo '{ "type": "module" }' >"$OUT/app/package.json"

echo "bundle: onnxruntime-node"
ORT="$(cd "$ROOT/packages/models/node_modules/onnxruntime-node" && pwd -P)"
COMMON="$(cd "$ORT/../onnxruntime-common" && pwd -P)"
mkdir -p "$OUT/app/node_modules/onnxruntime-node" "$OUT/app/node_modules/onnxruntime-common"
cp -r "$ORT/package.json" "$ORT/dist" "$ORT/lib" "$OUT/app/node_modules/onnxruntime-node/"
cp -r "$COMMON/package.json" "$COMMON/dist" "$OUT/app/node_modules/onnxruntime-common/"
find "$OUT/app/node_modules" -name '*.map' -delete
NATIVE="$OUT/app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64"
mkdir -p "$NATIVE"
cp "$ORT/bin/napi-v6/linux/x64/onnxruntime_binding.node" "$NATIVE/"

# xz -6 of ~145 MB takes a minute of two cores: the results are kept in a cache keyed by the
# source's path, size and mtime (node_modules/.cache, git-ignored), so a second bundle is quick.
CACHE="${FLOWGRPO_GPU_BUNDLE_CACHE:-$ROOT/node_modules/.cache/flowgrpo-gpu-bundle}"
mkdir -p "$CACHE"
xz_cached() { # SOURCE DEST
  local src key
  src="$(readlink -f "$1")"
  key="$(printf '%s %s xz-6' "$src" "$(stat -c '%s %Y' "$src")" | sha256sum | cut -c1-24)"
  if [ ! -f "$CACHE/$key.xz" ]; then
    xz -T2 -6 -c "$src" >"$CACHE/$key.xz.tmp-$$" && mv "$CACHE/$key.xz.tmp-$$" "$CACHE/$key.xz"
  fi
  cp "$CACHE/$key.xz" "$2"
}
echo "bundle: xz node and libonnxruntime.so.1 (a minute on two cores, unless cached)"
xz_cached "$(command -v node)" "$OUT/node.xz" &
xz_node=$!
xz_cached "$ORT/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$NATIVE/libonnxruntime.so.1.xz"
wait "$xz_node"
# The bundle must unpack: check both archives here, where a broken one is cheap to find.
xz -t "$OUT/node.xz" "$NATIVE/libonnxruntime.so.1.xz"

echo "bundle: Vulkan loader packages (apt-get download)"
if command -v apt-get >/dev/null && (
  cd "$OUT/vulkan" &&
    apt-get -q -oAPT::Architecture=amd64 download "${VULKAN_DEBS[@]}" >/dev/null 2>"$OUT/vulkan/apt.log"
); then
  rm -f "$OUT/vulkan/apt.log"
else
  rm -f "$OUT"/vulkan/*.deb
  notes+=("Vulkan loader packages not bundled: apt-get download failed or is absent (see run.sh: without them WebGPU is not measured on a machine that lacks libvulkan)")
  echo "bundle: NOTE ${notes[-1]}" >&2
fi

cp "$HERE/run.sh" "$HERE/vkinfo.py" "$HERE/torch_side.py" "$HERE/numpy_qwen2.py" "$HERE/shapes.json" "$OUT/"
chmod +x "$OUT/run.sh"

size=$(du -sb "$OUT" | cut -f1)
node -e '
  const [out, size, limit, node, ...notes] = process.argv.slice(1);
  const ort = require(out + "/app/node_modules/onnxruntime-node/package.json").version;
  const m = { node, onnxruntimeNode: ort, bytes: Number(size), limitBytes: Number(limit),
    vulkanDebs: require("fs").readdirSync(out + "/vulkan").filter((f) => f.endsWith(".deb")),
    notes, createdAt: new Date().toISOString() };
  require("fs").writeFileSync(out + "/manifest.json", JSON.stringify(m, null, 2) + "\n");
' "$OUT" "$size" "$LIMIT" "$(node -v)" "${notes[@]}"
size=$(du -sb "$OUT" | cut -f1)
echo "bundle: $OUT is $((size / 1024)) KiB (limit $((LIMIT / 1024)) KiB)"
if [ "$size" -gt "$LIMIT" ]; then
  echo "bundle.sh: $OUT is $size bytes, over the device tool's 64 MiB ($LIMIT bytes): nothing more may go in" >&2
  exit 1
fi
# The device tool sends the working tree too (tracked and untracked, not ignored files) within
# the same 64 MiB: check the sum, for the bundle at its default place.
if [ "$OUT" = "$ROOT/.gpu-bundle" ] && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  tree=$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
    (cd "$ROOT" && xargs -0 stat -c %s 2>/dev/null) | awk '{ s += $1 } END { print s + 0 }')
  echo "bundle: with the working tree ($((tree / 1024)) KiB) a device call carries $(((size + tree) / 1024)) KiB"
  if [ $((size + tree)) -gt "$LIMIT" ]; then
    echo "bundle.sh: the bundle and the working tree together are $((size + tree)) bytes, over the device tool's 64 MiB" >&2
    exit 1
  fi
fi
