"""The ``inductor-flydsl`` command line."""
