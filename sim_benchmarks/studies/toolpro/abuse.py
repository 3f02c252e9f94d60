"""The sandbox abuse table: escape and abuse attempts sent to a live ToolPro site over MCP stdio.

    python -m sim_benchmarks.studies.toolpro.abuse --out docs/results/toolpro

Each attempt is an untrusted WebAssembly module (``run_module``) or a tool program (``run_program``). After each one
the table records how it ended, whether the database is unchanged, and whether the service still answers a read.
"""

from __future__ import annotations

import base64
import sqlite3
import sys
import tempfile
import time
import zlib
from pathlib import Path

from envs.atomic_io import write_json_atomic
from envs.services.client import ServiceClient
from envs.services.programs.program import PACK_DICTIONARY, PACK_PREFIX
from envs.services.runtime import create_database
from envs.services.workflows import state
from sim_benchmarks.cli import ArgumentParser, main_guard

V = '(import "toolpro" "value" (func $v (param i32 i32 i32 i32) (result i32)))'
MODULES = {
    "file access (WASI path_open import)": '(module (import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 '
    'i32 i32 i32 i64 i64 i32 i32) (result i32))) (func (export "run") (result i32) i32.const 0))',
    "network access (undeclared sock_connect import)": '(module (import "env" "sock_connect" (func (param i32) '
    '(result i32))) (func (export "run") (result i32) i32.const 0))',
    "undeclared host import (toolpro.exec)": '(module (import "toolpro" "exec" (func (param i32 i32 i32 i32) '
    '(result i32))) (func (export "run") (result i32) i32.const 0))',
    "host import with a forged signature": '(module (import "toolpro" "call" (func (param i64) (result i32))) '
    '(func (export "run") (result i32) i32.const 0))',
    "infinite loop": '(module (func (export "run") (result i32) (loop $l br $l) i32.const 0))',
    "infinite loop of host calls (wall clock)": f'(module {V} (func (export "run") (result i32) (loop $l (drop (call '
    '$v (i32.const 13) (i32.const 1000) (i32.const 0) (i32.const 0))) br $l) i32.const 0))',
    "memory bomb (grow to the limit, then write past it)": '(module (memory 1) (func (export "run") (result i32) '
    '(loop $l (br_if $l (i32.ne (memory.grow (i32.const 1024)) (i32.const -1)))) (i32.store (i32.const 1000000000) '
    '(i32.const 1)) i32.const 0))',
    "deep recursion": '(module (func $f (export "run") (result i32) call $f))',
    "oversized output (unbounded list)": f'(module {V} (func (export "run") (result i32) (local $l i32) (local.set $l '
    '(call $v (i32.const 8) (i32.const 0) (i32.const 0) (i32.const 0))) (loop $x (drop (call $v (i32.const 9) '
    '(local.get $l) (i32.const 0) (i32.const 0))) (br $x)) i32.const 0))',
    "forged value handle": f'(module {V} (func (export "run") (result i32) (drop (call $v (i32.const 1) (i32.const '
    '999999) (i32.const 0) (i32.const 0))) i32.const 0))',
}


def _v(op: int, a: str = "(i32.const 0)", b: str = "(i32.const 0)", c: str = "(i32.const 0)") -> str:
    """A ``toolpro.value`` call in WebAssembly text (operation codes as in envs.services.programs.compiler)."""
    return f"(call $v (i32.const {op}) {a} {b} {c})"


