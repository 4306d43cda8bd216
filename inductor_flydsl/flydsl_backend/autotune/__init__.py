"""The Inductor-facing side of the FlyDSL backend: its choice classes and its choice provider."""
