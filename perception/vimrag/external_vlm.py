"""External vision-language models: an OpenAI-compatible chat endpoint, or a transformers model in a local folder.

Both take a text prompt and a list of RGB images (already sized by the caller) and return the model's reply and
how many visual tokens the images cost:

* :class:`OpenAIChatVLM` posts ``/v1/chat/completions`` with the images as base64 PNG data URLs in ``image_url``
  content parts (stdlib ``urllib``, no client library). The cost of an image is what the caller says it is (the
  server tokenises it itself; its reported ``usage.prompt_tokens`` is kept in :attr:`OpenAIChatVLM.usage`).
* :class:`LocalVLM` loads ``AutoModelForImageTextToText`` + ``AutoProcessor`` with ``local_files_only=True`` and
  counts the image placeholder tokens its processor really inserts (measured per image size, so a model that
  resizes every image to a fixed size reports that fixed cost).

Nothing here downloads anything; an endpoint that does not answer at start-up or a folder that is not a loadable
model is a :class:`~envs.errors.ConfigError`.
"""

from __future__ import annotations

import base64
import io
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.errors import ConfigError


def resize_image(pixels: np.ndarray, side: int) -> np.ndarray:
    """An ``H x W x 3`` uint8 image resampled (bicubic) to ``side x side`` pixels."""
    from PIL import Image

    if side <= 0:
        raise ConfigError(f"image side must be positive, got {side}")
    img = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8))
    return np.asarray(img.resize((int(side), int(side)), Image.Resampling.BICUBIC))


def png_data_url(pixels: np.ndarray) -> str:
    """``data:image/png;base64,...`` of an ``H x W x 3`` uint8 image (lossless, so the pixels sent are exact)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def api_base(url: str) -> str:
    """``http(s)://host[:port]/v1`` from a URL given with or without the ``/v1`` suffix."""
    parsed = urllib.parse.urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"reader_url must be an http(s) URL such as http://localhost:8000/v1, got {url!r}")
    base = url.strip().rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


@dataclass
class OpenAIChatVLM:
    """A chat-completions endpoint (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio, ...) used as a VLM.

    ``check()`` (called by :func:`connect_openai`) lists ``/v1/models`` once, so an unreachable endpoint is found
    before a run starts. Requests that fail mid-run (timeout, connection reset, HTTP 5xx) are retried
    ``retries`` times with a short back-off, then raise ConfigError: the harness stops, keeps the questions
    already answered, and ``--resume`` continues after the endpoint is back.
    """

    url: str
    model: str = ""
    timeout_s: float = 60.0
    api_key: str = field(default="", repr=False)
    max_tokens: int = 16
    retries: int = 2
    usage: dict[str, int] = field(default_factory=lambda: {"requests": 0, "prompt_tokens": 0,
                                                           "completion_tokens": 0})

    def __post_init__(self) -> None:
        self.base = api_base(self.url)
        if self.timeout_s <= 0:
            raise ConfigError(f"reader_timeout_s must be positive, got {self.timeout_s}")

    def _request(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base + path, data=data, headers=headers,
                                     method="GET" if body is None else "POST")
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 (http(s) only, checked)
            payload = json.loads(resp.read().decode("utf-8"))
        if not isinstance(payload, dict):
            raise ValueError(f"expected a JSON object from {path}, got {type(payload).__name__}")
        return payload

    def check(self) -> list[str]:
        """The model ids the endpoint lists; ConfigError when it does not answer like an OpenAI endpoint."""
        try:
            payload = self._request("/models", None)
            ids = [str(m["id"]) for m in payload.get("data", []) if isinstance(m, dict) and "id" in m]
        except urllib.error.HTTPError as exc:
            raise ConfigError(f"reader endpoint {self.base} answered HTTP {exc.code} to GET /models") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(f"reader endpoint {self.base} is unreachable: {reason}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"reader endpoint {self.base} did not answer GET /models with OpenAI JSON: {exc}") \
                from None
        if not self.model:
            if not ids:
                raise ConfigError(f"reader endpoint {self.base} lists no models; pass reader_model=<id>")
            self.model = ids[0]
        return ids

    def ask(self, prompt: str, images: list[np.ndarray]) -> str:
        """The model's reply to ``prompt`` with ``images`` (each sent as-is, PNG) before the text."""
        content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": png_data_url(im)}}
                                         for im in images]
        content.append({"type": "text", "text": prompt})
        body = {"model": self.model, "messages": [{"role": "user", "content": content}],
                "max_tokens": self.max_tokens, "temperature": 0.0}
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                payload = self._request("/chat/completions", body)
                reply = payload["choices"][0]["message"]["content"]
                break
            except urllib.error.HTTPError as exc:
                if exc.code < 500:  # the request itself is wrong (bad model id, too many images): no retry
                    detail = exc.read().decode("utf-8", "replace")[:200].replace("\n", " ")
                    raise ConfigError(f"reader endpoint {self.base} rejected the request: HTTP {exc.code} "
                                      f"{detail}") from None
                last = exc
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                last = exc
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise ConfigError(f"reader endpoint {self.base} answered without choices[0].message.content: "
                                  f"{type(exc).__name__}: {exc}") from None
            time.sleep(0.5 * (attempt + 1))
        else:
            raise ConfigError(f"reader endpoint {self.base} failed {self.retries + 1} times "
                              f"(timeout {self.timeout_s:g} s): {getattr(last, 'reason', last)}")
        usage = payload.get("usage") or {}
        self.usage["requests"] += 1
        for key in ("prompt_tokens", "completion_tokens"):
            if isinstance(usage.get(key), int):
                self.usage[key] += usage[key]
        if isinstance(reply, list):  # some servers return content parts
            reply = " ".join(str(p.get("text", "")) for p in reply if isinstance(p, dict))
        return str(reply or "")


