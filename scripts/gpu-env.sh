# Sourced by scripts/gpu-check.sh and scripts/bench-sft.sh: where the lent GPU machines keep JAX's
# CUDA plugin and a PyTorch with transformers. Sets PLUGIN (unless given), XLA_FLAGS' CUDA data
# folder beside the plugin (unless XLA_FLAGS is set), GOMLX_NO_AUTO_INSTALL, and TORCH_PYTHON (the
# first python that imports torch, unless given). Elsewhere doctor and the engine search
# PJRT_PLUGIN_LIBRARY_PATH, site-packages and go-xla's install folders (~/.local/lib/go-xla,
# /usr/local/lib/go-xla).
SITE=/opt/torch/.venv/lib/python3.12/site-packages
PLUGIN=${PLUGIN:-}
if [ -z "$PLUGIN" ] && [ -f "$SITE/jax_plugins/xla_cuda13/xla_cuda_plugin.so" ]; then
	PLUGIN=$SITE/jax_plugins/xla_cuda13/xla_cuda_plugin.so
fi
if [ -n "$PLUGIN" ] && [ -z "${XLA_FLAGS:-}" ]; then
	nv=$(dirname "$(dirname "$(dirname "$PLUGIN")")")/nvidia/cu13
	[ -d "$nv" ] && export XLA_FLAGS=--xla_gpu_cuda_data_dir=$nv
fi
# GOPJRT_CUDA_CHECKS is left to the engine: it turns go-xla's checks off for JAX's wheel only,
# where they look for jax_plugins/nvidia (engine/device setCUDAEnv; docs/gpu.md#gpu-setup).
export GOMLX_NO_AUTO_INSTALL=1
TORCH_PYTHON=${TORCH_PYTHON:-}
if [ -z "$TORCH_PYTHON" ]; then
	for p in /opt/torch/.venv/bin/python python3 /usr/bin/python3; do
		if command -v "$p" > /dev/null && "$p" -c 'import torch' 2> /dev/null; then TORCH_PYTHON=$(command -v "$p"); break; fi
	done
fi
