"""Constraint-guided program construction: whatever the chooser picks, the program passes the checker."""

from __future__ import annotations

import json

import pytest
import torch

from envs.errors import ConfigError
from envs.services.programs.checker import check
from envs.services.programs.program import parse_program
from envs.services.runtime import tool_specs
from envs.services.workflows import TASKS
from perception.lm_choice import LMChooser
from policies.toolpro.constructor import ProgramConstructor, RandomChooser, TaskLiterals


def decls(service: str) -> dict:
    return {n: s.public() for n, s in tool_specs(service).items()}


class ByteTokenizer:
    """Bytes as tokens, with a plain-text chat template (what the tiny random Llama reads)."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def apply_chat_template(self, messages, add_generation_prompt: bool, return_tensors: str):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + ("<assistant>" if add_generation_prompt
                                                                            else "")
        return torch.tensor([self.encode(text)])

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": self.encode(text)}


def tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384)
    return LlamaForCausalLM(cfg).eval()


class Extreme:
    """Always the first or always the last option (the grammar's corners)."""

    def __init__(self, last: bool) -> None:
        self.last = last

    def start(self, system: str, user: str, prefix: str = "") -> None: ...

    def choose(self, options) -> int:
        return len(options) - 1 if self.last else 0

    def append(self, text: str) -> None: ...


def test_random_and_extreme_choices_always_give_checked_programs():
    for task in TASKS.values():
        for chooser in (RandomChooser(0), Extreme(False), Extreme(True)):
            built = ProgramConstructor(chooser).construct(task.instruction, task.params, task.service,
                                                          decls(task.service))
            report = check(parse_program(built.program), decls(task.service), task.service)
            assert report.call_bound <= 10_000 and built.text.rstrip().endswith("end")
            # no call in the top block repeats an earlier one exactly (result names aside)
            calls = [json.dumps({**s["retry"], "bind": None}, sort_keys=True) for s in built.program["body"]["seq"]
                     if "retry" in s]
            assert len(calls) == len(set(calls)), built.text


@pytest.mark.slow
def test_tiny_random_llama_never_yields_a_program_the_checker_rejects():
    tok = ByteTokenizer()
    for seed, name in enumerate(["cheapest_flight_AMS_BER", "basket_3", "triage_tech_high_5"]):
        task = TASKS[name]
        chooser = LMChooser(tiny_llama(seed), tok)
        built = ProgramConstructor(chooser).construct(task.instruction, task.params, task.service,
                                                      decls(task.service))
        check(parse_program(built.program), decls(task.service), task.service)
        assert built.decisions > 0 and chooser.tokens > 0


def test_values_offered_are_well_typed_and_from_the_task():
    seen: list[list[str]] = []

    class Recorder(RandomChooser):
        def choose(self, options) -> int:
            seen.append(list(options))
            return super().choose(options)

    task = TASKS["cheapest_flight_AMS_BER"]
    for seed in range(5):
        ProgramConstructor(Recorder(seed)).construct(task.instruction, task.params, "travel", decls("travel"))
    literals = {json.dumps(v) for v in ["AMS", "BER", "LIS", "PAR", "ROM", "MAD", "ann"]}
    for options in seen:
        for o in options:
            # a quoted literal offered anywhere is a task string or an enum value of the argument's schema
            if o.startswith('"'):
                assert o in literals or o.strip('"') in tool_specs("travel")["search_flights"].input_schema[
                    "properties"]["origin"]["enum"], o


def test_task_literals_come_from_instruction_and_parameters():
    lits = TaskLiterals.of("add the comment 'customer called back' to ticket 7", {"ticket": 7, "body": "hi",
                                                                                "names": ["a", "b"]})
    assert lits.ints == [7] and lits.strings == ["hi", "customer called back"] and lits.lists == {"names": ["a", "b"]}


def test_lm_chooser_tree_scores_equal_plain_forwards():
    model, tok = tiny_llama(3), ByteTokenizer()
    chooser = LMChooser(model, tok)
    chooser.start("sys", "user", "Program:")
    chooser.append("\nr1 =")
    options = [" x", " search_flights(", "\nend", " first("]
    scores = chooser.scores(options)
    prefix = tok.apply_chat_template([{"role": "system", "content": "sys"}, {"role": "user", "content": "user"}],
                                     True, "pt")[0].tolist() + tok.encode("Program:\nr1 =")
    for text, score in zip(options, scores, strict=True):
        ids = tok.encode(text)
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([prefix + ids])).logits[0].log_softmax(-1)
        plain = torch.stack([logp[len(prefix) - 1 + i, t] for i, t in enumerate(ids)]).mean()
        assert score == pytest.approx(float(plain), abs=1e-4)
    assert chooser.choose(options) == max(range(4), key=lambda i: scores[i])
    # scoring left the cache at the shared text: appending continues from it exactly
    chooser.append(" first(")
    assert chooser._cache.get_seq_length() == len(prefix) + len(tok.encode(" first("))


def test_bad_constructor_option_is_a_config_error():
    from agents.toolpro.options import ToolProOptions

    with pytest.raises(ConfigError, match="smollm2"):
        ToolProOptions.from_options({"constructor": "gpt4"})
