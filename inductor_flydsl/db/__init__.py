"""The SQLite tuning DB: schema, safe opening, reads and writes, layering, merge, verify."""
