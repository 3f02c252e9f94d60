"""Crash recovery over the real MCP stdio transport: a SIGKILLed site, a resent program, each write exactly once."""

from __future__ import annotations

import sqlite3

import pytest

from agents.toolpro import connection
from agents.toolpro.graph import ToolProPolicy
from envs.services.env import WorkflowEnv, WorkflowEnvOptions
from envs.services.runtime import FaultPlan, ServiceRuntime, create_database
from envs.services.tools import ServiceError


def _fault_pattern(db, plan: FaultPlan, calls: int = 40) -> list[bool]:
    runtime = ServiceRuntime("orders", db, plan)
    out = []
    try:
        for _ in range(calls):
            try:
                runtime.call("list_orders", {"status": "paid", "limit": 1})
                out.append(False)
            except ServiceError:
                out.append(True)
    finally:
        runtime.close()
    return out


def test_a_restarted_server_draws_fresh_faults(tmp_path):
    db = create_database(tmp_path / "orders.db", "orders", 0)
    first = _fault_pattern(db, FaultPlan(error_rate=0.5, seed=3))
    assert first == _fault_pattern(db, FaultPlan(error_rate=0.5, seed=3))  # seeded: reproducible
    assert first != _fault_pattern(db, FaultPlan(error_rate=0.5, seed=3, incarnation=1))  # not a replayed schedule


def test_program_survives_server_kills_with_each_write_exactly_once(tmp_path):
    # Seeded so that the site is SIGKILLed twice during the program (one kill right after a write's commit); the
    # old client gave up with 4 of the 10 writes missing. The final state must equal the reference exactly:
    # a duplicated shipment or a lost one both fail the check.
    env = WorkflowEnv("ship_paid_9", WorkflowEnvOptions(rtt_ms=0, error_rate=0.1, crash_rate=0.2, fault_seed=2,
                                                       db_dir=str(tmp_path)))
    policy = ToolProPolicy("program")
    try:
        obs, _ = env.reset(seed=0)
        answer = policy.act(obs)
        _, reward, _, _, info = env.step(answer)
        starts = connection.site(obs).starts
    finally:
        connection.close_all()
    ep = policy.episode_info()
    assert answer["status"] == "ok" and info["success"] and info["state_diff"] == 0 and reward == 1.0
    assert ep["mode"] == "program" and starts == ep["reconnects"] + 1 >= 3
    assert ep["replayed"] >= 1 and ep["journal_replayed"] >= 1  # run log and journal both answered the resend
    assert ep["round_trips"] > 1 and ep["bytes"] > 0  # traffic to the killed servers still counts
    conn = sqlite3.connect(env.db_path)
    try:
        journalled = conn.execute("SELECT COUNT(*) FROM _journal").fetchone()[0]
    finally:
        conn.close()
    assert journalled == 9  # one journal row per shipment, however many times the program was sent


@pytest.mark.parametrize("bad", ["crash_rate=1.5", "fault_seed=x"])
def test_bad_fault_option_is_a_config_error(bad):
    key, value = bad.split("=")
    with pytest.raises(Exception, match=key):
        WorkflowEnvOptions.from_options({key: value})


@pytest.mark.parametrize("argv, word", [(["--seeds", "x"], "--seeds"), (["--tasks", "no_such_task"], "no_such_task"),
                                        (["--crash-rate", "2"], "crash_rate")])
def test_fault_study_bad_input_is_one_line_exit_2(argv, word, capsys):
    from sim_benchmarks.studies.toolpro import faults

    assert faults.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and word in err
