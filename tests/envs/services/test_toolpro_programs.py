"""ToolPro programs: checker rejections, wasm execution equal to the reference interpreter, replay, sandbox limits."""

from __future__ import annotations

import copy
import json

import pytest

from envs.services.programs.checker import check
from envs.services.programs.executor import ExecutorLimits, ProgramExecutor
from envs.services.programs.interpreter import ToolFailure, execute
from envs.services.programs.program import ProgramError, parse_program
from envs.services.programs.sandbox import SandboxLimits
from envs.services.runtime import ServiceRuntime, create_database, tool_specs
from envs.services.tools import ServiceError
from envs.services.workflows import TASKS, expected_state, state, state_diff
from policies.toolpro.planner import plan


def decls(service: str) -> dict:
    return {n: s.public() for n, s in tool_specs(service).items()}


def runtime(tmp_path, service: str, seed: int = 3) -> ServiceRuntime:
    return ServiceRuntime(service, create_database(tmp_path / f"{service}.db", service, seed))


def test_every_planned_program_passes_the_checker():
    for task in TASKS.values():
        report = check(parse_program(plan(task)), decls(task.service), task.service)
        assert 1 <= report.nominal_calls <= report.call_bound <= 10_000


BOOK = {"call": "book_flight", "args": {"flight_id": {"lit": 1}, "traveller": {"lit": "a"}}, "effect": "write"}


@pytest.mark.parametrize("body, message", [
    (BOOK, "has no idempotency key"),
    ({**BOOK, "effect": "read", "key": {"lit": "k"}}, "declared write"),
    ({"call": "launch_rocket", "args": {}, "effect": "read"}, "unknown tool 'launch_rocket'"),
    ({"call": "get_flight", "args": {"flight_id": {"lit": "seven"}}, "effect": "read"}, "is not of type 'integer'"),
    ({"call": "get_flight", "args": {}, "effect": "read"}, "needs argument 'flight_id'"),
    ({"for": "x", "in": {"lit": [1]}, "do": {"seq": []}}, "unbounded loop"),
    ({"for": "x", "in": {"lit": [1]}, "max": 100000, "do": {"seq": []}}, "loop bound 100000"),
    ({"for": "x", "in": {"lit": [1, 2]}, "max": 2, "do": {**BOOK, "key": {"lit": "same"}}}, "loop variable 'x'"),
    ({"return": {"var": "nowhere"}}, "undefined variable"),
    ({"seq": [{"call": "get_flight", "args": {"flight_id": {"lit": 1}}, "effect": "read", "bind": "f"},
              {"return": {"get": [{"var": "f"}, "colour"]}}]}, "no field 'colour'"),
])
def test_checker_rejects_ill_typed_programs(body, message):
    with pytest.raises(ProgramError, match=message):
        check(parse_program({"service": "travel", "body": body}), decls("travel"))


def test_malformed_json_is_a_program_error():
    with pytest.raises(ProgramError, match="not valid JSON"):
        parse_program("{not json")


@pytest.mark.parametrize("name", ["trip_1", "basket_3", "triage_tech_high_5", "group_trip_2", "comment_ticket_7"])
def test_wasm_execution_matches_interpreter_and_reference(tmp_path, name):
    task = TASKS[name]
    (tmp_path / "w").mkdir()
    rt = runtime(tmp_path / "w", task.service)
    out = ProgramExecutor(rt).run(plan(task), "r")
    assert out["status"] == "ok", out
    assert state_diff(state(rt.conn), expected_state(task, 3)) == 0
    (tmp_path / "p").mkdir()
    rt2 = runtime(tmp_path / "p", task.service)

    def call(req):
        try:
            return rt2.call(req.tool, req.args, None if req.key is None else "r:" + req.key)[0]
        except ServiceError as exc:
            raise ToolFailure(exc.kind, exc.message) from None

    assert execute(parse_program(plan(task)), call) == out["result"]
    assert state(rt2.conn) == state(rt.conn)


def test_rerun_with_same_run_id_replays_and_changes_nothing(tmp_path):
    task = TASKS["ship_paid_9"]
    rt = runtime(tmp_path, task.service)
    ex = ProgramExecutor(rt)
    first = ex.run(plan(task), "once")
    before = state(rt.conn)
    again = ex.run(plan(task), "once")
    assert first["status"] == again["status"] == "ok"
    assert again["replayed"] == again["calls"] == 10 and first["replayed"] == 0
    assert state(rt.conn) == before
    other = ex.run(plan(task), "second-run")  # a new run id is a new intent: it ships the next paid orders
    assert other["replayed"] == 0 and state(rt.conn) != before


