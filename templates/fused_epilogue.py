"""A fused epilogue in a FlyDSL kernel: an ``EpilogueSpec``
(``inductor_flydsl/problems/epilogue_spec.py``) applied to one lane's 4 fp32 outputs before
the store, its operands loaded there.

Used by the dense template (``gemm_dense``, and through it ``gemm_grouped``) inside its
kernel body: these are plain Python helpers that emit FlyDSL values while the kernel is
traced, so they live outside the kernel function. Part of every template that uses it for
the template's hash (``TEMPLATE_SOURCES`` in ``inductor_flydsl/provenance/software.py``).
"""

import math

__all__ = ["EpilogueMath", "apply_epilogue"]

# Every op is computed in fp32 per element with no device-library call: exp through
# v_exp_f32 (exp2), reciprocals and division through v_rcp_f32, erf by a polynomial. The
# errors are relative to the exact function of the fp32 input (``u`` = 2^-24); "measured"
# is the largest over 32768 exact inputs in [-24, 24], the compiled gfx950 kernel run in
# the ISA emulator against float64 (v_exp_f32/v_rcp_f32 taken as correctly rounded there;
# AMD documents 1 ulp for both, which may add about 1e-7 on hardware).
#
# - add sub mul neg maximum minimum relu: exact IEEE fp32 (maximum/minimum/relu as
#   torch: NaN propagates).
# - div: a * rcp(b): <= 2.5 ulp (3e-7; measured 6e-8); a constant divisor is a multiply
#   by its rounded reciprocal (<= 1.5 ulp).
# - exp(x) = exp2(x * log2 e): v_exp_f32's ulp plus the rounding of the product, about
#   |x| * 6e-8 (measured 4.8e-7 for |x| <= 6, 9.6e-7 for |x| <= 20; 5e-6 near 88).
# - sigmoid(x) = rcp(1 + exp(-x)): exp's error plus 2 ulp (measured 5e-7 for |x| <= 6,
#   1.6e-6 at x = -23); saturates to exactly 0 and 1, no NaN for any finite x.
# - silu(x) = x * sigmoid(x): sigmoid's plus 1 ulp (measured 5.2e-7 for |x| <= 6).
# - tanh: |x| < 1/8: x (1 - x^2/3 + 2 x^4/15 - 17 x^6/315), truncation below 4e-9; else
#   copysign((1 - e) / (1 + e), x) with e = exp(-2|x|) <= 0.78, so 1 - e loses at most a
#   factor 4.5 to cancellation (measured 2.8e-7 everywhere); exactly +-1 for large |x|.
# - erfc(z), z >= 0: t exp(-z^2 + P(t)), t = 1 / (1 + z/2), P the degree-9 Chebyshev fit
#   of Press et al. (Numerical Recipes, erfcc), relative error below 1.2e-7 for every z;
#   the fp32 evaluation adds about z^2 * 1.2e-7 (rounding of -z^2 + P, which exp
#   multiplies): 2e-6 at z = 4, where erfc is 1.5e-8.
# - erf(x): |x| < 1/2: the Taylor series to x^11 (truncation below 3e-8); else
#   copysign(1 - erfc(|x|), x) (measured 2.3e-7 everywhere).
# - gelu_erf(x) = x/2 erfc(-x/sqrt 2), as erfc(|z|) for x < 0 and 2 - erfc(|z|) for x >= 0:
#   no cancellation on either side; erfc's error (measured 6.3e-7 for |x| <= 2, 1.9e-6 for
#   |x| <= 4, 3.8e-6 for |x| <= 6; below 4e-7 absolute everywhere; results below fp32's
#   range, x < -13, are 0).
# - gelu_tanh(x) = x sigmoid(2 u), u = sqrt(2/pi) (x + 0.044715 x^3) (the same function as
#   x/2 (1 + tanh u), without its cancellation for negative x): sigmoid's error at 2u,
#   which grows with |2u| (measured 3.8e-7 for |x| <= 2, 1.1e-6 for |x| <= 4, 4e-6 for
#   |x| <= 6; below 6e-7 absolute everywhere).
LOG2E = 1.4426950408889634
TANH_SMALL = 0.125
ERF_SMALL = 0.5
_SQRT_HALF = 0.7071067811865476
_GELU_TANH_K = 1.5957691216057308  # 2 sqrt(2 / pi)
_GELU_TANH_C = 0.044715
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)  # P(t), lowest degree first
_ERF_SERIES = tuple(2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                    for n in range(6))  # erf(x) / x in powers of x^2
_FX_DTYPES = {"float32": "Float32", "bfloat16": "BFloat16", "float16": "Float16"}


def _fx_dtype(fx, name: str):
    return getattr(fx, _FX_DTYPES[name])


