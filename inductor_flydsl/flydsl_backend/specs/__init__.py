"""The template registry: one spec per FlyDSL template (``registry.py``), and the specs of
the shipped templates (one module each, named as the template)."""
