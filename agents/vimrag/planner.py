"""Planner backends: which action the agent takes next, from the question and the DAG memory.

* :class:`LearnedPlanner`: a small MLP action policy over (question embedding, memory summary), trained with
  GGPO or trajectory credit (:mod:`agents.vimrag.ggpo`); the default, ~0.1 ms per decision.
* :class:`ChatPlanner`: any langchain chat model; it is shown the question, the memory and the valid actions and
  must reply with one action name.
* :class:`ConstrainedLMPlanner`: a local causal LM (the offline SmolLM2-135M) shown the same prompt, its reply
  constrained to the valid action names.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from torch import nn

from agents.vimrag.memory import DagMemory
from envs.atomic_io import atomic_path
from envs.errors import ConfigError
from perception.lm_choice import LMChooser

ACTIONS: tuple[str, ...] = ("search_text", "search_images", "follow_links", "similar_images", "read", "answer")
RETRIEVE_ACTIONS = ("search_text", "search_images", "follow_links", "similar_images")
STATE_DIM = 9 + len(ACTIONS) + 1
Q_DIM = 384


def unexpanded_text(memory: DagMemory, expanded: list[int]) -> list[int]:
    """Text nodes whose links have not been followed yet, best retrieval score first."""
    nodes = [n for n in memory.of_kind("text") if n.node_id not in expanded]
    return [n.node_id for n in sorted(nodes, key=lambda n: (-n.score, n.node_id))]


def action_mask(memory: DagMemory, expanded: list[int]) -> np.ndarray:
    """Which actions are possible now (follow needs an unexpanded document, image actions need an image)."""
    has_images = bool(memory.of_kind("image"))
    return np.array([True, True, bool(unexpanded_text(memory, expanded)), has_images, has_images, True])


def state_features(memory: DagMemory, expanded: list[int], step: int, max_steps: int,
                   history: list[str]) -> np.ndarray:
    """A fixed-size summary of the memory and the action history (what the learned planner sees besides q)."""
    images = memory.of_kind("image")
    hyp = memory.latest("hypothesis")
    linked = [n for n in images if memory.text_ancestors(n.node_id) > 0]
    deepest = max((memory.text_ancestors(n.node_id) for n in images), default=0)
    last = np.zeros(len(ACTIONS) + 1, np.float32)
    last[ACTIONS.index(history[-1]) if history else len(ACTIONS)] = 1.0
    base = np.array([
        float(bool(memory.of_kind("text"))), float(bool(unexpanded_text(memory, expanded))), min(len(images), 6) / 6,
        float(bool(linked)), float(deepest >= 2), float(hyp is not None), hyp.score if hyp is not None else 0.0,
        step / max_steps, history.count("follow_links") / 3,
    ], np.float32)
    return np.concatenate([base, last])


class PolicyNet(nn.Module):
    """MLP: [question embedding, state features] -> action logits."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.q = nn.Sequential(nn.Linear(Q_DIM, 32), nn.Tanh())
        self.body = nn.Sequential(nn.Linear(32 + STATE_DIM, hidden), nn.Tanh(), nn.Linear(hidden, len(ACTIONS)))

    def forward(self, q: torch.Tensor, state: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked log-probabilities over ACTIONS."""
        logits = self.body(torch.cat([self.q(q), state], -1))
        return logits.masked_fill(~mask, -1e9).log_softmax(-1)


class LearnedPlanner:
    """The trained action policy; greedy unless given a generator to sample with."""

    name = "learned"

    def __init__(self, net: PolicyNet) -> None:
        self.net = net.eval()

    @torch.no_grad()
    def choose(self, q_emb: np.ndarray, question: str, memory: DagMemory, expanded: list[int], step: int,
               max_steps: int, history: list[str], rng: np.random.Generator | None = None) -> str:
        """The next action name."""
        mask = action_mask(memory, expanded)
        logp = self.net(torch.from_numpy(np.asarray(q_emb, np.float32))[None],
                        torch.from_numpy(state_features(memory, expanded, step, max_steps, history))[None],
                        torch.from_numpy(mask)[None])[0].numpy()
        if rng is None:
            return ACTIONS[int(np.argmax(logp))]
        p = np.exp(logp - logp.max())
        p = p / p.sum()
        return ACTIONS[int(rng.choice(len(ACTIONS), p=p))]

    def save(self, path: Path) -> None:
        """Write the weights (atomic replace)."""
        with atomic_path(path) as tmp:
            torch.save(self.net.state_dict(), tmp)

    @classmethod
    def load(cls, path: Path) -> LearnedPlanner:
        """Read weights written by :meth:`save` (ConfigError when unreadable)."""
        net = PolicyNet()
        try:
            net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        except Exception as exc:
            raise ConfigError(f"cannot load the vimrag planner {str(path)!r}: {type(exc).__name__}: {exc}") from None
        return cls(net)


def describe_memory(memory: DagMemory, payload) -> str:
    """A compact text view of the memory for a chat model: one line per evidence node with its parents."""
    lines = []
    for n in memory.nodes:
        if n.kind in ("text", "image", "hypothesis"):
            text = payload(n.ref) if n.kind != "hypothesis" else f"answer guess {n.ref} ({n.score:.2f})"
            lines.append(f"[{n.node_id}] {n.kind} {n.ref} <- {list(n.parents)}: {text[:160]}")
    return "\n".join(lines) or "(empty)"


def planner_messages(valid: list[str], question: str, memory: DagMemory, payload, step: int, max_steps: int,
                     history: list[str]) -> tuple[str, str]:
    """(system, user) prompt shared by the language-model planners: the valid actions, the question, the memory."""
    system = ("You are the planner of a retrieval agent. Reply with exactly one action name from: "
              + ", ".join(valid) + ". search_text: search documents; search_images: search image captions; "
              "follow_links: open what the best unopened document refers to; similar_images: images that look "
              "like the last one; read: look at the images; answer: give the answer.")
    user = f"Question: {question}\nStep {step} of {max_steps}. Actions so far: {history}\nMemory:\n" + \
        describe_memory(memory, payload)
    return system, user


def valid_actions(memory: DagMemory, expanded: list[int]) -> list[str]:
    """The action names :func:`action_mask` allows now, in ACTIONS order."""
    return [a for a, ok in zip(ACTIONS, action_mask(memory, expanded), strict=True) if ok]


class ChatPlanner:
    """A langchain chat model as planner: it must answer with one valid action name (else: the first valid one)."""

    name = "chat"

    def __init__(self, model, payload) -> None:
        self.model = model
        self.payload = payload
        self.replies: list[str] = []

    def choose(self, q_emb: np.ndarray, question: str, memory: DagMemory, expanded: list[int], step: int,
               max_steps: int, history: list[str], rng: np.random.Generator | None = None) -> str:
        """Ask the model; parse the first valid action name in its reply."""
        from langchain_core.messages import HumanMessage, SystemMessage

        valid = valid_actions(memory, expanded)
        system, user = planner_messages(valid, question, memory, self.payload, step, max_steps, history)
        reply = self.model.invoke([SystemMessage(system), HumanMessage(user)])
        text = str(getattr(reply, "content", reply))
        self.replies.append(text)
        found = [(m.start(), a) for a in valid for m in [re.search(rf"\b{a}\b", text)] if m]
        return min(found)[1] if found else valid[0]


class ConstrainedLMPlanner:
    """A local causal LM (e.g. SmolLM2-135M-Instruct) as planner, its decoding constrained to the valid actions.

    The chat prompt is encoded once; each valid action name is then scored as a continuation of it (mean token
    log-probability, so multi-token names are not penalised for their length, see :class:`perception.lm_choice.
    LMChooser`), and the best one is taken: the model can only ever answer with a valid action, deterministically.
    """

    name = "lm"

    def __init__(self, model, tokenizer, payload) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.payload = payload
        self.scores: list[dict[str, float]] = []  # per decision, for inspection

    def action_scores(self, system: str, user: str, valid: list[str]) -> dict[str, float]:
        """Mean log-probability of each action name as the assistant's reply."""
        chooser = LMChooser(self.model, self.tokenizer)
        chooser.start(system, user)
        return dict(zip(valid, chooser.scores(valid), strict=True))

    def choose(self, q_emb: np.ndarray, question: str, memory: DagMemory, expanded: list[int], step: int,
               max_steps: int, history: list[str], rng: np.random.Generator | None = None) -> str:
        """The valid action the model finds most likely as its reply."""
        valid = valid_actions(memory, expanded)
        system, user = planner_messages(valid, question, memory, self.payload, step, max_steps, history)
        scores = self.action_scores(system, user, valid)
        self.scores.append(scores)
        return max(valid, key=lambda a: (scores[a], -valid.index(a)))
