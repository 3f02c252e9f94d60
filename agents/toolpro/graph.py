"""The ToolPro agent as a LangGraph: plan → construct → choose → program | stepwise → observe → answer.

    START -> plan -> construct -> choose --(program)--> program --(ran)--> observe -> answer -> END
                                         --(stepwise)--> stepwise -> observe
                                          program --(rejected, trapped: the fallback)--> stepwise

- plan: read the task's intent (template and parameters) from the observation.
- construct: build the program (the deterministic planner, or the offline SmolLM2 with decoding constrained to the
  program grammar and the tool schemas, :mod:`policies.toolpro.constructor`) and check it against the tool
  declarations the service advertises over MCP (effects and schemas come from the server, not from local code).
- choose: the profile-driven policy predicts both modes' latency (``mode="auto"``), or a mode is forced.
- program: send the whole program in one ``run_program`` call (resent with the same run id to a restarted server
  after a lost one, while the run keeps progressing: logged calls replay from the run log and committed writes from
  the journal, see :func:`agents.toolpro.connection.run_program`). A program the site rejects or stops takes the
  fallback edge to stepwise, with the same idempotency keys, so nothing is applied twice.
- stepwise: the ReAct baseline, one tool call per round trip.
- observe: update the cost profile and the episode metrics; answer: the final action for the env.
"""

from __future__ import annotations

import time
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph

from agents.toolpro import connection
from agents.toolpro.react import run_stepwise
from envs.errors import choice_error
from envs.services.programs.checker import CheckReport, check
from envs.services.programs.program import Program, ProgramError, pack_program, parse_program
from envs.services.tools import ServiceError
from envs.services.workflows import get_task
from policies.toolpro.constructor import Chooser, ProgramConstructor, RandomChooser
from policies.toolpro.planner import plan

Mode = Literal["auto", "program", "stepwise"]
FALLBACK = ("rejected", "trapped")  # program statuses meaning the site would not run it: go stepwise


class AgentState(TypedDict, total=False):
    obs: dict[str, Any]
    task: Any
    program: Program
    report: CheckReport
    mode: str
    predicted: dict[str, float]
    outcome: dict[str, Any]
    exec_s: float
    construct_s: float
    answer: dict[str, Any]


