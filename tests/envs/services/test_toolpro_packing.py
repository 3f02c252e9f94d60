"""The packed program wire form and the brief run report: lossless, smaller, and bad input is a typed error."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from envs.services.programs.executor import ProgramExecutor
from envs.services.programs.program import PACK_PREFIX, ProgramError, pack_program, parse_program, unpack_program
from envs.services.runtime import ServiceRuntime, create_database
from envs.services.workflows import TASKS, state
from policies.toolpro.planner import plan


def test_packing_is_lossless_and_smaller_for_every_planned_program():
    for task in TASKS.values():
        program = parse_program(plan(task))
        packed = program.pack()
        assert packed.startswith(PACK_PREFIX) and '"' not in packed and "\\" not in packed  # no JSON escaping
        assert unpack_program(packed) == program.to_json()
        assert parse_program(packed) == program
        assert len(packed) < 0.6 * len(program.dumps()), task.name


def _raw_pack(raw: bytes) -> str:
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    return PACK_PREFIX + base64.b85encode(deflate.compress(raw) + deflate.flush()).decode()


@pytest.mark.parametrize("text, message", [
    ("tp2:abc", "not valid JSON"),  # not packed: read as JSON text
    (PACK_PREFIX + "!!!!~~~~", "does not decode"),
    (pack_program({"service": "orders", "body": {"return": {"lit": 1}}})[:-6], "does not decode|truncated"),
    (_raw_pack(b"[" * (2 << 20)), "inflates past"),  # a compression bomb: 2 MiB from a few KiB
])
def test_bad_packed_programs_are_program_errors(text, message):
    with pytest.raises(ProgramError, match=message):
        parse_program(text)


def test_unpacking_needs_the_prefix():
    with pytest.raises(ProgramError, match="must start with"):
        unpack_program("{}")


def test_brief_report_keeps_the_answer_and_profile_fields_only(tmp_path):
    task = TASKS["ship_paid_4"]
    rt = ServiceRuntime(task.service, create_database(tmp_path / "orders.db", task.service, 1))
    ex = ProgramExecutor(rt)
    brief = ex.run(pack_program(plan(task)), "brief", brief=True)
    assert brief == {"status": "ok", "calls": 5, "call_ms": brief["call_ms"]} and isinstance(brief["call_ms"], int)
    after = state(rt.conn)
    again = ex.run(plan(task), "brief", brief=True)  # the same run again: every call answered from the run log
    assert again["replayed"] == 5 and state(rt.conn) == after
    full = ex.run({"service": "orders", "body": {"return": {"lit": 0}}}, "zero", brief=True)
    assert full["result"] == 0  # a falsy answer is still an answer
    bomb = ex.run(_raw_pack(json.dumps({"service": "orders", "body": {"fail": "x" * (2 << 20)}}).encode()), "bomb",
                  brief=True)
    assert bomb["status"] == "rejected" and "inflates past" in bomb["error"]["message"] and bomb["calls"] == 0
    rt.close()
