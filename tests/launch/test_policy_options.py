"""Every registered policy's options: listed with types, and a wrong key or type exits 2 naming the valid keys."""

from __future__ import annotations

import types
import typing

import pytest

from launch.eval import main
from sim_benchmarks import registry

POLICIES = [(suite, name) for suite in registry.suites() for name in registry.policies_for(suite)]


def _bad_value(tp) -> str | None:
    """A CLI string the annotation ``tp`` must reject (None for free strings, which accept anything)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "no_such_choice"
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if str in inner:
            return None
        return _bad_value(inner[0]) if len(inner) == 1 else "abc"  # e.g. Literal[...] | float
    return {int: "abc", float: "abc", bool: "maybe"}.get(tp)


@pytest.mark.parametrize("suite, policy", POLICIES)
def test_unknown_key_exits_2_naming_valid_keys(tmp_path, capsys, suite, policy):
    out = tmp_path / "run"
    rc = main(["--env", suite, "--policy", policy, "--episodes", "1", "--out", str(out),
               "--policy-option", "no_such_option=1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "no_such_option" in err and "valid:" in err
    assert not out.exists()


@pytest.mark.parametrize("suite, policy", POLICIES)
def test_wrong_types_exit_2_for_every_typed_field(tmp_path, capsys, suite, policy):
    spec = registry.policies()[policy]
    if spec.options_type is None:
        pytest.skip(f"{policy} takes no options")
    hints = typing.get_type_hints(spec.options_type)
    probed = 0
    for key in spec.options_type.names():
        bad = _bad_value(hints[key])
        if bad is None:
            continue
        out = tmp_path / key
        rc = main(["--env", suite, "--policy", policy, "--episodes", "1", "--out", str(out),
                   "--policy-option", f"{key}={bad}"])
        err = capsys.readouterr().err
        assert rc == 2, (key, bad)
        assert err.count("\n") == 1 and key in err, err
        assert not out.exists()
        probed += 1
    assert probed >= 1


def test_list_shows_typed_options(capsys):
    assert main(["--list"]) == 0
    text = capsys.readouterr().out
    assert "--policy-option vap_every: int = 5" in text
    assert "--policy-option vla_execution: one of first|ensemble|queue = 'first'" in text
    assert "--env-option rounds: int = 1000" in text
