"""The one definition of a valid problem (``Problem.from_spec``), property-tested with
seeded random generation (no hypothesis dependency): every valid problem round-trips, every
malformed spec gives a ``ValueError`` with a reason and never another exception. Plus the
refusal path and ``db verify``'s corruption/unknown split on real SQLite files."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from inductor_flydsl.db.store import CandidateResult, TuningDB, refusal_id
from inductor_flydsl.inductor.autotune.ir_problem import attrs_of
from inductor_flydsl.problems.keys import canonical_json, stable_id
from inductor_flydsl.problems.problem import (
    MAX_DIM,
    MAX_INPUTS,
    MAX_RANK,
    InvalidProblem,
    Problem,
    TensorSpec,
    UnknownProblem,
    checked,
)
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import current_software

SEED = 20261203
CASES = 400
DTYPES = ["float32", "bfloat16", "float16", "int8", "uint8", "int32", "int64", "float64",
          "float8_e4m3fn"]
OPS = ["mm", "addmm", "bmm", "baddbmm", "packed_linear", "qlinear_unary", "qlinear_binary",
       "_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu", "grouped_gemm", "linear_unary"]
DEVICE = DeviceInfo(kind="cpu", arch="x86_64-AVX2", name="test cpu", compute_units=2)


def _tensor(rng: random.Random) -> TensorSpec:
    rank = rng.choice([0, 0, 1, 2, 2, 3, 4, rng.randint(0, MAX_RANK)])
    size = tuple(rng.choice([0, 1, 16, rng.randint(1, 1 << 20), MAX_DIM]) for _ in range(rank))
    stride = tuple(rng.choice([0, 1, rng.randint(0, 1 << 30)]) for _ in range(rank))
    return TensorSpec(rng.choice(DTYPES), size, stride)


def _attr(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 2 else 6)
    if kind == 6:
        return tuple(_attr(rng, depth + 1) for _ in range(rng.randint(0, 4)))
    return [None, rng.random() < 0.5, rng.randint(-(1 << 40), 1 << 40),
            rng.uniform(-1e6, 1e6), rng.choice(["none", "relu", "add", "sum", "", "gelu"]),
            rng.choice([0.0, -0.0, 1e-30, 0.014687983319163322])][kind]


def random_problem(rng: random.Random) -> Problem:
    """A random valid problem, 0-D tensors, integer dtypes and long input lists included."""
    inputs = tuple(_tensor(rng) for _ in range(rng.choice([1, 2, 3, 7, 8, 12,
                                                            rng.randint(1, MAX_INPUTS)])))
    out_rank = rng.choice([0, 1, 2, 2, 3])
    out_size = tuple(rng.randint(0, 4096) for _ in range(out_rank))
    output = TensorSpec(rng.choice(DTYPES), out_size, (0,) * out_rank)
    epilogue = tuple(sorted({"alpha": rng.uniform(-4, 4), "beta": rng.choice([0, 1, 1.0, True])}
                            .items())) if rng.random() < 0.3 else ()
    names = ["output_scale", "output_zero_point", "output_dtype", "post_op_name",
             "post_op_args", "binary_post_op", "other_zp", "x"]
    attrs = tuple(sorted((n, _attr(rng)) for n in rng.sample(names, rng.randint(0, 5))))
    symbolic: tuple[tuple[int, ...], ...] = ()
    if rng.random() < 0.3:  # dynamic shapes: some dims of some tensors symbolic
        symbolic = tuple(tuple(d for d in range(len(t.size)) if rng.random() < 0.4)
                         for t in (*inputs, output))
        if not any(symbolic):
            symbolic = ()
    exprs = tuple(rng.choice(["a", "b", "a*b", "2*a", "FloorDiv(a, 2)"])
                  for dims in symbolic for _ in dims)
    return Problem(rng.choice(OPS), inputs, output, epilogue, attrs, symbolic, exprs)


def test_random_valid_problems_round_trip() -> None:
    rng = random.Random(SEED)
    for _ in range(CASES):
        problem = random_problem(rng)
        spec = problem.spec()
        again = Problem.from_spec(json.loads(canonical_json(spec)))  # through JSON text
        assert again.spec() == spec
        assert again.id == problem.id == stable_id(spec)
        assert checked(problem) is problem
        # the GEMM view and the DB row exist for every valid problem
        assert again.summary() and isinstance(again.as_row()["m"], int)


def _junk(rng: random.Random) -> Any:
    return rng.choice([None, True, -1, 1 << 70, 1.5, float("nan"), float("inf"), "", "x y",
                       "ü", [], [1, "a"], {}, {"a": 1}, [[[[[1]]]]], list(range(100)),
                       "a" * 1000, {"dtype": "float32"}, [-(1 << 41)]])


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*path, i))
    return found


def _mutate(rng: random.Random, spec: dict) -> Any:
    spec = copy.deepcopy(spec)
    path = rng.choice(_paths(spec))
    if not path:
        return _junk(rng)
    parent = spec
    for key in path[:-1]:
        parent = parent[key]
    action = rng.randrange(3)
    if action == 0:
        parent[path[-1]] = _junk(rng)
    elif action == 1 and isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[rng.choice(["extra", "Op", "", 1])] = _junk(rng)
    else:
        parent.extend([_junk(rng)] * rng.randint(1, 70))
    return spec


def test_random_malformed_specs_give_value_errors() -> None:
    rng = random.Random(SEED + 1)
    rejected = 0
    for _ in range(CASES * 3):
        bad = _mutate(rng, random_problem(rng).spec())
        try:
            problem = Problem.from_spec(bad)
        except InvalidProblem as exc:
            assert str(exc), "every rejection says why"
            rejected += 1
            continue
        # a mutation that stayed valid (e.g. one int for another) still round-trips
        assert Problem.from_spec(problem.spec()).spec() == problem.spec()
    assert rejected > CASES * 2


@pytest.mark.parametrize(("spec", "reason"), [
    ({"op": "mm", "inputs": [], "output": {"dtype": "float32", "size": [2, 2]}}, "0 inputs"),
    ({"op": "mm x", "inputs": [], "output": {}}, "op name"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2], "stride": [1, 1]}],
      "output": {"dtype": "float32", "size": [2]}}, "differ in rank"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [True], "stride": [1]}],
      "output": {"dtype": "float32", "size": [2]}}, "must be an integer"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [], "stride": []}],
      "output": {"dtype": "float32", "size": []}, "attrs": {"s": float("nan")}}, "finite"),
    ([1, 2], "JSON object"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2, 2], "stride": [2, 1]}],
      "output": {"dtype": "float32", "size": [2, 2]},
      "symbolic": {"inputs": [[0]], "output": [2], "exprs": ["a", "a"]}}, r"outside \[0, 1\]"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2, 2], "stride": [2, 1]}],
      "output": {"dtype": "float32", "size": [2, 2]},
      "symbolic": {"inputs": [[]], "output": [], "exprs": []}}, "names no dim"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2, 2], "stride": [2, 1]}],
      "output": {"dtype": "float32", "size": [2, 2]},
      "symbolic": {"inputs": [[1, 0]], "output": [0], "exprs": ["a", "a", "a"]}},
     "distinct increasing"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2, 2], "stride": [2, 1]}],
      "output": {"dtype": "float32", "size": [2, 2]},
      "symbolic": {"inputs": [], "output": [0], "exprs": ["a"]}}, "each of the 1 inputs"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2, 2], "stride": [2, 1]}],
      "output": {"dtype": "float32", "size": [2, 2]},
      "symbolic": {"inputs": [[0]], "output": [0], "exprs": ["a"]}}, "one expression per"),
    ({"op": "mm", "inputs": [{"dtype": "float32", "size": [2, 2], "stride": [2, 1]}],
      "output": {"dtype": "float32", "size": [2, 2]},
      "symbolic": {"inputs": [[0]], "output": [0], "exprs": ["a", "__import__('os')"]}},
     "not a size expression"),
])
def test_malformed_spec_reasons(spec: Any, reason: str) -> None:
    with pytest.raises(InvalidProblem, match=reason):
        Problem.from_spec(spec)


def test_dynamic_problem_is_a_different_key_with_the_same_gemm_view() -> None:
    """Symbolic dims are part of the key: the static problem at the same sizes is
    another problem; ``symbolic`` is absent from static specs, so static ids are the ones
    earlier versions wrote."""
    static = Problem("mm", (TensorSpec("bfloat16", (64, 512), (512, 1)),
                            TensorSpec("bfloat16", (512, 256), (256, 1))),
                     TensorSpec("bfloat16", (64, 256), (256, 1)))
    dynamic = Problem(static.op, static.inputs, static.output, symbolic=((0,), (), (0,)),
                      exprs=("a", "a"))
    assert "symbolic" not in static.spec() and not static.dynamic and dynamic.dynamic
    assert dynamic.id != static.id and dynamic.mnk == static.mnk
    assert dynamic.summary() == "mm bfloat16 64x256x512 nn dynamic[M]"
    assert Problem.from_spec(json.loads(canonical_json(dynamic.spec()))) == dynamic


def test_newer_fields_are_unknown_not_invalid() -> None:
    spec = random_problem(random.Random(SEED)).spec() | {"layout_hint": "nt"}
    with pytest.raises(UnknownProblem, match="layout_hint"):
        Problem.from_spec(spec)


def test_attribute_op_without_aten_choice_is_refused() -> None:
    """No choice shows qlinear's post-op and scales: keying it without them would merge
    different ops into one problem, so it is refused (the hooks count and record it)."""
    with pytest.raises(InvalidProblem, match="cannot be keyed"):
        attrs_of("qlinear_unary", [])
    assert attrs_of("bmm", []) == ()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inductor_flydsl", *args],
                          capture_output=True, text=True, check=False)


def test_verify_separates_corruption_from_unknown_rows(tmp_path: Path) -> None:
    """One real DB with a refused problem and a row of a newer plugin (exit 0, notes), a
    copy with an edited spec (exit 1, naming the row); merge takes the first, refuses the
    second."""
    good = tmp_path / "good.db"
    db = TuningDB.open(good, writable=True)
    problem = random_problem(random.Random(SEED + 2))
    db.record_selection(DEVICE, current_software(), problem,
                        [CandidateResult("c1", "aten", "c1", {}, 1.0)])
    db.record_refusal(DEVICE, current_software(), "qlinear_unary", "no ATen choice")
    newer = problem.spec() | {"layout_hint": "nt"}
    db.db.table("problems").insert({**problem.as_row(), "id": stable_id(newer),
                                    "spec": canonical_json(newer)})
    db.close()
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(good.read_bytes())
    edited = sqlite_utils.Database(corrupt)
    edited.execute("update problems set spec = ? where id = ?",  # content no longer
                   [canonical_json(problem.spec() | {"op": "edited"}), problem.id])  # its id
    edited.conn.commit()
    edited.close()

    ok = cli("db", "verify", str(good))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "not known to this version" in ok.stdout and "layout_hint" in ok.stdout
    assert refusal_id("qlinear_unary", "no ATen choice") in ok.stdout
    bad = cli("db", "verify", str(corrupt))
    assert bad.returncode == 1
    assert f"problems row '{problem.id}'" in bad.stdout
    assert "bad spec: the id does not match its spec" in bad.stdout

    merged = tmp_path / "merged.db"
    assert cli("db", "merge", str(good), "--into", str(merged)).returncode == 0
    rows = sqlite_utils.Database(merged)
    assert rows.table("problems").count == 2 and rows.table("misses").count == 1
    refused = cli("db", "merge", str(corrupt), "--into", str(tmp_path / "m2.db"))
    assert refused.returncode == 2 and "fails verification" in refused.stdout + refused.stderr


def test_symbolic_structure_is_part_of_the_key() -> None:
    """M = batch*seq and M = seq (a batch specialized to 1 recompiles so) build different
    kernels: different problems, shown in the summary."""
    base = Problem("mm", (TensorSpec("float32", (32, 64), (64, 1)),
                          TensorSpec("float32", (64, 16), (16, 1))),
                   TensorSpec("float32", (32, 16), (16, 1)), symbolic=((0,), (), (0,)))
    product = Problem(base.op, base.inputs, base.output, symbolic=base.symbolic,
                      exprs=("a*b", "a*b"))
    single = Problem(base.op, base.inputs, base.output, symbolic=base.symbolic,
                     exprs=("a", "a"))
    assert product.id != single.id
    assert "dynamic[M=a*b]" in product.summary() and "dynamic[M]" in single.summary()
