import os


def read_lines(path):
    """Return the lines of a text file without their line endings."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def count_words(path):
    total = 0
    for line in read_lines(path):
        total += len(line.split())
    return total


if __name__ == "__main__":
    print(count_words(os.sys.argv[1]))
