"""Small descriptive statistics helpers."""

from .core import mean, median, variance

__all__ = ["mean", "median", "variance"]
