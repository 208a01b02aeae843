"""Adapters that plug holomem into agent frameworks.

Each adapter imports its framework itself; holomem never requires one.
"""