_L, _H, _I = "(local.get $l)", "(local.get $h)", "(local.get $i)"
# A handle of the integer 1: a new list, push null into it, take its length.
_ONE = f"(local.set $l {_v(8)}) (drop {_v(9, _L)}) (local.set $h {_v(2, _L)})"
_LOCALS = "(local $l i32) (local $h i32) (local $i i32)"
MODULES.update({
    "infinite loop of host sleeps in the (start) function (wall clock)": f'(module {V} (func $s (loop $x (drop '
    f'{_v(13, "(i32.const 1000)")}) br $x)) (start $s) (func (export "run") (result i32) i32.const 0))',
    "integer doubled past 4300 digits, returned": f'(module {V} (func (export "run") (result i32) {_LOCALS} {_ONE} '
    f'(loop $x (local.set $h {_v(5, _H, _H, "(i32.const 6)")}) (local.set $i (i32.add {_I} (i32.const 1))) '
    f'(br_if $x (i32.lt_s {_I} (i32.const 15000)))) (drop {_v(14, _H)}) i32.const 0))',
    "list pushed into itself, returned": f'(module {V} (func (export "run") (result i32) {_LOCALS} (local.set $l '
    f'{_v(8)}) (drop {_v(9, _L, _L)}) (drop {_v(14, _L)}) i32.const 0))',
    "two lists pushed into each other, returned": f'(module {V} (func (export "run") (result i32) {_LOCALS} '
    f'(local.set $l {_v(8)}) (local.set $h {_v(8)}) (drop {_v(9, _H, _L)}) (drop {_v(9, _L, _H)}) '
    f'(drop {_v(14, _L)}) i32.const 0))',
    "lists nested 100 000 deep, returned": f'(module {V} (func (export "run") (result i32) {_LOCALS} (local.set $l '
    f'{_v(8)}) (loop $x (local.set $h {_v(8)}) (drop {_v(9, _H, _L)}) (local.set $l {_H}) (local.set $i (i32.add '
    f'{_I} (i32.const 1))) (br_if $x (i32.lt_s {_I} (i32.const 100000)))) (drop {_v(14, _L)}) i32.const 0))',
})
_DEEP = 200_000
PROGRAMS = {
    "program with an unbounded loop": {"program": {"service": "travel", "body": {"for": "x", "in": {"lit": [1]},
                                                                                 "do": {"seq": []}}}},
    "program writing without idempotency key": {"program": {"service": "travel", "body": {
        "call": "book_flight", "args": {"flight_id": {"lit": 1}, "traveller": {"lit": "eve"}}, "effect": "write"}}},
    "program calling an undeclared tool": {"program": {"service": "travel", "body": {"call": "shell", "args": {},
                                                                                     "effect": "read"}}},
    "program adding two floats past the largest double, returned": {"program": {"service": "travel", "body": {
        "return": {"op": "add", "args": [{"lit": 1e308}, {"lit": 1e308}]}}}},
    f"JSON program nested {_DEEP} deep": {"program": '{"service":"travel","body":{"return":' + '{"not":' * _DEEP
                                          + '{"lit":1}' + "}" * (_DEEP + 2)},
    "packed program with a literal list nested 300000 deep": {"packed": "@deep"},  # packed at run time
}


def _packed_deep(depth: int) -> str:
    """A packed program returning a literal list nested ``depth`` deep, compressed from its text (json.dumps of
    such a value would recurse)."""
    text = '{"service":"travel","body":{"return":{"lit":' + "[" * depth + "]" * depth + "}}}"
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, PACK_DICTIONARY)
    return PACK_PREFIX + base64.b85encode(deflate.compress(text.encode()) + deflate.flush()).decode()
@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.toolpro.abuse", description=__doc__)
    p.add_argument("--out", writes="folder", type=Path, default=Path("docs/results/toolpro"))
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="toolpro-abuse-") as tmp:
        db = create_database(Path(tmp) / "travel.db", "travel", 0)
        cmd = [sys.executable, "-m", "envs.services.site", "--service", "travel", "--db", str(db)]
        with ServiceClient(cmd, timeout_s=60) as client:
            def snapshot() -> dict:
                conn = sqlite3.connect(db)
                try:
                    return state(conn)
                finally:
                    conn.close()

            for name, payload in [*((n, ("run_module", {"wat": w})) for n, w in MODULES.items()),
                                  *((n, ("run_program", {k: (_packed_deep(300_000) if v == "@deep" else v)
                                                         for k, v in pr.items()})) for n, pr in PROGRAMS.items())]:
                before = snapshot()
                t0 = time.perf_counter()
                out = client.call(payload[0], {**payload[1], "run_id": name})[0]
                took = time.perf_counter() - t0
                serving = client.call("get_flight", {"flight_id": 1})[0]["id"] == 1
                rows.append({"attempt": name, "status": out["status"], "reason": out.get("error", {}).get("message"),
                             "db_unchanged": snapshot() == before, "service_still_serving": serving,
                             "seconds": round(took, 3),
                             "contained": out["status"] in ("rejected", "trapped") and serving})
                print(f"{name}: {out['status']} ({rows[-1]['reason']}); db unchanged {rows[-1]['db_unchanged']}; "
                      f"serving {serving}; {took:.2f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "abuse.json", {"command": "python -m sim_benchmarks.studies.toolpro.abuse",
                                                "rows": rows, "all_contained": all(r["contained"] for r in rows)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
