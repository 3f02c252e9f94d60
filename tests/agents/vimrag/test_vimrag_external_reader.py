"""External VLM readers: an OpenAI-compatible endpoint (a real local HTTP server) and a tiny local transformers model.

The local model is a randomly initialised LLaVA (CLIP vision tower + Llama text model, a few thousand parameters)
with a byte-level tokenizer and a CLIP image processor, all built here and saved to a temporary folder: nothing is
downloaded. Its answers are nonsense; the tests check plumbing, token accounting and that every question is
answered exactly once.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from envs.manipulation import objects
from envs.rag.corpus import QUESTION_TYPES
from policies.vimrag.external_reader import answer_choices, build_prompt, map_answer

COLOURS, CATEGORIES, PATTERNS = tuple(objects.COLOURS), tuple(objects.CATEGORIES), tuple(objects.PATTERNS)

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------- answer space
def test_map_answer_takes_the_first_valid_choice_named_as_a_whole_word() -> None:
    assert map_answer("It is Red.", COLOURS) == "red"
    assert map_answer("blue, or maybe red", COLOURS) == "blue"
    assert map_answer("two mugs", CATEGORIES) == "mug"
    assert map_answer("boxes", CATEGORIES) == "box"
    assert map_answer("reddish", COLOURS) == ""  # not a whole word
    assert map_answer("a red striped mug", PATTERNS) == "striped"  # only the question's kind counts
    assert map_answer("", COLOURS) == ""


def test_answer_choices_follow_the_question_wording() -> None:
    assert answer_choices("What colour was the object the robot placed on the plate in run R-000?") == COLOURS
    assert answer_choices("What colour was the object that Eva's robot dropped on day 25?") == COLOURS
    assert answer_choices("At the end of run R-000, what kind of object stood closest to the plate?") == CATEGORIES
    assert answer_choices("What pattern was on the object the robot placed on the plate in run R-000?") == PATTERNS
    assert set(answer_choices("Which?")) == set(COLOURS) | set(CATEGORIES) | set(PATTERNS)
    prompt = build_prompt("What colour?", ["Run log R-1."], ["Run R-1, end keyframe"], COLOURS)
    assert "Run log R-1." in prompt and "1. Run R-1, end keyframe" in prompt and "red, green" in prompt


# ---------------------------------------------------------------------------------------------- a fake endpoint
class FakeEndpoint:
    """A stdlib HTTP server answering like an OpenAI endpoint; records every chat request it gets."""

    def __init__(self, reply: str = "The answer is Red.", delay_s: float = 0.0, status: int = 200,
                 fail_after: int | None = None) -> None:
        self.requests: list[dict] = []
        self.reply, self.delay_s, self.status, self.fail_after = reply, delay_s, status, fail_after
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def _send(self, code: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                try:
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the timeout tests' client has hung up on purpose; nothing to answer

            def do_GET(self) -> None:
                time.sleep(outer.delay_s)
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "tiny-vlm", "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if outer.fail_after is not None and len(outer.requests) > outer.fail_after:
                    self._send(503, {"error": "down"})  # the endpoint went away mid-run
                    return
                if outer.status != 200:
                    self._send(outer.status, {"error": "boom"})
                    return
                self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": outer.reply}}],
                                 "usage": {"prompt_tokens": 123, "completion_tokens": 4}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    """A local port nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def decode_png(url: str) -> np.ndarray:
    from PIL import Image

    assert url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))


def test_unreachable_endpoint_or_bad_url_is_a_config_error(monkeypatch) -> None:
    from perception.vimrag.external_vlm import connect_openai

    with pytest.raises(ConfigError, match="is unreachable"):
        connect_openai(f"http://127.0.0.1:{free_port()}/v1", timeout_s=2)
    with FakeEndpoint(delay_s=1.0) as slow, pytest.raises(ConfigError, match="is unreachable.*timed out"):
        connect_openai(slow.url, timeout_s=0.2)
    with pytest.raises(ConfigError, match="must be an http"):
        connect_openai("localhost:8000", timeout_s=2)
    monkeypatch.delenv("EMBODIA_NO_SUCH_KEY", raising=False)
    with FakeEndpoint() as ep, pytest.raises(ConfigError, match="EMBODIA_NO_SUCH_KEY"):
        connect_openai(ep.url, api_key_env="EMBODIA_NO_SUCH_KEY")


