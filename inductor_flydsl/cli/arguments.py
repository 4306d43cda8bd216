"""Parse the GEMM arguments the CLI commands share (--shape, --dtype, --layout); every
error names the one argument that is wrong and lists what it accepts."""

from __future__ import annotations

from collections.abc import Iterable

# the forms of --shape each op takes: the accepted numbers of sizes and how to write them
SHAPE_FORMS: dict[str, tuple[tuple[int, ...], str]] = {
    "mm": ((3,), "MxNxK, e.g. 8x4096x4096"),
    "addmm": ((3,), "MxNxK, e.g. 8x4096x4096"),
    "bmm": ((4,), "BxMxNxK (B the batch; one batch is 1xMxNxK), e.g. 4x8x4096x4096"),
    "grouped_mm": ((4,), "GxTxNxK (G groups over T tokens, weights G x K x N), "
                         "e.g. 8x512x4096x4096"),
    "scaled_mm": ((3,), "MxNxK, e.g. 128x4096x4096"),
}
LAYOUTS = ("nn", "nt", "tn", "tt")


class BadArgument(ValueError):
    """One command-line argument is wrong; ``str(exc)`` names it, its value and what it
    accepts."""

    def __init__(self, option: str, value: str | None, expected: str) -> None:
        """``value`` None: the option was not given."""
        super().__init__(f"{option} {value!r}: {expected}" if value is not None else
                         f"{option} is not given: {expected}")
        self.option = option


def parse_gemm_shape(op: str, text: str, option: str = "--shape") -> tuple[int, ...]:
    """The sizes of ``--shape`` for ``op``: as many positive whole numbers as the op takes."""
    counts, form = SHAPE_FORMS[op]
    parts = text.strip().lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise BadArgument(option, text, f"use {form} (positive whole numbers joined by "
                                        "'x')") from None
    if len(dims) not in counts:
        numbers = " or ".join(str(c) for c in counts)
        raise BadArgument(option, text, f"--op {op} takes {numbers} sizes, not {len(dims)}: "
                                        f"use {form}")
    if any(d <= 0 for d in dims):
        raise BadArgument(option, text, f"sizes must be positive: use {form}")
    return dims


def parse_choice(option: str, text: str, choices: dict[str, str] | Iterable[str]) -> str:
    """``text`` (case-insensitive) among ``choices``; a dict maps accepted spellings to the
    value returned."""
    mapping = dict(choices) if isinstance(choices, dict) else {c: c for c in choices}
    value = mapping.get(text.strip().lower())
    if value is None:
        raise BadArgument(option, text, f"use one of {', '.join(mapping)}")
    return value


def parse_layout(text: str, option: str = "--layout") -> str:
    return parse_choice(option, text, LAYOUTS)


DEFAULT_DTYPE = "bf16"
MX_DTYPE_FORMS = "mxfp8, mxfp4 or <a>x<b> with formats e4m3, e5m2, e2m1 (e.g. e4m3xe2m1)"


def gemm_dtype(op: str, text: str | None) -> str:
    """``--dtype`` as given, or the default for ``op`` when it was left out: bf16, except
    for scaled_mm, whose MX formats have no default (an error then names what to give,
    never a value the user did not write)."""
    if text is not None:
        return text
    if op == "scaled_mm":
        raise BadArgument("--dtype", None, f"--op scaled_mm needs the MX formats: use "
                                           f"{MX_DTYPE_FORMS}")
    return DEFAULT_DTYPE


def config_from_json(config_class: type, text: str, option: str = "--config") -> object:
    """A template config from ``--config`` JSON. A config that is not valid names the
    fields it took from the defaults (not in ``text``) beside the reason, so an error
    about a default (``waves_m=2``) says that the user never gave it."""
    import json

    try:
        fields = json.loads(text)
    except ValueError as exc:
        raise BadArgument(option, text, f"not JSON ({exc})") from None
    try:
        return config_class.from_json(fields)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        reason = str(exc)
        given = set(fields) if isinstance(fields, dict) else set()
        try:
            defaults = config_class().to_json()
        except Exception:
            defaults = {}
        blamed = [f"{name}={value}" for name, value in defaults.items()
                  if name not in given and f"{name}=" in reason]
        if blamed:
            verb, pronoun = ("is the default", "it") if len(blamed) == 1 else (
                "are defaults", "them")
            reason += (f"; {', '.join(blamed)} {verb}, not in {option}: give {pronoun} "
                       "to fit your values")
        raise BadArgument(option, text, f"not a valid config: {reason}") from None
