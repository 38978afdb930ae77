def squares(n):
    """The squares of 0, 1, ..., n - 1."""
    return [i * i for i in range(n)]  # <hole>


if __name__ == "__main__":
    assert squares(4) == [0, 1, 4, 9]
    assert squares(0) == []
