"""Descriptive statistics over plain lists of numbers."""


def mean(values):
    """Arithmetic mean of a non-empty list."""
    if not values:
        raise ValueError("mean() of an empty list")
    return sum(values) / len(values)


def median(values):
    """Middle value of a non-empty list (the mean of the two middle values for even lengths)."""
    if not values:
        raise ValueError("median() of an empty list")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle] + ordered[middle + 1]) / 2


def variance(values):
    """Population variance of a non-empty list."""
    centre = mean(values)
    return sum((value - centre) ** 2 for value in values) / len(values)
