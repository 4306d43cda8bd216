"""Timing a choice: the way the compiled graph runs it (graph replay or host dispatch,
``timing_parity.py``), an epilogue fusion timed the same way (``fusion_timing.py``), the
finalists re-measured (``remeasure.py``). What a time means (its mode, its noise) is
provenance (``provenance/timing_modes.py``, ``provenance/noise.py``)."""
