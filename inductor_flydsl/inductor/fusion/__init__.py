"""Epilogue fusion: fusable regions, their pass and lowering, the scheduler's decisions."""
