"""Prebuilt tuning DBs shipped with inductor-flydsl (installed as ``inductor_flydsl_tuning_db``)."""