def test_endpoint_lists_models_sends_the_key_and_gives_up_after_retries(monkeypatch) -> None:
    from perception.vimrag.external_vlm import connect_openai

    monkeypatch.setenv("EMBODIA_TEST_KEY", "sk-test")
    with FakeEndpoint() as ep:
        vlm = connect_openai(ep.url.removesuffix("/v1"), api_key_env="EMBODIA_TEST_KEY")  # /v1 added
        assert vlm.model == "tiny-vlm"
        assert vlm.ask("Which colour?", [np.zeros((28, 28, 3), np.uint8)]) == "The answer is Red."
        assert ep.requests[0]["auth"] == "Bearer sk-test" and ep.requests[0]["path"] == "/v1/chat/completions"
        assert vlm.usage == {"requests": 1, "prompt_tokens": 123, "completion_tokens": 4}
    with FakeEndpoint(status=503) as down:
        vlm = connect_openai(down.url, timeout_s=2)
        vlm.retries = 1
        with pytest.raises(ConfigError, match="failed 2 times"):
            vlm.ask("q", [])
        assert len(down.requests) == 2
    with FakeEndpoint(status=400) as bad:
        vlm = connect_openai(bad.url, timeout_s=2)
        with pytest.raises(ConfigError, match="rejected the request: HTTP 400"):
            vlm.ask("q", [])
        assert len(bad.requests) == 1  # a client error is not retried


