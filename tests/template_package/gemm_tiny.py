"""A test-only kernel file: the dense template's kernel under another name (its code is
``templates/gemm_dense.py``'s, re-exported), offered with one config."""

from inductor_flydsl.template_loader import load_template

_dense = load_template("gemm_dense")
globals().update({name: value for name, value in vars(_dense).items()
                  if not name.startswith("__")})
