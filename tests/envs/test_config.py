"""Typed options: CLI strings converted, wrong types and keys rejected with the valid names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from envs.config import Options, require
from envs.errors import ConfigError


@dataclass(frozen=True)
class _Demo(Options):
    title = "demo"
    steps: int = 10
    rate: float = 0.5
    flag: bool = False
    name: str = "a"
    mode: Literal["fast", "slow"] = "fast"
    limit: int | None = None
    cues: tuple[str, ...] = ("x", "y")
    note: str = field(default="", metadata={"help": "free text"})

    def check(self) -> None:
        require(self.steps >= 1, f"steps must be >= 1, got {self.steps}")


def test_cli_strings_are_converted():
    opts = _Demo.from_options({"steps": "3", "rate": "2", "flag": "true", "mode": "slow", "limit": "none",
                               "cues": "a,b,c"})
    assert (opts.steps, opts.rate, opts.flag, opts.mode, opts.limit, opts.cues) == (3, 2.0, True, "slow", None,
                                                                                  ("a", "b", "c"))
    assert _Demo.from_options({"limit": 7}).limit == 7
    assert _Demo.from_options(None) == _Demo()


@pytest.mark.parametrize("bad, words", [
    ({"steps": "abc"}, "steps must be an integer"),
    ({"steps": 1.5}, "steps must be an integer"),
    ({"steps": True}, "steps must be an integer"),
    ({"rate": "x"}, "rate must be a number"),
    ({"flag": "yes"}, "flag must be true or false"),
    ({"mode": "medium"}, "valid: fast, slow"),
    ({"limit": "many"}, "limit must be an integer"),
    ({"steps": 0}, "steps must be >= 1"),
    ({"stepz": 3}, "valid: steps, rate"),
])
def test_bad_values_name_the_option(bad, words):
    with pytest.raises(ConfigError, match=words.replace("|", r"\|")):
        _Demo.from_options(bad)


def test_shared_bag_and_listing():
    assert _Demo.from_options({"steps": 2, "other": 1}, strict=False).steps == 2
    lines = _Demo.describe()
    assert lines[0] == "steps: int = 10"
    assert "mode: one of fast|slow = 'fast'" in lines
    assert any(line.startswith("note: str = ''  free text") for line in lines)
    assert _Demo().as_dict()["cues"] == ["x", "y"]