# ---------------------------------------------------------------------------------------------- tiny local VLM
def save_tiny_llava(folder: Path, seed: int = 0) -> Path:
    """A randomly initialised tiny LLaVA + processor saved with ``save_pretrained`` (no download, ~1 s)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    # Byte-level tokenizer without merges: every byte is a token, plus the special tokens the processor needs.
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="</s>", pad_token="<pad>",
                                  additional_special_tokens=["<image>"])
    template = ("{% for m in messages %}{{ m['role'] }}: {% if m['content'] is string %}{{ m['content'] }}"
                "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}"
                "{% endif %}{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
    # 28-pixel images in 14-pixel patches: every image costs 2 x 2 = 4 tokens, whatever size it is sent at.
    images = CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    processor = LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=14, chat_template=template,
                               vision_feature_select_strategy="default", image_token="<image>",
                               num_additional_image_tokens=1)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, image_size=28, patch_size=14, projection_dim=32),
        text_config=LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096),
        image_token_id=tok.convert_tokens_to_ids("<image>"), vision_feature_layer=-1,
        vision_feature_select_strategy="default")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlavaForConditionalGeneration(config)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def stack(tiny_stack):
    """The shared tiny corpus (tests/conftest.py) plus an untrained planner where the suite looks."""
    from types import SimpleNamespace

    from agents.vimrag.planner import LearnedPlanner, PolicyNet
    from agents.vimrag.stack import planner_path

    with torch.random.fork_rng():
        torch.manual_seed(0)
        LearnedPlanner(PolicyNet()).save(planner_path(SimpleNamespace(folder=tiny_stack[3], reader_seed=0), "ggpo", 0))
    return tiny_stack


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    return save_tiny_llava(tmp_path_factory.mktemp("tiny_llava"))


def scripted(tools, script):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from agents.vimrag.planner import ChatPlanner

    return ChatPlanner(GenericFakeChatModel(messages=iter([AIMessage(content=r) for r in script])), tools.payload)


SCRIPT = ["search_text", "follow_links", "read", "answer"]


@pytest.mark.slow
def test_openai_reader_sends_the_budgeted_images_and_parses_the_answer(stack) -> None:
    from agents.vimrag.agent import VimragAgent
    from perception.vimrag.external_vlm import connect_openai
    from policies.vimrag.external_reader import ExternalReader

    kb, tools, reader, _ = stack
    q = next(q for q in kb.corpus.questions if q.qtype == "placed_colour")
    with FakeEndpoint(reply="Red.") as ep:
        ext = ExternalReader(kb, reader, connect_openai(ep.url, timeout_s=5), patch_px=28)
        agent = VimragAgent(tools, ext, scripted(tools, SCRIPT), mode="graph", budget=53)
        final = agent.build_graph().invoke(agent.start(q.qid, q.text))
    assert final["history"] == SCRIPT
    (req,) = ep.requests  # one read: one request (the answer reuses the reading)
    body = req["body"]
    assert body["model"] == "tiny-vlm"
    parts = body["messages"][0]["content"]
    images = [decode_png(p["image_url"]["url"]) for p in parts if p["type"] == "image_url"]
    (text,) = [p["text"] for p in parts if p["type"] == "text"]
    assert q.text in text and "red, green" in text
    assert images, "the read sent no image"
    sides = [im.shape[0] for im in images]
    assert all(im.shape == (s, s, 3) for im, s in zip(images, sides, strict=True))
    assert set(sides) <= {28, 56, 112, 196}  # g x 28 pixels for g in 1, 2, 4, 7
    # Token accounting: each image costs (side / 28)^2, the sum is what the agent counted, within the budget.
    assert final["visual_tokens"] == sum((s // 28) ** 2 for s in sides) <= 53
    # The prompt names one caption per image sent, in order.
    listed = next(line for line in text.splitlines() if line.startswith("Images, in the order given: "))
    assert len(listed.split("; ")) == len(images)
    assert final["answer"] == "red" and ext.replies == ["Red."]
    hyp = final["memory"].best_hypothesis()
    assert hyp.ref == "red" and hyp.score == 1.0


@pytest.mark.slow
def test_local_vlm_measures_its_image_cost_and_drops_images_it_cannot_afford(stack, tiny_vlm) -> None:
    from perception.vimrag.external_vlm import LocalVLM
    from policies.vimrag.external_reader import ExternalReader

    kb, _, reader, _ = stack
    vlm = LocalVLM(tiny_vlm, max_new_tokens=4)
    assert vlm.image_cost(28) == vlm.image_cost(196) == 4  # fixed 28-px input: 4 tokens at any size
    ext = ExternalReader(kb, reader, vlm)
    assert [ext.image_cost(g) for g in (0, 1, 2, 4, 7)] == [0, 4, 4, 4, 4]
    imgs = [im.image_id for im in kb.corpus.images[:4]]
    q = kb.corpus.questions[0]
    reading = ext.read(kb.question_emb[q.qid], set(), list(zip(imgs, (0, 1, 2, 7), strict=True)), question=q.text)
    # g=0 is not sent; g=1 grants 1 token but the model needs 4: dropped; g=2 and g=7 are sent at 4 tokens each.
    assert reading.visual_tokens == 8 and set(reading.relevance) == {imgs[2], imgs[3]}
    assert reading.answer in answer_choices(q.text) + ("",)
    assert reading.confidence == (1.0 if reading.answer else 0.0)


@pytest.mark.slow
def test_local_vlm_runs_through_the_langgraph_agent(stack, tiny_vlm) -> None:
    from agents.vimrag.agent import VimragAgent
    from agents.vimrag.stack import VimragPolicy
    from envs.rag.env import QuestionEnv
    from perception.vimrag.external_vlm import LocalVLM
    from policies.vimrag.external_reader import ExternalReader

    kb, tools, reader, _ = stack
    ext = ExternalReader(kb, reader, LocalVLM(tiny_vlm, max_new_tokens=4))
    env = QuestionEnv(kb.corpus, "test", "placed_pattern")
    for i in range(3):
        obs, _ = env.reset(options={"episode": i})
        agent = VimragAgent(tools, ext, scripted(tools, SCRIPT), mode="graph", budget=40)
        policy = VimragPolicy(agent)
        before = ext.reads
        action = policy.act(obs)
        _, _, done, _, info = env.step(action)
        assert done and ext.reads == before + 1 and policy.episode_info()["reader_calls"] == 1
        assert info["answer"] in (*PATTERNS, "")  # nonsense, but in the answer space (or empty: scored wrong)
        # Every image the read kept at g >= 2 cost 4 tokens; the count is what the model consumed.
        assert action["visual_tokens"] % 4 == 0 and 0 < action["visual_tokens"] <= 40


@pytest.mark.slow
def test_harness_run_with_a_local_vlm_answers_every_question_once(stack, tiny_vlm, tmp_path) -> None:
    from launch import eval as eval_cli

    _, _, _, folder = stack
    out = tmp_path / "run"
    rc = eval_cli.main(["--env", "vimrag", "--env-option", f"corpus_dir={folder}", "--policy", "vimrag",
                        "--policy-option", "reader=hf", "--policy-option", f"reader_path={tiny_vlm}",
                        "--policy-option", "budget=16", "--episodes", "2", "--workers", "1", "--out", str(out)])
    assert rc == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    keys = [(r["task"], r["episode"]) for r in records]
    assert len(keys) == len(set(keys)) == 2 * len(QUESTION_TYPES)  # 2 questions per type, each exactly once
    assert all(r["reader_calls"] >= 1 and 0 <= r["visual_tokens"] <= 16 and r["visual_tokens"] % 4 == 0
               for r in records)
    config = json.loads((out / "config.json").read_text())
    assert config["policy_options"]["reader"] == "hf" and config["policy_options"]["reader_path"] == str(tiny_vlm)


@pytest.mark.slow
def test_an_endpoint_lost_mid_run_stops_the_run_and_resume_answers_the_rest_once(stack, tmp_path, capsys) -> None:
    from launch import eval as eval_cli

    _, _, _, folder = stack
    out = tmp_path / "run"
    with FakeEndpoint(reply="blue", fail_after=3) as ep:
        argv = ["--env", "vimrag", "--env-option", f"corpus_dir={folder}", "--policy", "vimrag", "--episodes", "2",
                "--workers", "1", "--policy-option", "reader=openai", "--policy-option", f"reader_url={ep.url}",
                "--out", str(out)]
        assert eval_cli.main(argv) == 2
        assert "failed 3 times" in capsys.readouterr().err
        first = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        assert 0 < len(first) < 2 * len(QUESTION_TYPES)  # the questions answered before the endpoint went down
        ep.fail_after = None  # back up
        assert eval_cli.main([*argv, "--resume"]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    keys = [(r["task"], r["episode"]) for r in records]
    assert len(keys) == len(set(keys)) == 2 * len(QUESTION_TYPES) and records[: len(first)] == first
    assert all(r["reader_requests"] == r["reader_calls"] >= 1 for r in records)
    assert all(r["reader_prompt_tokens"] == 123 * r["reader_requests"] for r in records)  # the server's own count


@pytest.mark.slow
@pytest.mark.parametrize("options,needle", [
    (["reader=openai", "reader_url=http://127.0.0.1:{port}/v1"], "is unreachable"),
    (["reader=hf", "reader_path={missing}"], "is not a folder"),
    (["reader=hf", "reader_path={not_a_model}"], "is not a loadable vision-language model"),
    (["reader=hf"], "needs reader_path"),
    (["reader=openai"], "needs reader_url"),
    (["reader_url=http://x"], "need reader=openai"),
    (["reader=openai", "reader_url=ftp://x"], "must be an http(s) URL"),
    (["reader=gpt"], "'gpt'"),
])
def test_bad_reader_options_exit_2_with_one_line_and_write_nothing(stack, tmp_path, capsys, options,
                                                                   needle) -> None:
    from launch import eval as eval_cli
    from tests.launch.test_bad_input import call, snapshot

    _, _, _, folder = stack
    (tmp_path / "not_a_model").mkdir()
    (tmp_path / "not_a_model" / "config.json").write_text("{}")
    fill = {"port": free_port(), "missing": tmp_path / "missing", "not_a_model": tmp_path / "not_a_model"}
    argv = ["--env", "vimrag", "--env-option", f"corpus_dir={folder}", "--policy", "vimrag", "--episodes", "1",
            "--out", str(tmp_path / "o")]
    for opt in options:
        argv += ["--policy-option", opt.format(**fill)]
    before = snapshot(tmp_path)
    rc, _, err = call(eval_cli.main, argv, capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert needle in lines[0], lines[0]
    assert snapshot(tmp_path) == before

