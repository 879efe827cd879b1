"""Temporal workflows and the pure bisection strategy and verdict logic they drive."""
