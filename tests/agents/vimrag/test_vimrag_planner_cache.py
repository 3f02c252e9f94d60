"""The cached planner is the best on dev of several RL runs (ties: the earlier run), trained once per reader."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from agents.vimrag import stack as stack_mod
from agents.vimrag.planner import LearnedPlanner, PolicyNet


def _fake_stack(folder):
    corpus = SimpleNamespace(split=lambda name: [])
    return SimpleNamespace(kb=SimpleNamespace(corpus=corpus), tools=None, reader=None, folder=folder, reader_seed=0)


@pytest.mark.parametrize("dev, chosen", [((0.2, 0.7, 0.5, 0.7), 1), ((0.5, 0.5, 0.5, 0.5), 0),
                                         ((0.1, 0.2, 0.3, 0.4), 3)])
def test_the_run_with_the_best_dev_accuracy_is_kept(dev, chosen, tmp_path, monkeypatch) -> None:
    seeds, nets = [], []

    def fake_train(agent, train, dev_split, cfg, log=None):
        k = len(seeds)
        seeds.append(cfg.seed)
        with torch.random.fork_rng():
            torch.manual_seed(k)
            nets.append(PolicyNet())
        return LearnedPlanner(nets[-1]), [{"episodes": 0, "dev_accuracy": 0.0},
                                          {"episodes": cfg.episodes, "dev_accuracy": dev[k]}]

    monkeypatch.setattr(stack_mod, "train_planner", fake_train)
    stack = _fake_stack(tmp_path)
    planner = stack_mod.trained_planner(stack, "ggpo", seed=7)
    assert seeds == [7 + stack_mod.RESTART_SEED_STRIDE * k for k in range(stack_mod.PLANNER_RESTARTS)]
    assert planner.net is nets[chosen]
    saved = LearnedPlanner.load(stack_mod.planner_path(stack, "ggpo", 7))
    for a, b in zip(saved.net.state_dict().values(), nets[chosen].state_dict().values(), strict=True):
        assert torch.equal(a, b)
    # Cached: a second call trains nothing.
    monkeypatch.setattr(stack_mod, "train_planner", lambda *a, **k: pytest.fail("retrained a cached planner"))
    stack_mod.trained_planner(stack, "ggpo", seed=7)
