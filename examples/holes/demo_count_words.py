import os
import tempfile


def read_lines(path):
    """Return the lines of a text file without their line endings."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def count_words(path):
    total = 0
    for line in read_lines(path):
        total += len(line.split())  # <hole>
    return total


if __name__ == "__main__":
    # The README's demo hole (examples/demo.py, 13:9-13:35), with a check.
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as tmp:
        tmp.write("one two three\n\nfour five\n")
    try:
        assert count_words(tmp.name) == 5
    finally:
        os.unlink(tmp.name)
