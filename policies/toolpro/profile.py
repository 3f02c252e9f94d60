"""The profile-driven policy: per-service cost estimates, predicted latency of each mode, and the choice.

Measured per service: ``ping_s`` (one MCP round trip through the link with a do-nothing tool), ``step_call_s`` (what
one stepwise tool call costs beyond the round trip: client and server processing of the call), ``program_call_s``
(the server-side time of one tool call inside a program, run-log write included, from program reports) and
``program_s`` (the fixed cost of one ``run_program``: upload, check, compile to wasm, instantiate — first measured
with an empty program). With ``n`` the program's call count when no retry fires:

    stepwise ≈ n · (ping_s + step_call_s)            program ≈ ping_s + program_s + n · program_call_s

and the cheaper prediction wins. The two per-call costs are kept apart because they are not the same work: a
program's call also logs its outcome for replay, a stepwise call also crosses the MCP stack. Each finished episode
updates the estimates of the mode it ran (exponential moving averages), so a changed network or service load moves
the choice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServiceProfile:
    """Running cost estimates (seconds) for one service as seen from the agent."""

    ping_s: float = 0.0
    step_call_s: float = 0.005
    program_call_s: float = 0.005
    program_s: float = 0.05
    alpha: float = 0.3  # weight of a new observation
    observations: int = 0
    stepwise_seen: int = 0
    program_seen: int = 0

    def _blend(self, old: float, new: float, seen: int) -> float:
        return new if seen == 0 else (1 - self.alpha) * old + self.alpha * new

    def predict_stepwise(self, calls: int) -> float:
        return calls * (self.ping_s + self.step_call_s)

    def predict_program(self, calls: int) -> float:
        return self.ping_s + self.program_s + calls * self.program_call_s

    def choose(self, calls: int) -> str:
        """``program`` or ``stepwise``: the mode with the lower predicted latency (ties go to stepwise)."""
        return "program" if self.predict_program(calls) < self.predict_stepwise(calls) else "stepwise"

    def calibrate(self, pings_s: list[float], empty_program_s: list[float]) -> None:
        """Set the round trip and the program overhead from probe timings (medians)."""
        self.ping_s = sorted(pings_s)[len(pings_s) // 2]
        probe = sorted(empty_program_s)[len(empty_program_s) // 2]
        self.program_s = max(0.0, probe - self.ping_s)
        self.observations = 1

    def observe_program(self, latency_s: float, calls: int, server_call_s: float) -> None:
        """Update from a finished program: its per-call server time and its fixed cost."""
        if calls > 0:
            self.program_call_s = self._blend(self.program_call_s, server_call_s / calls, self.program_seen)
        self.program_s = self._blend(self.program_s, max(0.0, latency_s - self.ping_s - server_call_s),
                                     self.program_seen + self.observations)
        self.program_seen += 1
        self.observations += 1

    def observe_stepwise(self, latency_s: float, calls: int) -> None:
        """Update the per-call cost beyond the round trip from a finished stepwise run."""
        if calls > 0:
            self.step_call_s = self._blend(self.step_call_s, max(0.0, latency_s / calls - self.ping_s),
                                           self.stepwise_seen)
        self.stepwise_seen += 1
        self.observations += 1
