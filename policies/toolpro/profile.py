"""The profile-driven policy: per-service cost estimates, predicted latency of each mode, and the choice.

Measured per service: ``ping_s`` (one MCP round trip through the link with a do-nothing tool), ``tool_s`` (the
server-side time of one tool call, from program reports and stepwise timings) and ``program_s`` (the fixed cost of
one ``run_program``: upload, check, compile to wasm, instantiate — measured with an empty program). With ``n`` the
program's call count when no retry fires:

    stepwise ≈ n · (ping_s + tool_s)            program ≈ ping_s + program_s + n · tool_s

and the cheaper prediction wins. Each finished episode updates the estimates (exponential moving averages), so a
changed network or service load moves the choice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServiceProfile:
    """Running cost estimates (seconds) for one service as seen from the agent."""

    ping_s: float = 0.0
    tool_s: float = 0.005
    program_s: float = 0.05
    alpha: float = 0.3  # weight of a new observation
    observations: int = 0

    def _blend(self, old: float, new: float) -> float:
        return new if self.observations == 0 else (1 - self.alpha) * old + self.alpha * new

    def predict_stepwise(self, calls: int) -> float:
        return calls * (self.ping_s + self.tool_s)

    def predict_program(self, calls: int) -> float:
        return self.ping_s + self.program_s + calls * self.tool_s

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
        """Update from a finished program: its server-side tool time and its fixed cost."""
        if calls > 0:
            self.tool_s = self._blend(self.tool_s, server_call_s / calls)
        self.program_s = self._blend(self.program_s, max(0.0, latency_s - self.ping_s - server_call_s))
        self.observations += 1

    def observe_stepwise(self, latency_s: float, calls: int) -> None:
        """Update the per-call server time from a finished stepwise run."""
        if calls > 0:
            self.tool_s = self._blend(self.tool_s, max(0.0, latency_s / calls - self.ping_s))
        self.observations += 1
