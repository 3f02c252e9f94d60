"""The ToolPro graph's edges show its control flow; the env's observation says what to deploy, not how."""

from __future__ import annotations

from agents.toolpro.graph import build_agent
from envs.services.env import WorkflowEnv, WorkflowEnvOptions
from envs.services.server import add_server_arguments, server_flags


def test_the_program_to_stepwise_fallback_is_a_conditional_edge():
    edges = {(e.source, e.target, e.conditional) for e in build_agent("auto").get_graph().edges}
    assert {("choose", "program", True), ("choose", "stepwise", True),  # the mode choice
            ("program", "observe", True), ("program", "stepwise", True),  # the fallback
            ("stepwise", "observe", False)} <= edges
    assert not any(e[0] == "program" and not e[2] for e in edges)  # no unconditional way out of program


def test_the_observation_carries_fault_settings_and_the_server_flags_come_from_them(tmp_path):
    import argparse

    env = WorkflowEnv("cheapest_flight_AMS_BER", WorkflowEnvOptions.from_options(
        {"db_dir": str(tmp_path), "error_rate": 0.05, "crash_rate": 0.1, "fault_seed": 7}))
    obs, _ = env.reset(seed=3)
    assert "server_flags" not in obs and env.observation_space.contains(obs)
    flags = server_flags(obs)
    p = argparse.ArgumentParser()
    add_server_arguments(p)
    args = p.parse_args(flags)  # the server's own parser reads them back
    assert (args.service, args.db, args.error_rate, args.crash_rate, args.fault_seed) == (
        "travel", str(tmp_path / "travel.db"), 0.05, 0.1, 7)
    assert flags == ["--service", "travel", "--db", str(tmp_path / "travel.db"), "--error-rate", "0.05",
                     "--timeout-rate", "0.0", "--timeout-s", "0.5", "--crash-rate", "0.1", "--fault-seed", "7"]
    env.close()
