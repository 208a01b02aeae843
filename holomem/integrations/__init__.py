"""Adapters that plug holomem into agent frameworks (``langgraph``: a LangGraph store;
``hermes``: a Hermes Agent memory provider), and ``migrate``: moving another library's
memory (LangGraph, Chroma, Mem0) into holomem.

Each adapter imports its framework itself; holomem never requires one.
"""
