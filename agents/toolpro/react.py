"""The stepwise baseline: a ReAct-style tool-calling loop in LangGraph, one MCP round trip per tool call.

``reason`` decides the next tool call (an ``AIMessage`` with ``tool_calls``) or the final answer; ``act`` makes the
call over MCP and appends the ``ToolMessage``. The decisions come from the same constructed program, interpreted
client-side one call at a time (:func:`envs.services.programs.interpreter.steps`) — no language model — so stepwise and
program runs make the same calls with the same idempotency keys and differ only in where the calls are made from.
"""

from __future__ import annotations

import json
import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from agents.toolpro import connection
from envs.services.programs.interpreter import ProgramFailure, ToolFailure, ToolRequest, steps
from envs.services.programs.program import Program
from envs.services.tools import ServiceError


class ReactState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], operator.add]
    request: dict[str, Any] | None
    outcome: Any
    error: list[str] | None
    done: bool
    status: str
    result: Any
    failure: str
    calls: int
    reconnects: int
    journal_replayed: int


def run_stepwise(program: Program, deployment: dict[str, Any], run_id: str, keep_messages: bool = False
                 ) -> dict[str, Any]:
    """Run ``program`` stepwise over MCP; returns status, result, calls, reconnects, journal replays (and messages
    if asked)."""
    gen = steps(program)
    started = [False]

    def reason(state: ReactState) -> ReactState:
        try:
            if not started[0]:
                started[0] = True
                req = next(gen)
            elif state.get("error"):
                kind, message = state["error"]  # type: ignore[misc]
                req = gen.throw(ToolFailure(kind, message))
            else:
                req = gen.send(state.get("outcome"))
        except StopIteration as stop:
            return {"done": True, "status": "ok", "result": stop.value, "request": None,
                    "messages": [AIMessage(content=json.dumps(stop.value))] if keep_messages else []}
        except (ToolFailure, ProgramFailure) as exc:
            return {"done": True, "status": "failed", "failure": str(exc), "request": None, "messages": []}
        call_id = f"call_{state.get('calls', 0)}"
        msg = AIMessage(content="", tool_calls=[{"name": req.tool, "args": req.args, "id": call_id}])
        return {"request": {"tool": req.tool, "args": req.args, "key": req.key, "id": call_id},
                "messages": [msg] if keep_messages else []}

    def act(state: ReactState) -> ReactState:
        req = state["request"]
        assert req is not None
        key = None if req["key"] is None else f"{run_id}:{req['key']}"
        out: ReactState = {"calls": state.get("calls", 0) + 1, "error": None, "outcome": None}
        try:
            result, reconnects, replayed = connection.call(deployment, req["tool"], req["args"], key)
            out["outcome"] = result
            out["reconnects"] = state.get("reconnects", 0) + reconnects
            out["journal_replayed"] = state.get("journal_replayed", 0) + int(replayed)
            content = json.dumps(result)
        except ServiceError as exc:
            out["error"] = [exc.kind, exc.message]
            content = f"{exc.kind}: {exc.message}"
        if keep_messages:
            out["messages"] = [ToolMessage(content=content, tool_call_id=req["id"])]
        return out

    graph = StateGraph(ReactState)
    graph.add_node("reason", reason)
    graph.add_node("act", act)
    graph.add_edge(START, "reason")
    graph.add_conditional_edges("reason", lambda s: END if s.get("done") else "act", ["act", END])
    graph.add_edge("act", "reason")
    final = graph.compile().invoke({"messages": [], "calls": 0, "reconnects": 0, "journal_replayed": 0},
                                   {"recursion_limit": 2 * 10_000 + 10})
    out = {"status": final.get("status", "failed"), "result": final.get("result"), "calls": final.get("calls", 0),
           "reconnects": final.get("reconnects", 0), "journal_replayed": final.get("journal_replayed", 0)}
    if final.get("failure"):
        out["error"] = final["failure"]
    if keep_messages:
        out["messages"] = final["messages"]
    return out


__all__ = ["ToolRequest", "run_stepwise"]
