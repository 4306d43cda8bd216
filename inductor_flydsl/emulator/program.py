"""Parse the AMDGPU assembly FlyDSL writes (``22_final_isa.s``) into an executable listing.

Only the first kernel of the file is read. Its instructions, branch labels, kernel
descriptor (``.amdhsa_*`` directives: which SGPRs and VGPRs the hardware initialises,
float modes) and code-object metadata (``.amdgpu_metadata``: kernel arguments, LDS size,
register counts) are what the emulator needs; everything else is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import AsmError

_LABEL_RE = re.compile(r"^([.\w$]+):")
# Words that stand where an operand would, but that our parser treats as flags.
_OPERAND_FLAGS = frozenset({"offen", "idxen", "lds", "sc0", "sc1", "nt", "glc", "slc",
                            "clamp", "gds"})


@dataclass(frozen=True)
class Instruction:
    """One assembly instruction: mnemonic, operand texts and ``name[:value]`` modifiers."""

    index: int
    line: int
    text: str
    mnemonic: str
    operands: tuple[str, ...]
    modifiers: tuple[tuple[str, str], ...] = ()

    def modifier(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.modifiers:
            if key == name:
                return value
        return default

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.modifiers)

    def where(self) -> str:
        return f"line {self.line}: {self.text}"


@dataclass
class KernelInfo:
    """What the kernel descriptor and metadata say about launching the kernel."""

    name: str
    arch: str
    descriptor: dict[str, int]
    metadata: dict[str, Any]

    @property
    def lds_bytes(self) -> int:
        return int(self.metadata.get(".group_segment_fixed_size", 0))

    @property
    def kernarg_size(self) -> int:
        return int(self.metadata.get(".kernarg_segment_size", 0))

    @property
    def args(self) -> list[dict[str, Any]]:
        return list(self.metadata.get(".args", []))

    @property
    def wavefront_size(self) -> int:
        return int(self.metadata.get(".wavefront_size", 64))

    def flag(self, name: str, default: int = 0) -> int:
        return int(self.descriptor.get(name, default))


@dataclass
class Program:
    kernel: KernelInfo
    instructions: list[Instruction]
    labels: dict[str, int] = field(default_factory=dict)

    def target(self, label: str, at: Instruction) -> int:
        if label not in self.labels:
            raise AsmError(f"branch to unknown label {label!r} at {at.where()}")
        return self.labels[label]


def strip_comment(line: str) -> str:
    """One assembly line without its comment (``;`` or ``//``) and surrounding blanks."""
    for marker in (";", "//"):
        cut = line.find(marker)
        if cut >= 0:
            line = line[:cut]
    return line.strip()


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets and parentheses."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if current and "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _is_modifier(token: str) -> bool:
    if token in _OPERAND_FLAGS:
        return True
    return bool(re.match(r"^[a-z_][a-z_0-9]*:", token)) and not token.startswith(("v[", "s[", "a["))


def _split_modifier(token: str) -> tuple[str, str]:
    key, _, value = token.partition(":")
    return key, value


def parse_instruction(index: int, line_no: int, text: str) -> Instruction:
    mnemonic, _, rest = text.partition(" ")
    rest = rest.strip()
    if mnemonic == "s_waitcnt":
        counters = tuple(re.findall(r"(\w+)\((\d+)\)", rest))
        return Instruction(index, line_no, text, mnemonic, (), counters)
    operands: list[str] = []
    modifiers: list[tuple[str, str]] = []
    for part in _split_top(rest):
        tokens = _tokens(part)
        for token in tokens:
            if _is_modifier(token):
                modifiers.append(_split_modifier(token))
            else:
                operands.append(token)
    return Instruction(index, line_no, text, mnemonic, tuple(operands), tuple(modifiers))


def _tokens(part: str) -> list[str]:
    """Whitespace-separated tokens, keeping ``[...]`` and ``|...|`` groups whole."""
    tokens, depth, current, in_abs = [], 0, [], False
    for ch in part:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "|":
            in_abs = not in_abs
        if ch.isspace() and depth == 0 and not in_abs:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens


def _parse_descriptor(lines: list[str]) -> dict[str, int]:
    out = {}
    inside = False
    for raw in lines:
        line = strip_comment(raw)
        if line.startswith(".amdhsa_kernel"):
            inside = True
        elif line.startswith(".end_amdhsa_kernel"):
            break
        elif inside and line.startswith(".amdhsa_"):
            key, _, value = line.partition(" ")
            try:
                out[key] = int(value.strip(), 0)
            except ValueError:
                continue
    return out


def _parse_metadata(text: str) -> dict[str, Any]:
    match = re.search(r"\.amdgpu_metadata\n(.*?)\n\s*\.end_amdgpu_metadata", text, re.S)
    if match is None:
        raise AsmError("the assembly has no .amdgpu_metadata block")
    try:
        doc = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise AsmError(f"unreadable .amdgpu_metadata: {exc}") from exc
    kernels = (doc or {}).get("amdhsa.kernels") or []
    if not kernels:
        raise AsmError("the .amdgpu_metadata block lists no kernel")
    return dict(kernels[0])


def parse_program(text: str) -> Program:
    """Parse the first kernel of an assembly listing."""
    lines = text.splitlines()
    metadata = _parse_metadata(text)
    name = metadata.get(".name")
    arch_match = re.search(r'\.amdgcn_target\s+"[^"]*-(gfx\w+)', text)
    if arch_match is None:
        raise AsmError("the assembly has no .amdgcn_target")
    start = None
    for i, raw in enumerate(lines):
        if strip_comment(raw) == f"{name}:":
            start = i + 1
            break
    if start is None:
        raise AsmError(f"kernel entry label {name}: not found")
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    for i in range(start, len(lines)):
        line = strip_comment(lines[i])
        if not line:
            continue
        if line.startswith(".Lfunc_end"):
            break
        label = _LABEL_RE.match(line)
        if label:
            labels[label.group(1)] = len(instructions)
            line = line[label.end():].strip()
            if not line:
                continue
        if line.startswith("."):
            continue
        instructions.append(parse_instruction(len(instructions), i + 1, line))
    if not instructions:
        raise AsmError(f"kernel {name} has no instructions")
    kernel = KernelInfo(name=str(name), arch=arch_match.group(1),
                        descriptor=_parse_descriptor(lines), metadata=metadata)
    return Program(kernel=kernel, instructions=instructions, labels=labels)
