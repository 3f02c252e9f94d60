"""Options of the vimrag policies (kept free of heavy imports: the suite registers them at start-up)."""

from __future__ import annotations

import dataclasses
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envs.config import Options, require
from envs.paths import check_sqlite_file

DEFAULT_BUDGET = 64


@dataclass(frozen=True)
class VimragOptions(Options):
    """Options of the vimrag policies (``--policy-option key=value``)."""

    title = "VimRAG options"
    budget: int = dataclasses.field(default=DEFAULT_BUDGET, metadata={"help": "total visual tokens per question"})
    max_steps: int = dataclasses.field(default=8, metadata={"help": "agent steps before a forced answer"})
    planner_seed: int = dataclasses.field(default=0, metadata={"help": "seed of the trained planner (best of 4 runs)"})
    credit: Literal["ggpo", "trajectory"] = dataclasses.field(default="ggpo",
                                                               metadata={"help": "planner trained with this credit"})
    planner: Literal["learned", "smollm2"] = dataclasses.field(default="learned", metadata={
        "help": "learned: the GGPO/trajectory-trained MLP; smollm2: the offline SmolLM2-135M, replies constrained "
                "to the valid actions"})
    checkpoint_db: str | None = dataclasses.field(default=None, metadata={
        "help": "SQLite file for the LangGraph checkpointer (resumable threads); none: no checkpointer"})
    reader: Literal["trained", "openai", "hf"] = dataclasses.field(default="trained", metadata={
        "help": "trained: the reader trained on the train split; openai: a VLM behind an OpenAI-compatible endpoint "
                "(reader_url, reader_model); hf: a transformers VLM in a local folder (reader_path)"})
    reader_url: str = dataclasses.field(default="", metadata={
        "help": "reader=openai: the endpoint, e.g. http://localhost:8000/v1 (must answer GET /models at start-up)"})
    reader_model: str = dataclasses.field(default="", metadata={
        "help": "reader=openai: the model id to request; empty: the first one the endpoint lists"})
    reader_path: str = dataclasses.field(default="", metadata={
        "help": "reader=hf: a folder with a transformers image-text-to-text model and its processor"})
    reader_patch_px: int = dataclasses.field(default=28, metadata={
        "help": "external readers: pixels per side of one visual token; a g x g grant is sent as a "
                "(g * reader_patch_px)-pixel image"})
    reader_timeout_s: float = dataclasses.field(default=60.0, metadata={
        "help": "reader=openai: seconds to wait for one HTTP request", "min": 0.001, "max": 3600})
    reader_api_key_env: str = dataclasses.field(default="", metadata={
        "help": "reader=openai: name of the environment variable holding the API key (none sent when empty)"})
    reader_max_tokens: int = dataclasses.field(default=16, metadata={
        "help": "external readers: the most tokens of a reply"})

    def check(self) -> None:
        require(self.budget > 0, f"option budget must be a positive integer, got {self.budget}")
        require(self.max_steps >= 2, f"option max_steps must be >= 2, got {self.max_steps}")
        require(self.reader != "openai" or bool(self.reader_url),
                "option reader=openai needs reader_url=<endpoint>, e.g. reader_url=http://localhost:8000/v1")
        require(self.reader != "hf" or bool(self.reader_path),
                "option reader=hf needs reader_path=<folder of a transformers vision-language model>")
        require(self.reader == "openai" or not (self.reader_url or self.reader_model or self.reader_api_key_env),
                f"options reader_url/reader_model/reader_api_key_env need reader=openai, got reader={self.reader}")
        require(self.reader == "hf" or not self.reader_path,
                f"option reader_path needs reader=hf, got reader={self.reader}")
        if self.reader == "hf":  # cheap local check, so a wrong path fails before the corpus is loaded
            require(Path(self.reader_path).expanduser().is_dir(),
                    f"option reader_path {self.reader_path!r} is not a folder (expected a transformers "
                    "vision-language model saved with save_pretrained, model and processor)")
        if self.reader == "openai":
            try:  # urlparse raises on an unclosed [IPv6] host, .port on a port that is not a number
                parsed = urllib.parse.urlparse(self.reader_url)
                valid = parsed.scheme in ("http", "https") and bool(parsed.hostname) and parsed.port != 0
                valid = valid and not any(c.isspace() for c in self.reader_url)
            except ValueError:
                valid = False
            require(valid, f"option reader_url must be an http(s) URL such as http://localhost:8000/v1, got "
                           f"{self.reader_url!r}")
        if self.checkpoint_db:
            check_sqlite_file(self.checkpoint_db, "option checkpoint_db")
        require(self.reader_patch_px > 0, f"option reader_patch_px must be positive, got {self.reader_patch_px}")
        require(self.reader_max_tokens > 0, f"option reader_max_tokens must be positive, got {self.reader_max_tokens}")
