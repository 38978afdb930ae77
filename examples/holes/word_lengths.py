def word_lengths(words):
    """Map each word to its number of characters."""
    lengths = {}
    for word in words:
        lengths[word] = len(word)  # <hole>
    return lengths


if __name__ == "__main__":
    assert word_lengths(["a", "abc"]) == {"a": 1, "abc": 3}
