"""Topology model: a file goes load -> validate -> augment -> render, each a pure function."""