class EpilogueMath:
    """The epilogue ops on fp32 scalars (FlyDSL values) of one lane; see the error notes
    above."""

    UNARY = ("neg", "exp", "erf", "relu", "sigmoid", "silu", "tanh", "gelu_erf", "gelu_tanh")

    def __init__(self, fx, rocdl) -> None:
        self.fx, self.rocdl = fx, rocdl

    def value(self, v):
        return self.fx.Float32(v) if isinstance(v, float) else v

    def apply(self, op: str, args: list):
        if op in self.UNARY:
            return getattr(self, op)(self.value(args[0]))
        if op == "div":
            return self.div(*args)
        a, b = (self.value(v) for v in args)
        if op in ("maximum", "minimum"):
            return a.maximumf(b) if op == "maximum" else a.minimumf(b)
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b}[op]()

    # ---- hardware approximations ----
    def exp2(self, x):
        return self.fx.Float32(self.rocdl.exp2(self.fx.Float32.ir_type, x.ir_value()))

    def rcp(self, x):
        return self.fx.Float32(self.rocdl.rcp(self.fx.Float32.ir_type, x.ir_value()))

    def horner(self, x, coeffs: tuple[float, ...]):
        """sum(coeffs[i] x^i) with fused multiply-adds."""
        acc = self.fx.Float32(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fx.fma(acc, x, self.fx.Float32(c))
        return acc

    # ---- ops ----
    def div(self, a, b):
        if isinstance(b, float) and 2.0**-126 <= abs(b) <= 2.0**126:
            return self.value(a) * (1.0 / b)
        return self.value(a) * self.rcp(self.value(b))

    def neg(self, x):
        return -x

    def relu(self, x):
        return x.maximumf(self.fx.Float32(0.0))

    def exp(self, x):
        return self.exp2(x * LOG2E)

    def sigmoid(self, x):
        return self.rcp(1.0 + self.exp2(x * -LOG2E))

    def silu(self, x):
        return x * self.sigmoid(x)

    def tanh(self, x):
        a = abs(x)
        e = self.exp2(a * (-2.0 * LOG2E))
        large = self.fx.copysign((1.0 - e) * self.rcp(1.0 + e), x)
        small = x * self.horner(x * x, (1.0, -1.0 / 3.0, 2.0 / 15.0, -17.0 / 315.0))
        return (a < TANH_SMALL).select(small, large)

    def erfc_nonneg(self, z):
        """erfc(z) for z >= 0."""
        t = self.rcp(1.0 + z * 0.5)
        return t * self.exp2((self.horner(t, _ERFC_P) - z * z) * LOG2E)

    def erf(self, x):
        a = abs(x)
        large = self.fx.copysign(1.0 - self.erfc_nonneg(a), x)
        small = x * self.horner(x * x, _ERF_SERIES)
        return (a < ERF_SMALL).select(small, large)

    def gelu_erf(self, x):
        c = self.erfc_nonneg(abs(x) * _SQRT_HALF)
        return (x * 0.5) * (x < 0.0).select(c, 2.0 - c)

    def gelu_tanh(self, x):
        f32 = self.fx.Float32
        return x * self.sigmoid(x * self.fx.fma(x * x, f32(_GELU_TANH_C * _GELU_TANH_K),
                                                f32(_GELU_TANH_K)))


def _operand_values(fx, operand, tensor, ld, row, col) -> list:
    """The 4 fp32 values of an epilogue operand at output ``(row, col .. col + 3)``: a
    ``col`` vector's 4 contiguous elements, a ``row`` vector's one element broadcast, a
    ``tile``'s 4 contiguous elements of row ``row`` (leading stride ``ld``)."""
    dtype = _fx_dtype(fx, operand.dtype)
    base = fx.get_iter(tensor)
    if operand.kind == "row":
        scalar = fx.ptr_load(base + row, dtype)
        return [scalar if dtype is fx.Float32 else scalar.to(fx.Float32)] * 4
    vec = fx.ptr_load(base + (col if operand.kind == "col" else row * ld + col),
                      fx.Vector[dtype, 4])
    if dtype is not fx.Float32:
        vec = vec.to(fx.Float32)
    return [vec[e] for e in range(4)]


def apply_epilogue(fx, rocdl, spec, value, extras, row, col):
    """``spec`` applied to ``value`` (a lane's 4 fp32 outputs ``out[row, col .. col + 3]``,
    alpha and bias applied), its operands loaded from ``extras``: the 4 results in
    ``spec.out_dtype``."""
    math_ops = EpilogueMath(fx, rocdl)
    columns = [_operand_values(fx, o, tensor, ld, row, col)
               for o, (tensor, ld) in zip(spec.operands, extras, strict=False)]
    results = []
    for e in range(4):
        values = {"acc": value[e]}
        values.update((f"x{i}", column[e]) for i, column in enumerate(columns))
        result = values["acc"]
        for j, step in enumerate(spec.steps):
            args = [values[a] if isinstance(a, str) else a for a in step.args]
            result = values[f"s{j}"] = math_ops.apply(step.op, args)
        results.append(result)
    out = fx.Vector.from_elements(results, fx.Float32)
    return out if spec.out_dtype == "float32" else out.to(_fx_dtype(fx, spec.out_dtype))