def test_rejected_program_applies_nothing(tmp_path):
    rt = runtime(tmp_path, "orders")
    before = state(rt.conn)
    bad = copy.deepcopy(plan(TASKS["ship_paid_4"]))
    bad["body"]["seq"][1]["do"]["seq"][1]["retry"].pop("key")  # a write without idempotency key
    out = ProgramExecutor(rt).run(bad, "x")
    assert out["status"] == "rejected" and out["calls"] == 0
    assert "idempotency key" in out["error"]["message"]
    assert state(rt.conn) == before


ABUSE = {
    "file access (WASI path_open)": ('(module (import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 i32 '
                                     'i32 i32 i64 i64 i32 i32) (result i32))) (func (export "run") (result i32) '
                                     'i32.const 0))', "rejected", "undeclared host import"),
    "network access (undeclared sock_connect)": ('(module (import "env" "sock_connect" (func (param i32) (result i32)))'
                                                 ' (func (export "run") (result i32) i32.const 0))', "rejected",
                                                 "undeclared host import"),
    "infinite loop": ('(module (func (export "run") (result i32) (loop $l br $l) i32.const 0))', "trapped",
                      "fuel exhausted"),
    "deep recursion": ('(module (func $f (export "run") (result i32) call $f))', "trapped", "stack"),
    "memory bomb": ('(module (memory 1) (func (export "run") (result i32) (loop $l (br_if $l (i32.ne (memory.grow '
                    '(i32.const 1024)) (i32.const -1)))) (i32.store (i32.const 1000000000) (i32.const 1)) '
                    'i32.const 0))', "trapped", "memory"),
    "oversized output (unbounded list)": (
        '(module (import "toolpro" "value" (func $v (param i32 i32 i32 i32) (result i32))) (func (export "run") '
        '(result i32) (local $l i32) (local.set $l (call $v (i32.const 8) (i32.const 0) (i32.const 0) (i32.const 0)))'
        ' (loop $x (drop (call $v (i32.const 9) (local.get $l) (i32.const 0) (i32.const 0))) (br $x)) i32.const 0))',
        "trapped", "host limit"),
}


@pytest.mark.parametrize("name", list(ABUSE))
def test_sandbox_contains_abuse_and_service_keeps_serving(tmp_path, name):
    wat, status, reason = ABUSE[name]
    rt = runtime(tmp_path, "travel")
    before = state(rt.conn)
    ex = ProgramExecutor(rt)
    ex.sandbox.limits = SandboxLimits(fuel=2_000_000)
    out = ex.run_module(wat, "abuse")
    assert out["status"] == status and reason in out["error"]["message"], out
    assert state(rt.conn) == before
    assert rt.call("get_flight", {"flight_id": 1})[0]["id"] == 1  # still serving


def test_new_abuse_attempts_are_contained_in_process(tmp_path):
    """The attempts added to the abuse table: each ends as a typed, non-retryable report, never an exception."""
    from envs.services.programs.program import TRANSIENT
    from sim_benchmarks.studies.toolpro.abuse import MODULES, PROGRAMS, _packed_deep

    rt = runtime(tmp_path, "travel")
    before = state(rt.conn)
    ex = ProgramExecutor(rt, ExecutorLimits(sandbox=SandboxLimits(fuel=20_000_000, wall_s=0.5)))
    wall = "infinite loop of host sleeps in the (start) function (wall clock)"
    attempts = [("run_module", MODULES[n]) for n in (wall, "integer doubled past 4300 digits, returned",
                                                     "list pushed into itself, returned",
                                                     "two lists pushed into each other, returned",
                                                     "lists nested 100 000 deep, returned")]
    attempts += [("run", p.get("program") or _packed_deep(300_000)) for n, p in PROGRAMS.items()
                 if "nested" in n or "floats" in n]
    for kind, payload in attempts:
        out = ex.run_module(payload, "a") if kind == "run_module" else ex.run(payload, "a")
        assert out["status"] in ("rejected", "trapped"), out
        assert out["error"]["kind"] not in TRANSIENT and out["error"]["message"], out
        json.dumps(out, allow_nan=False)  # the report itself is plain JSON
    assert ex.run_module(MODULES[wall], "w")["error"]["message"] == "wall-clock deadline"
    assert state(rt.conn) == before
    assert rt.call("get_flight", {"flight_id": 1})[0]["id"] == 1


def test_program_nesting_is_bounded_without_recursion():
    deep: dict = {"lit": 1}
    for _ in range(5000):
        deep = {"not": deep}
    with pytest.raises(ProgramError, match="nests deeper than"):
        parse_program({"service": "travel", "body": {"return": deep}})
    shallow = {"lit": 1}
    for _ in range(100):
        shallow = {"not": shallow}
    assert parse_program({"service": "travel", "body": {"return": shallow}}).service == "travel"
