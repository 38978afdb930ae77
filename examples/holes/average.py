def average(values):
    """The arithmetic mean of a non-empty list of numbers."""
    total = sum(values)
    return total / len(values)  # <hole>


if __name__ == "__main__":
    assert average([1, 2, 3, 6]) == 3
    assert average([5]) == 5
