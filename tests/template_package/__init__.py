"""A test-only template package (``INDUCTOR_FLYDSL_TEMPLATE_PACKAGES=tests.template_package``):
one kernel file (``gemm_tiny.py``) and its spec, and nothing else. What the registry test
(tests/flydsl/test_template_registry.py) shows: a template is one spec plus one kernel
file; offered, compiled, emulated, ranked and swept with no edit outside them."""

from .gemm_tiny_spec import SPEC

TEMPLATE_SPECS = [SPEC]