def declarations(client_tools: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool declarations as the checker wants them, from the server's MCP tool list."""
    return {name: {"effect": t["effect"], "input_schema": t["input_schema"], "output_schema": t.get("output_schema")}
            for name, t in client_tools.items() if t.get("effect") in ("pure", "read", "write", "idempotent_write")}


def profile_site(deployment: dict[str, Any], probes: int = 3) -> None:
    """Calibrate the site's cost profile once: ping round trips and the fixed cost of an empty program."""
    s = connection.site(deployment)
    if s.profiled:
        return
    pings, empties = [], []
    empty = {"service": deployment["service"], "body": {"return": {"lit": 0}}}
    for i in range(probes):
        t0 = time.perf_counter()
        connection.call(deployment, "ping", {})
        pings.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        connection.call(deployment, "run_program", {"packed": pack_program(empty), "run_id": f"probe-{i}",
                                                    "report": "brief"})
        empties.append(time.perf_counter() - t0)
    s.profile.calibrate(pings, empties)
    s.profiled = True


def build_agent(mode: Mode = "auto", chooser: Chooser | None = None, cache: dict[str, Any] | None = None):
    """The compiled LangGraph of the ToolPro agent.

    ``chooser``: None builds programs with the deterministic planner; otherwise a :class:`ProgramConstructor`
    driven by it builds them from the task's instruction and parameters and the server's tool declarations.
    ``cache`` (task name -> program) keeps a constructed program for the task's later episodes: construction does
    not depend on the database, so a deterministic chooser would build the same program again.
    """

    def plan_node(state: AgentState) -> AgentState:
        return {"task": get_task(state["obs"]["task"])}

    def construct(state: AgentState) -> AgentState:
        client = connection.site(state["obs"]).client
        task, decls = state["task"], declarations(client.tools)
        t0 = time.perf_counter()
        if chooser is None:
            source = plan(task)
        elif cache is not None and task.name in cache:
            source = cache[task.name]
        else:
            tools = {n: {**d, "description": client.tools[n].get("description", "")} for n, d in decls.items()}
            source = ProgramConstructor(chooser).construct(task.instruction, task.params, task.service, tools).program
            if cache is not None:
                cache[task.name] = source
        program = parse_program(source)
        return {"program": program, "report": check(program, decls, task.service),
                "construct_s": time.perf_counter() - t0}

    def choose(state: AgentState) -> AgentState:
        profile = connection.site(state["obs"]).profile
        n = state["report"].nominal_calls
        predicted = {"program": profile.predict_program(n), "stepwise": profile.predict_stepwise(n)}
        return {"mode": profile.choose(n) if mode == "auto" else mode, "predicted": predicted}

    def after_choose(state: AgentState) -> str:
        return "program" if state["mode"] == "program" else "stepwise"

    def run_as_program(state: AgentState) -> AgentState:
        obs, program = state["obs"], state["program"]
        t0 = time.perf_counter()
        try:
            report, reconnects = connection.run_program(obs, program.to_json(), obs["run_id"])
        except ServiceError as exc:
            report, reconnects = {"status": "failed", "error": {"kind": exc.kind, "message": exc.message},
                                  "calls": 0}, 0
        return {"outcome": {**report, "reconnects": reconnects, "mode": "program"},
                "exec_s": time.perf_counter() - t0}

    def after_program(state: AgentState) -> str:
        return "stepwise" if state["outcome"]["status"] in FALLBACK else "observe"

    def run_stepwise_node(state: AgentState) -> AgentState:
        obs, program = state["obs"], state["program"]
        t0 = time.perf_counter()
        outcome = {**run_stepwise(program, obs, obs["run_id"]), "mode": "stepwise"}
        exec_s = time.perf_counter() - t0
        refused = state.get("outcome")  # set when this is the fallback of a program the site would not run
        if refused is not None:
            outcome.update(fallback=refused["status"], program_calls=refused.get("calls", 0))
            exec_s += state["exec_s"]
        return {"outcome": outcome, "exec_s": exec_s}

    def observe(state: AgentState) -> AgentState:
        profile = connection.site(state["obs"]).profile
        o = state["outcome"]
        if o.get("reconnects", 0):  # a server restart's cold start is not what either mode costs
            return {}
        if o["mode"] == "program" and o["status"] == "ok":
            profile.observe_program(state["exec_s"], o.get("calls", 0), o.get("call_ms", 0.0) / 1000)
        elif o["mode"] == "stepwise" and o["status"] == "ok" and not o.get("fallback"):
            profile.observe_stepwise(state["exec_s"], o.get("calls", 0))
        return {}

    def answer(state: AgentState) -> AgentState:
        o = state["outcome"]
        return {"answer": {"status": o["status"], "result": o.get("result"), "error": o.get("error")}}

    g = StateGraph(AgentState)
    for name, fn in (("plan", plan_node), ("construct", construct), ("choose", choose), ("program", run_as_program),
                     ("stepwise", run_stepwise_node), ("observe", observe), ("answer", answer)):
        g.add_node(name, fn)
    g.add_edge(START, "plan")
    for a, b in (("plan", "construct"), ("construct", "choose"), ("stepwise", "observe"), ("observe", "answer"),
                 ("answer", END)):
        g.add_edge(a, b)
    g.add_conditional_edges("choose", after_choose, ["program", "stepwise"])
    g.add_conditional_edges("program", after_program, ["stepwise", "observe"])  # the fallback edge
    return g.compile()


def make_chooser(constructor: str, seed: int = 0) -> Chooser | None:
    """The chooser for a ``constructor`` option value: None (planner), SmolLM2 (loaded once) or random."""
    if constructor == "planner":
        return None
    if constructor == "random":
        return RandomChooser(seed)
    if constructor == "smollm2":
        from perception.lm_choice import LMChooser
        from perception.smollm2 import load_smollm2

        return LMChooser(*load_smollm2())
    raise choice_error("toolpro constructor", constructor, ["planner", "smollm2", "random"])


class ToolProPolicy:
    """The harness policy: one ``act`` runs the whole workflow through the agent graph and returns the answer.

    ``mode``: ``auto`` (profile-driven, the ``toolpro`` policy), ``program`` (always a program) or ``stepwise``
    (the ReAct baseline). ``episode_info`` reports latency, client-side traffic, round trips and calls.
    """

    def __init__(self, mode: Mode = "auto", constructor: str = "planner", constructor_seed: int = 0) -> None:
        self.mode = mode
        self.constructor = constructor
        self.programs: dict[str, Any] = {}  # task -> constructed program (see build_agent)
        self.graph = build_agent(mode, make_chooser(constructor, constructor_seed), self.programs)
        self._info: dict[str, Any] = {}

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        self._info = {}

    def act(self, obs: dict[str, Any]) -> dict[str, Any]:
        s = connection.site(obs)
        if self.mode == "auto":
            profile_site(obs)
        s.client  # noqa: B018 - start the server before the clock: a cold start is not episode latency
        before, starts = s.meter.snapshot(), s.starts
        t0 = time.perf_counter()
        try:
            final = self.graph.invoke({"obs": obs})
        except ProgramError as exc:
            final = {"answer": {"status": "rejected", "error": str(exc)}, "outcome": {"mode": "none", "calls": 0}}
        latency = time.perf_counter() - t0
        after = s.meter.snapshot()  # one meter per site, across restarts: a crashed server's traffic counts
        o = final["outcome"]
        self._info = {
            "latency_s": latency, "mode": o.get("mode", "none"), "program": o.get("mode") == "program",
            "calls": int(o.get("calls", 0)) + int(o.get("program_calls", 0)),
            "bytes": int(after["bytes_total"] - before["bytes_total"]),
            "bytes_sent": int(after["bytes_sent"] - before["bytes_sent"]),
            "bytes_received": int(after["bytes_received"] - before["bytes_received"]),
            "round_trips": int(after["round_trips"] - before["round_trips"]),
            "replayed": int(o.get("replayed", 0)), "journal_replayed": int(o.get("journal_replayed", 0)),
            "reconnects": int(o.get("reconnects", 0)), "server_restarts": s.starts - starts,
            "predicted_program_s": final.get("predicted", {}).get("program", float("nan")),
            "predicted_stepwise_s": final.get("predicted", {}).get("stepwise", float("nan")),
            "constructor": self.constructor, "construct_s": float(final.get("construct_s", float("nan"))),
        }
        return final["answer"]

    def episode_info(self) -> dict[str, Any]:
        return dict(self._info)
