def is_palindrome(text):
    """True when text reads the same backwards, ignoring case and spaces."""
    cleaned = text.replace(" ", "").lower()
    return cleaned == cleaned[::-1]  # <hole>


if __name__ == "__main__":
    assert is_palindrome("Never odd or even")
    assert not is_palindrome("python")
