"""Property-based probes (hypothesis): generated launch files, ``$(eval)`` expressions, option lists and summaries
are either accepted or rejected with a ConfigError — never another exception, never half expanded."""

from __future__ import annotations

import ast
import json
import operator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.errors import ConfigError
from launch.launch_file import MAX_INT_BITS, load_launch_file, safe_eval
from sim_benchmarks.options import parse_options

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# ------------------------------------------------------------------------------------------------ $(eval)
_BIN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
        "%": operator.mod, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">=": operator.ge}
_leaf = st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False), st.booleans(),
                  st.text("ab '", max_size=3).map(lambda s: repr(s.replace("'", ""))))
_exprs = st.recursive(_leaf.map(str), lambda sub: st.one_of(
    st.tuples(sub, st.sampled_from(sorted(_BIN)), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    sub.map(lambda e: f"(-{e})"), sub.map(lambda e: f"(not {e})"),
    st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
), max_leaves=12)


def _reference(expr: str):
    """Python's own value for the generated expression (only literals and operators; no names can occur)."""
    tree = ast.parse(expr, mode="eval")
    assert not any(isinstance(n, ast.Name | ast.Call | ast.Attribute) for n in ast.walk(tree))
    return eval(compile(tree, "<expr>", "eval"), {"__builtins__": {}}, {})  # noqa: S307


def _too_big(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS


@FUZZ
@given(_exprs)
def test_eval_matches_python_or_is_a_config_error(expr):
    try:
        want = _reference(expr)
    except (ArithmeticError, TypeError, ValueError, MemoryError):
        with pytest.raises(ConfigError):
            safe_eval(expr)
        return
    try:
        got = safe_eval(expr)
    except ConfigError as exc:  # allowed only for the documented limits (or an intermediate value over them)
        assert "bits" in str(exc) or "characters" in str(exc) or "nodes" in str(exc), exc
        return
    if _too_big(want):
        pytest.fail(f"{expr} = a {want.bit_length()}-bit integer passed the cap")
    assert type(got) is type(want)
    assert got == (pytest.approx(want, nan_ok=True) if isinstance(want, float) else want)


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"True", "False", "None", "and", "or", "not", "in", "is", "if", "else", "for", "lambda"})


@FUZZ
@given(_names, st.sampled_from(["{0}", "{0}()", "(1).{0}", "'a'.{0}()", "{0}[0]", "[{0} for {0} in 'ab']",
                                "(lambda: {0})()", "__import__('{0}')", "f'{{{0}}}'", "{{'{0}': 1}}",
                                "({0} := 1)", "1 if {0} else 2", "(yield {0})"]))
def test_eval_sandbox_refuses_names_attributes_calls_and_containers(name, template):
    with pytest.raises(ConfigError):
        safe_eval(template.format(name))


# ------------------------------------------------------------------------------------------------ whole files
_xmlish = st.lists(st.sampled_from(list("<>/=\"' \n$()evalrgunchodeiplmt{}:-1") + [
    "<launch>", "</launch>", "<arg ", "<let ", "<node ", "$(eval ", "$(var ", "<include ", "name=", "value="]),
    max_size=60).map("".join)


@FUZZ
@given(_xmlish)
def test_generated_xml_is_accepted_or_a_config_error(tmp_path, text):
    f = tmp_path / "f.launch.xml"
    f.write_text(text)
    try:
        nodes = load_launch_file(f)
    except ConfigError as exc:
        assert str(exc).startswith(str(tmp_path)) or "launch file" in str(exc)
        return
    for node in nodes:
        assert not any("$(" in a for a in node.argv)


@FUZZ
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
                    lambda sub: st.one_of(st.lists(sub, max_size=3),
                                          st.dictionaries(st.sampled_from(["launch", "arg", "node", "param", "name",
                                                                           "value", "default", "pkg", "exec",
                                                                           "group", "actions", "let"]), sub,
                                                          max_size=3)), max_leaves=15))
def test_generated_yaml_is_accepted_or_a_config_error(tmp_path, data):
    f = tmp_path / "f.launch.yaml"
    f.write_text(json.dumps(data))  # JSON is YAML
    try:
        load_launch_file(f)
    except ConfigError as exc:
        assert str(exc).startswith(str(tmp_path))


@FUZZ
@given(st.text(st.sampled_from(list("$()abvr12 +*evn")), max_size=40))
def test_substitutions_are_fully_expanded_or_rejected(tmp_path, value):
    f = tmp_path / "s.launch.xml"
    f.write_text('<launch><let name="v" value="1"/><node pkg="embodia" exec="eval" args="A"/></launch>'
                 .replace('args="A"', f'args="{value}"'))
    try:
        (node,) = load_launch_file(f)
    except ConfigError:
        return
    assert not any("$(" in a for a in node.argv), node.argv


@FUZZ
@given(st.lists(st.text(max_size=12), max_size=5))
def test_option_lists_parse_or_are_config_errors(pairs):
    try:
        out = parse_options(pairs, "--env-option")
    except ConfigError as exc:
        assert "--env-option expects key=value" in str(exc)
        return
    assert set(out) == {p.partition("=")[0] for p in pairs}


# ------------------------------------------------------------------------------------------------ summaries
def _summary() -> dict:
    from sim_benchmarks.summary import build_summary

    records = [{"benchmark": "b", "task": t, "policy": p, "episode": e, "seed": e, "success": (e + len(p)) % 2 == 0,
                "correct_object": True, "wrong_object": False, "steps": 3, "wall_s": 0.1}
               for t in ("t1", "t2") for p in ("x", "yy") for e in range(3)]
    return build_summary("b", records, {"policies": ["x", "yy"], "tasks": ["t1", "t2"], "seed": 0}, 1.0)


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, i))
    yield path


_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                               st.text(max_size=5)),
                     lambda sub: st.one_of(st.lists(sub, max_size=3), st.dictionaries(st.text(max_size=4), sub,
                                                                                      max_size=3)), max_leaves=6)


@FUZZ
@given(st.data())
def test_mutated_summaries_render_or_are_config_errors(tmp_path, data):
    from launch.leaderboard import load_summary
    from sim_benchmarks.leaderboard import render_html, render_markdown

    summary = _summary()
    paths = [p for p in _leaves(summary) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(_json)
    target = summary
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    folder = tmp_path / "s"
    folder.mkdir(exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    try:
        loaded = load_summary(Path(folder))
    except ConfigError:
        return
    assert "| policy" in render_markdown([loaded])
    assert "<table>" in render_html([loaded], None)