def connect_openai(url: str, model: str = "", timeout_s: float = 60.0, api_key_env: str = "",
                   max_tokens: int = 16) -> OpenAIChatVLM:
    """An :class:`OpenAIChatVLM` whose endpoint answered ``GET /models`` (ConfigError otherwise).

    The API key is read from the environment variable ``api_key_env`` (never from a command line or a config file,
    so it is not recorded); none is sent when it is empty.
    """
    key = ""
    if api_key_env:
        key = os.environ.get(api_key_env, "")
        if not key:
            raise ConfigError(f"reader_api_key_env names {api_key_env!r}, which is not set in the environment")
    vlm = OpenAIChatVLM(url, model, timeout_s, key, max_tokens)
    vlm.check()
    return vlm


class LocalVLM:
    """A transformers image-text-to-text model loaded from a local folder (``local_files_only=True``).

    The folder must hold what ``save_pretrained`` writes for the model and its processor (config, weights,
    tokenizer, image processor, chat template). Greedy decoding; CPU, float32.
    """

    def __init__(self, path: str | Path, max_new_tokens: int = 16) -> None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"reader_path {str(path)!r} is not a folder (expected a transformers model saved with "
                              "save_pretrained, model and processor)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForImageTextToText, AutoProcessor
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            self.processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
            self.model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True).eval()
        except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ConfigError(f"reader_path {str(path)!r} is not a loadable vision-language model: "
                              f"{type(exc).__name__}: {msg[:200]}") from None
        self.path = folder
        self.max_new_tokens = int(max_new_tokens)
        self.image_token_id = self._image_token_id()
        self._costs: dict[int, int] = {}  # image side -> measured placeholder tokens

    def _image_token_id(self) -> int:
        tid = getattr(self.processor, "image_token_id", None)
        if tid is None:
            tid = getattr(self.model.config, "image_token_id", None) or getattr(self.model.config,
                                                                                 "image_token_index", None)
        if tid is None:
            raise ConfigError(f"reader_path {str(self.path)!r}: the model names no image token (image_token_id)")
        return int(tid)

    def _inputs(self, prompt: str, images: list[np.ndarray]):
        from PIL import Image

        content = [{"type": "image"} for _ in images] + [{"type": "text", "text": prompt}]
        text = self.processor.apply_chat_template([{"role": "user", "content": content}],
                                                  add_generation_prompt=True, tokenize=False)
        pil = [Image.fromarray(np.ascontiguousarray(im, dtype=np.uint8)) for im in images]
        return self.processor(text=[text], images=pil or None, return_tensors="pt")

    def image_cost(self, side: int) -> int:
        """Image placeholder tokens the processor inserts for one ``side x side`` image (measured, not assumed)."""
        side = int(side)
        if side not in self._costs:
            blank = np.zeros((side, side, 3), np.uint8)
            with_image = self._inputs("x", [blank])["input_ids"]
            without = self._inputs("x", [])["input_ids"]
            self._costs[side] = int((with_image == self.image_token_id).sum() - (without == self.image_token_id).sum())
        return self._costs[side]

    def ask(self, prompt: str, images: list[np.ndarray]) -> tuple[str, int]:
        """(the greedy reply, image placeholder tokens the model consumed) for ``prompt`` after ``images``."""
        import torch

        inputs = self._inputs(prompt, images)
        n_image = int((inputs["input_ids"] == self.image_token_id).sum())
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        new = out[:, inputs["input_ids"].shape[1]:]
        reply = self.processor.batch_decode(new, skip_special_tokens=True)[0]
        return reply, n_image
