"""Property tests (hypothesis): any value outside a typed option's declared type or range is refused.

For every suite's ``--env-option`` and every policy's ``--policy-option`` field, and for every training flag that
declares a range, a generated bad value (a number outside the range, a negative seed, ``nan``/``inf``, a word where
a number or a choice belongs) must make the command exit 2 with one stderr line, no traceback, and nothing written.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim_benchmarks.suites  # noqa: F401  (registers every suite and policy)
from envs.config import bounds
from launch import eval as eval_cli
from launch import train_prior_fitted, train_vla
from sim_benchmarks import registry

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WORDS = st.text(alphabet="abcxyz_", min_size=1, max_size=8)
NON_FINITE = st.sampled_from(["nan", "inf", "-inf"])


def _numbers_outside(lo, hi, integer: bool) -> st.SearchStrategy[str]:
    """Numbers (as CLI text) below ``lo`` or above ``hi``; none when the field declares no range."""
    parts = []
    if lo is not None:
        below = st.integers(max_value=math.ceil(lo) - 1) if integer else st.floats(max_value=lo, exclude_max=True,
                                                                                 allow_nan=False, allow_infinity=False)
        parts.append(below)
    if hi is not None:
        above = st.integers(min_value=math.floor(hi) + 1) if integer else st.floats(min_value=hi, exclude_min=True,
                                                                                  allow_nan=False,
                                                                                  allow_infinity=False)
        parts.append(above)
    return st.one_of(*parts).map(repr) if parts else st.nothing()


def _bad_values(f: dataclasses.Field, hint) -> st.SearchStrategy[str] | None:
    """Values (CLI text) outside the field's type or declared range; None for a field every string satisfies."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    kind = args[0] if typing.get_origin(hint) in (typing.Union, __import__("types").UnionType) and len(args) == 1 \
        else hint
    lo, hi = bounds(f)
    if kind is bool:
        return st.sampled_from(["maybe", "2", "yes please"])
    if kind is int:
        return st.one_of(WORDS, st.sampled_from(["1.5", "nan"]), _numbers_outside(lo, hi, True))
    if kind is float:
        return st.one_of(WORDS, NON_FINITE, _numbers_outside(lo, hi, False))
    if typing.get_origin(kind) is typing.Literal:
        choices = {str(c) for c in typing.get_args(kind)}
        return WORDS.filter(lambda w: w not in choices)
    return None


def _typed_fields():
    """(flag, suite, field name, bad-value strategy) for every typed env and policy option."""
    out = []
    for suite in registry.suites().values():
        if suite.options_type is not None:
            hints = typing.get_type_hints(suite.options_type)
            for f in dataclasses.fields(suite.options_type):
                bad = _bad_values(f, hints[f.name])
                if bad is not None:
                    out.append(("--env-option", suite.name, f.name, bad))
    for spec in registry.policies().values():
        if spec.options_type is not None and spec.suites:
            hints = typing.get_type_hints(spec.options_type)
            for f in dataclasses.fields(spec.options_type):
                bad = _bad_values(f, hints[f.name])
                if bad is not None:
                    out.append(("--policy-option", spec.suites[0], f.name, bad))
        for suite_name, options_type in spec.extension_types:  # keys a suite adds to a policy (vla_memory, ...)
            hints = typing.get_type_hints(options_type)
            for f in dataclasses.fields(options_type):
                bad = _bad_values(f, hints[f.name])
                if bad is not None:
                    out.append(("--policy-option", suite_name, f.name, bad))
    return out


FIELDS = _typed_fields()


def _ranged_flags():
    """(main, argv prefix, flag, bad-value strategy) for every training flag with a declared range or a seed."""
    out = []
    for module, parser, prefix in ((train_vla, train_vla.build_parser(), ["--out", "o"]),
                                   (train_prior_fitted, train_prior_fitted.build_parser(), ["--out", "o"])):
        for action in parser._actions:
            lo, hi = getattr(action, "bounds", (None, None))
            flag = max(action.option_strings, key=len) if action.option_strings else None
            value_type = getattr(action, "value_type", None)  # numeric flags: converted as typed options are
            if flag is None or value_type not in (int, float):
                continue
            if lo is None and action.dest.endswith("seed"):
                lo = 0
            strategy = _numbers_outside(lo, hi, value_type is int)
            if value_type is float:
                strategy = st.one_of(strategy, NON_FINITE)
            if lo is not None or hi is not None or value_type is float:
                out.append((module.main, prefix, flag, strategy))
    return out


FLAGS = _ranged_flags()


def _refused(main, argv: list[str], capsys, root: Path) -> str:
    before = sorted(root.rglob("*"))
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, (argv, rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, (argv, err)
    assert sorted(root.rglob("*")) == before, f"{argv}: a rejected run wrote something"
    return lines[0]


def test_every_suite_and_policy_option_type_is_covered():
    flags = {f[0] for f in FIELDS}
    assert flags == {"--env-option", "--policy-option"} and len(FIELDS) >= 40, len(FIELDS)
    assert len(FLAGS) >= 20, len(FLAGS)


@PROPERTY
@given(data=st.data())
def test_a_typed_option_outside_its_type_or_range_exits_2_and_writes_nothing(tmp_path, capsys, monkeypatch, data):
    flag, suite, name, bad = data.draw(st.sampled_from(FIELDS), label="field")
    value = data.draw(bad, label="value")
    monkeypatch.chdir(tmp_path)
    line = _refused(eval_cli.main, ["--env", suite, "--episodes", "1", "--out", "o", flag, f"{name}={value}"],
                    capsys, tmp_path)
    assert name in line, line


@PROPERTY
@given(data=st.data())
def test_a_training_flag_outside_its_range_exits_2_and_writes_nothing(tmp_path, capsys, monkeypatch, data):
    main, prefix, flag, bad = data.draw(st.sampled_from(FLAGS), label="flag")
    value = data.draw(bad, label="value")
    monkeypatch.chdir(tmp_path)
    line = _refused(main, [*prefix, flag, value], capsys, tmp_path)
    assert flag in line, line


@pytest.mark.parametrize("name", ["corpus_seed", "fault_seed", "game_seed"])
def test_seeds_are_non_negative_without_a_declaration(name):
    from envs.config import is_seed

    assert is_seed(name) and is_seed("seed") and not is_seed("seeds")
