"""What an offline sweep tunes: one GEMM per :class:`SweepItem`.

An item is an op (``mm``, ``addmm``, ``bmm``, ``linear``, ``grouped_mm`` or
``scaled_mm``), its sizes, dtype and operand layout. ``scaled_mm`` is an MX block-scaled
GEMM (``torch._scaled_mm`` of ``a @ w.t()`` with E8M0 scales per 32 K elements, bf16 out):
its dtype is the MX format of both operands, ``mxfp8`` (e4m3) or ``mxfp4`` (e2m1), its
layout ``nt``. ``grouped_mm`` is ``torch._grouped_mm`` of M tokens (row-major)
over ``batch`` groups of (K x N) weights (layout's second letter: their memory order),
benchmarked under the token ``routing`` (``inductor``, ``uniform``, ``zipf``, ``sparse``:
see ``inductor_flydsl/problems/routing.py``). Its ``item_id`` is a stable hash of those fields,
so the same item has the same id in every process and on every machine (``sweep_status``
is keyed by it for ``--resume``).

Values may come from a CSV file, a preset or a DB row: :meth:`SweepItem.from_values`
validates every field and raises :class:`ItemError` with a message naming the bad field.

Layout letters are A then B, ``n`` row-major and ``t`` column-major: ``nt`` is
``A (M x K) @ B`` where B is stored as an N x K row-major matrix, the weight layout of
``nn.Linear``. ``op=linear`` is ``y = x @ W.T`` without bias (``nn.Linear``), hence always
``nt``; ``addmm`` adds a bias of N elements. ``dynamic_m`` (default false) compiles with
M symbolic and ``m`` as its hint, as a dynamic-shape compile does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..problems.keys import stable_id

if TYPE_CHECKING:
    from ..problems.problem import Problem

OPS = ("mm", "addmm", "bmm", "linear", "grouped_mm", "scaled_mm")
ROUTINGS = ("inductor", "uniform", "zipf", "sparse")  # grouped_mm only (routing.py)
LAYOUTS = ("nn", "nt", "tn", "tt")
DTYPES = ("float32", "bfloat16", "float16")
MX_DTYPES = ("mxfp8", "mxfp4")  # scaled_mm only
DTYPE_ALIASES = {
    "mxfp8": "mxfp8", "mxfp4": "mxfp4",
    "float32": "float32", "fp32": "float32", "f32": "float32", "float": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "mxfp8": 1, "mxfp4": 1}
MAX_DIM = 1 << 20  # per GEMM dimension
MAX_BATCH = 1 << 16
MAX_OPERAND_BYTES = 1 << 36  # 64 GiB: anything larger is a typo, not a GEMM to tune


class ItemError(ValueError):
    """A sweep item field is missing or invalid; ``str(exc)`` names the field."""


def _int_field(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise ItemError(f"{name}={value!r} is not an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ItemError(f"{name}={value!r} is not an integer")
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isascii() or not text.isdigit():
            raise ItemError(f"{name}={value!r} is not a positive integer")
        number = int(text)
    else:
        raise ItemError(f"{name}={value!r} is not an integer")
    if not low <= number <= high:
        raise ItemError(f"{name}={number} is out of range ({low}..{high})")
    return number


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in allowed:
        raise ItemError(f"{name}={value!r} is not one of: {', '.join(allowed)}")
    return text


def _dtype(value: Any) -> str:
    text = value.strip().lower().removeprefix("torch.") if isinstance(value, str) else None
    if text not in DTYPE_ALIASES:
        raise ItemError(f"dtype={value!r} is not one of: {', '.join(DTYPES)} "
                        "(or fp32, bf16, fp16)")
    return DTYPE_ALIASES[text]


def _flag(name: str, value: Any) -> bool:
    if value in (None, "") or value is False or value == 0:
        return False
    if value is True or value == 1:
        return True
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise ItemError(f"{name}={value!r} is not a boolean (true/false, 1/0)")


@dataclass(frozen=True, order=True)
class SweepItem:
    op: str
    m: int
    n: int
    k: int
    batch: int = 1
    dtype: str = "bfloat16"
    layout: str = "nt"
    # M symbolic, as a dynamic-shape compile sees it (``torch._dynamo.mark_dynamic`` on
    # M, with ``m`` as the hint): records the key such a compile looks up.
    dynamic_m: bool = False
    # grouped_mm: the token routing its candidates are benchmarked under (routing.py)
    routing: str = ""

    def __post_init__(self) -> None:
        # Direct construction gets the same checks as values read from a file.
        checked = SweepItem._checked(asdict(self))
        if checked != asdict(self):
            raise ItemError(f"sweep item fields are not canonical: {asdict(self)} "
                            f"(use SweepItem.from_values)")

    @staticmethod
    def _checked(values: Mapping[str, Any]) -> dict[str, Any]:
        lowered = {str(k).strip().lower(): v for k, v in values.items()}
        unknown = set(lowered) - {"op", "m", "n", "k", "batch", "dtype", "layout",
                                  "dynamic_m", "routing"}
        if unknown:
            raise ItemError(f"unknown field(s): {', '.join(sorted(unknown))}")
        for required in ("op", "m", "n", "k"):
            if lowered.get(required) in (None, ""):
                raise ItemError(f"{required.upper() if len(required) == 1 else required} "
                                "is missing")
        op = _choice("op", lowered["op"], OPS)
        m = _int_field("M", lowered["m"], 1, MAX_DIM)
        n = _int_field("N", lowered["n"], 1, MAX_DIM)
        k = _int_field("K", lowered["k"], 1, MAX_DIM)
        batch_value = lowered.get("batch")
        batch = 1 if batch_value in (None, "") else _int_field("batch", batch_value, 1,
                                                                MAX_BATCH)
        dtype_value = lowered.get("dtype")
        dtype = "bfloat16" if dtype_value in (None, "") else _dtype(dtype_value)
        layout_value = lowered.get("layout")
        layout = "nt" if layout_value in (None, "") else _choice("layout", layout_value,
                                                                 LAYOUTS)
        if op not in ("bmm", "grouped_mm") and batch != 1:
            raise ItemError(f"batch={batch} is only allowed with op=bmm or grouped_mm (the "
                            f"groups; op={op} needs 1)")
        routing_value = lowered.get("routing")
        routing = "" if routing_value in (None, "") else _choice("routing", routing_value,
                                                                 ROUTINGS)
        if op == "grouped_mm":
            routing = routing or "inductor"
            if layout[0] != "n":
                raise ItemError(f"layout={layout!r} with op=grouped_mm: the tokens (A) are "
                                "row-major; the second letter is the weights' order")
        elif routing:
            raise ItemError(f"routing={routing!r} is only allowed with op=grouped_mm")
        if (op == "scaled_mm") != (dtype in MX_DTYPES):
            raise ItemError(f"dtype={dtype} with op={op}: the MX dtypes ({', '.join(MX_DTYPES)}) "
                            "go with op=scaled_mm, and only they")
        if op == "scaled_mm" and layout != "nt":
            raise ItemError(f"layout={layout!r} with op=scaled_mm: MX operands are "
                            "K-contiguous (a @ w.t()), i.e. layout nt")
        if op == "linear" and layout != "nt":
            raise ItemError(f"layout={layout!r} with op=linear: a linear layer is x @ W.T "
                            "with W stored N x K row-major, i.e. layout nt")
        dynamic_m = _flag("dynamic_m", lowered.get("dynamic_m"))
        if dynamic_m and m < 2:
            raise ItemError(f"dynamic_m with M={m}: torch.compile specializes sizes 0 and 1, "
                            "so a symbolic M needs a hint of at least 2")
        largest = batch * max(m * k, k * n, m * n) * DTYPE_BYTES[dtype]
        if largest > MAX_OPERAND_BYTES:
            raise ItemError(f"{batch}x{m}x{n}x{k} {dtype}: an operand of {largest} bytes "
                            f"exceeds {MAX_OPERAND_BYTES} bytes")
        return {"op": op, "m": m, "n": n, "k": k, "batch": batch, "dtype": dtype,
                "layout": layout, "dynamic_m": dynamic_m, "routing": routing}

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> SweepItem:
        """Validate and canonicalize fields (case-insensitive names; M/N/K as text or int;
        dtype aliases such as ``bf16``); defaults: batch 1, dtype bfloat16, layout nt."""
        return cls(**cls._checked(values))

    def to_dict(self) -> dict[str, Any]:
        """The fields; ``dynamic_m`` only when set, so static items keep the ids (and
        ``--resume`` rows) they had before the field existed."""
        values = asdict(self)
        if not self.dynamic_m:
            del values["dynamic_m"]
        if not self.routing:
            del values["routing"]
        return values

    @property
    def item_id(self) -> str:
        return stable_id(self.to_dict())

    def summary(self) -> str:
        batch = f"{self.batch}x" if self.op in ("bmm", "grouped_mm") else ""
        text = f"{self.op} {self.dtype} {batch}{self.m}x{self.n}x{self.k} {self.layout}"
        if self.routing and self.routing != "inductor":
            text += f" routing={self.routing}"
        return f"{text} dynamic[M]" if self.dynamic_m else text

    @property
    def flops(self) -> int:
        if self.op == "grouped_mm":  # the groups share the M tokens
            return 2 * self.m * self.n * self.k
        return 2 * self.batch * self.m * self.n * self.k


CPU_TUNED_OPS = frozenset({"linear"})  # Inductor on CPU autotunes frozen-weight linears only


def always_skipped(item: SweepItem, device_kind: str) -> bool:
    """Whether a device of this kind always skips ``item`` (on CPU: any op but linear)."""
    return device_kind == "cpu" and item.op not in CPU_TUNED_OPS


def db_problem(item: SweepItem, device_kind: str) -> Problem | None:
    """The problem the tuning DB records for ``item`` on a device of ``device_kind``
    (``cpu``, ``cuda``, ``rocm``), built as the worker's compile presents it to Inductor
    (``problem.synthetic_problem`` and friends): its ``summary()`` is the recorded name
    (what ``sweep --list`` and the sweep's progress lines show), its ``id`` the recorded
    id (what ``sweep --list`` prints, and ``db show``/``db list`` use). A CPU float32
    linear's key holds MKL's packed weight, whose size only MKL tells: it is asked
    (``_mkl_packed_weight``), on this machine, as the sweep's worker would.

    None where the item alone does not tell: an item the device always skips (nothing
    is recorded), a float32 linear on a CPU build without MKL (oneDNN's ACL on Arm), a
    dynamic-M grouped or scaled GEMM.
    """
    if always_skipped(item, device_kind):
        return None
    from ..problems.buckets import dynamic_m_problem
    from ..problems.problem import synthetic_problem

    if device_kind == "cpu":  # item.op is linear
        problem = _cpu_linear(item)
        if problem is None:
            return None
    elif item.op == "scaled_mm":
        if item.dynamic_m:
            return None
        from ..flydsl_backend.offer.mx_eligibility import parse_mx_dtype, synthetic_mx_problem

        problem = synthetic_mx_problem(item.m, item.n, item.k,
                                       formats=parse_mx_dtype(item.dtype))
    elif item.op == "grouped_mm":
        if item.dynamic_m:
            return None
        from ..problems import routing

        problem = synthetic_problem("grouped_mm", item.m, item.n, item.k, dtype=item.dtype,
                                    layout=item.layout, batch=item.batch)
        if item.routing in routing.MEASURED_ROUTINGS:
            problem = routing.routed(problem, item.routing)
    else:  # on a GPU a linear without bias is an mm of x and the transposed weight
        problem = synthetic_problem("mm" if item.op == "linear" else item.op, item.m,
                                    item.n, item.k, dtype=item.dtype, layout=item.layout,
                                    batch=item.batch)
    return dynamic_m_problem(problem) if item.dynamic_m else problem


def db_name(item: SweepItem, device_kind: str) -> str | None:
    """The name the tuning DB gives the problem ``item`` records (:func:`db_problem`),
    or None where the item alone does not tell (the caller then shows
    ``item.summary()``)."""
    problem = db_problem(item, device_kind)
    return None if problem is None else problem.summary()


def db_problem_id(item: SweepItem, device_kind: str) -> str | None:
    """The id the tuning DB gives the problem ``item`` records (what ``db show`` and
    ``db list`` use), where it is known before the item runs: on a CPU, whose keys
    :func:`db_problem` rebuilds exactly. On a GPU the key also holds how the compile
    timed the candidates (``timing=graph`` where the plugin offered one: see
    ``inductor/timing/timing_parity.py``), which only the run tells: None."""
    if device_kind != "cpu":
        return None
    problem = db_problem(item, device_kind)
    return None if problem is None else problem.id


@functools.lru_cache(maxsize=256)
def _mkl_packed_weight(n: int, k: int, m: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Size and stride of the weight MKL packs for a float32 (N x K) linear at M rows
    (Inductor's ``pack_linear_weight``: ``mkl._mkl_reorder_linear_weight``), the second
    input of the ``packed_linear`` the DB records. MKL sizes its buffer by its own rules
    (a 128 x 64 weight packs into 1459233 floats on x86-64 AVX512), so MKL is asked, on
    an uninitialized weight (its values do not change the size)."""
    import torch

    with torch.no_grad():
        packed = torch.ops.mkl._mkl_reorder_linear_weight(torch.empty(n, k), m)
    return tuple(packed.size()), tuple(packed.stride())


def cpu_linear_op(dtype: str, dynamic_m: bool = False) -> str | None:
    """The op a frozen bias-free CPU linear of ``dtype`` is recorded as on this machine
    (Inductor's oneDNN passes, their ``_is_packable_linear`` and ``pack_linear``):
    float32 at a static M becomes MKL's ``packed_linear``; float32 at a dynamic M, and
    bf16/fp16 where oneDNN has them, its ``linear_unary`` (post-op ``none``); bf16/fp16
    elsewhere stays ATen's ``mm`` of x and the transposed weight. None for float32 on a
    build without MKL (oneDNN's ACL on Arm)."""
    import torch

    from ..inductor.adapter import internals

    if dtype == "float32":
        if not torch.backends.mkl.is_available():
            return None
        return "linear_unary" if dynamic_m else "packed_linear"
    packs = (internals.is_mkldnn_bf16_supported if dtype == "bfloat16"
             else internals.is_mkldnn_fp16_supported)
    return "linear_unary" if packs("cpu") else "mm"


def _cpu_linear(item: SweepItem) -> Problem | None:
    """The problem a frozen bias-free CPU linear is recorded as (:func:`cpu_linear_op`):
    ``packed_linear`` of x, MKL's packed weight and the (N, K) weight; ``linear_unary``
    of x and oneDNN's reordered weight; or ``mm`` of x and the transposed weight."""
    from ..problems.problem import Problem, TensorSpec, synthetic_problem

    m, n, k, dtype = item.m, item.n, item.k, item.dtype
    op = cpu_linear_op(dtype, item.dynamic_m)
    if op is None:
        return None
    if op == "mm":
        return synthetic_problem("mm", m, n, k, dtype=dtype, layout="nt")
    x, out = TensorSpec(dtype, (m, k), (k, 1)), TensorSpec(dtype, (m, n), (n, 1))
    if op == "packed_linear":
        size, stride = _mkl_packed_weight(n, k, m)
        return Problem(op=op, output=out, inputs=(x, TensorSpec(dtype, size, stride),
                                                  TensorSpec(dtype, (n, k), (k, 1))))
    # oneDNN's reordered weight is opaque: Inductor's IR gives it the (N, K) size and the
    # stride (1, 0), as torch reports every 2-D mkldnn tensor's
    return Problem(op=op, inputs=(x, TensorSpec(dtype, (n, k), (1, 0))), output=out,
                   attrs=(("algorithm", ""), ("attr", "none"), ("scalars", ())))


def dedupe(items: list[SweepItem]) -> list[SweepItem]:
    """Drop repeats (same item_id), keeping the first occurrence's position."""
    seen: set[str] = set()
    out = []
    for item in items:
        if item.item_id not in seen:
            seen.add(item.item_id)
            out.append(item)
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (1-based shard K of N)."""
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError:
        raise ItemError(f"bad shard {text!r}: use K/N, e.g. 1/4") from None
    if n < 1 or not 1 <= k <= n:
        raise ItemError(f"bad shard {text!r}: need 1 <= K <= N")
    return k, n


def shard(items: list[SweepItem], k: int, n: int) -> list[SweepItem]:
    """Shard ``k`` of ``n`` (1-based): every ``n``-th item of the list sorted by item_id,
    starting at ``k - 1``. The N shards of one list cover it exactly once, whatever order
    the list came in."""
    ordered = sorted(dedupe(items), key=lambda item: item.item_id)
    return ordered[k - 1::n]
