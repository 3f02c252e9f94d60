"""Next-token decision agents: predictors of the opponent's next action, best response, Hedge, robustification."""

from policies.next_token.agents import (
    BestResponseAgent,
    HedgeAgent,
    RepeatedGameAgent,
    RobustAgent,
    WindowedRobustAgent,
    hedge_eta,
    hedge_regret_bound,
    switch_probability_bound,
    tau_schedule,
)
from policies.next_token.predictors import HiddenBiasBayesPredictor, NGramPredictor, Predictor

__all__ = [
    "BestResponseAgent", "HedgeAgent", "RepeatedGameAgent", "RobustAgent", "WindowedRobustAgent",
    "HiddenBiasBayesPredictor", "NGramPredictor", "Predictor", "hedge_eta", "hedge_regret_bound",
    "switch_probability_bound", "tau_schedule",
]
