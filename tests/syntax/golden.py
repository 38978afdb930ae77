"""Reader for the golden fixture files: sections of `=== title`, parts of `--- name`.

    === block: empty function body
    --- document
    def f(x):
        █
    --- expect
    kind: block

The cursor is marked with █ (a range for range edits with two of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

CURSOR = "█"
FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Case:
    source: str  # file name, for test ids
    title: str
    parts: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{Path(self.source).stem}: {self.title}"

    def document(self) -> tuple[str, list[int]]:
        """The document without cursor marks, and the mark offsets."""
        raw = self.parts["document"]
        marks = []
        while CURSOR in raw:
            marks.append(raw.index(CURSOR))
            raw = raw.replace(CURSOR, "", 1)
        return raw, marks

    def expect(self) -> dict[str, str]:
        out = {}
        for line in self.parts.get("expect", "").splitlines():
            if line.strip():
                key, _, value = line.partition(":")
                out[key.strip()] = value.strip()
        return out


def read_cases(path: Path) -> list[Case]:
    cases: list[Case] = []
    part = None
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("=== "):
            cases.append(Case(path.name, line[4:].strip()))
            part = None
        elif line.startswith("--- ") and cases:
            part = line[4:].strip()
            cases[-1].parts[part] = ""
        elif part is not None:
            cases[-1].parts[part] += line + "\n"
    # Parts end with the newline before the next marker; a part's own last
    # newline is kept only when written as an empty line before the marker.
    for case in cases:
        case.parts = {k: (v[:-1] if v.endswith("\n") else v) for k, v in case.parts.items()}
    return cases


def cases_in(folder: str) -> list[Case]:
    return [c for path in sorted((FIXTURES / folder).glob("*.txt")) for c in read_cases(path)]
