"""Offline tuning sweep."""
