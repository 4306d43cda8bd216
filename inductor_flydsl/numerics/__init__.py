"""Numeric references and tolerances shared by the kernels' validation (inside Inductor,
on a GPU) and the ISA emulator's verdicts: float64 references of the GEMMs, the MX
formats and their reference, and the tolerances every check uses."""
