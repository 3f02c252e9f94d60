"""Declares the ``toolpro`` suite (workflow tasks over MCP services) and its policies.

An episode is one workflow task on a freshly seeded database; ``success`` means the service's final database state
equals the task's reference state. Each record also carries end-to-end latency, client↔server bytes, round trips,
tool calls and the mode used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.toolpro.graph import ToolProPolicy
from agents.toolpro.options import ToolProOptions
from envs.services.env import WorkflowEnv, WorkflowEnvOptions
from envs.services.workflows import TASKS
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec, SuiteSpec

SUITE = "toolpro"


def make_env(task: str, options: Mapping[str, Any]) -> WorkflowEnv:
    """A workflow env; options: rtt_ms, jitter_ms, error_rate, timeout_rate, timeout_s, crash_rate, db_dir."""
    return WorkflowEnv(task, WorkflowEnvOptions.from_options(options))


def episode_metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    """success from the final-state check; the policy adds latency, bytes, round trips and calls."""
    return {"success": bool(info.get("success", False)), "correct_object": False, "wrong_object": False,
            "return": float(total_return), "state_diff": int(info.get("state_diff", -1)),
            "extra_rows": int(info.get("extra_rows", -1)), "missing_rows": int(info.get("missing_rows", -1)),
            "changed_rows": int(info.get("changed_rows", -1)), "answered": bool(info.get("answered", False))}


def _policy(ctx: PolicyContext, mode: str) -> ToolProPolicy:
    opts = ToolProOptions.from_options(ctx.options)
    return ToolProPolicy(mode, opts.constructor, opts.constructor_seed)  # type: ignore[arg-type]


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
    name=SUITE,
    description="workflows over three MCP services (travel, orders, tickets): tool programs in a wasm sandbox vs "
                "stepwise calling",
    tasks={name: t.instruction for name, t in TASKS.items()},
    make_env=make_env,
    default_policies=("toolpro", "stepwise", "program_only"),
    default_episodes=1,
    episode_metrics=episode_metrics,
))

for _name, _mode, _desc in (
    ("toolpro", "auto", "LangGraph ToolPro agent: checked program run in a wasm sandbox next to the service, or "
                        "stepwise, whichever the cost profile predicts is faster"),
    ("program_only", "program", "always ship the checked program to the service (one round trip)"),
    ("stepwise", "stepwise", "ReAct-style baseline: one MCP round trip per tool call"),
):
    SPECS.append(PolicySpec(name=_name, description=_desc, factory=lambda ctx, m=_mode: _policy(ctx, m),
                               suites=(SUITE,), options_type=ToolProOptions))
