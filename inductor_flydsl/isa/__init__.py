"""Reading compiled kernels: the final AMDGPU ISA FlyDSL writes, as text, no GPU needed.

``stats``: a kernel's resource metadata and MFMA counts; ``loop_analysis``: its main K
loop, instruction mix and llvm-mca's cycle estimate. Below both the FlyDSL backend (which
records these figures in its compile catalog) and the performance model (which predicts
from them); it imports neither.
"""
