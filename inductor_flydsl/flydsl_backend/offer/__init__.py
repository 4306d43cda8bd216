"""Which configs a GEMM problem is offered: eligibility, search space, resources, ranking."""
