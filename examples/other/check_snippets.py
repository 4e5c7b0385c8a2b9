#!/usr/bin/env python3
"""The README's "Other languages" snippets and the files under examples/other/ are the same
text, so that what users copy is what is run (Ruby) or kept (Go, Java, C#).

Every snippet in README.md is a fenced code block directly after a marker line

    <!-- snippet: examples/other/<lang>/<file> -->

and its text must equal that file byte for byte (the file ends with one newline, the block's
text is the lines between the fences). Every source file under examples/other/<lang>/ that is
not a test must have exactly one snippet.

    python3 examples/other/check_snippets.py [README.md]

Prints one line per snippet and `snippets: N match, M differ`; exits 1 on any difference.
"""
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- snippet: (\S+) -->$")
FENCE = re.compile(r"^(`{3,})\S*$")


def snippets(readme_text):
    """Yields (path, text, line number) for every marked snippet of the README."""
    lines = readme_text.split("\n")
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        path = m.group(1)
        f = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not f:
            yield path, None, i + 1
            continue
        body = []
        for j in range(i + 2, len(lines)):
            if lines[j] == f.group(1):
                break
            body.append(lines[j])
        else:
            yield path, None, i + 1
            continue
        yield path, "\n".join(body) + "\n", i + 1


def is_snippet_file(p):
    return p.is_file() and p.suffix in {".rb", ".go", ".java", ".cs"} and not p.name.startswith("test_")


def main():
    readme = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    match = differ = 0
    seen = {}
    for path, body, lineno in snippets(text):
        where = f"{readme.name}:{lineno}"
        if path in seen:
            print(f"DIFFER {path}: a second snippet at {where} (first at line {seen[path]})")
            differ += 1
            continue
        seen[path] = lineno
        if body is None:
            print(f"DIFFER {path}: the marker at {where} is not followed by a closed fenced block")
            differ += 1
            continue
        f = ROOT / path
        if not f.is_file():
            print(f"DIFFER {path}: the file named at {where} does not exist")
            differ += 1
            continue
        want = f.read_text(encoding="utf-8")
        if body == want:
            print(f"match  {path} ({where})")
            match += 1
        else:
            print(f"DIFFER {path} ({where}): README snippet vs file")
            sys.stdout.writelines(difflib.unified_diff(
                body.splitlines(True), want.splitlines(True), f"README.md:{lineno}", path, n=1))
            differ += 1
    for f in sorted((ROOT / "examples" / "other").glob("*/*")):
        rel = f.relative_to(ROOT).as_posix()
        if is_snippet_file(f) and rel not in seen:
            print(f"DIFFER {rel}: no snippet in {readme.name} (add a <!-- snippet: {rel} --> block)")
            differ += 1
    if match == 0 and differ == 0:
        print(f"DIFFER no snippet markers found in {readme}")
        differ = 1
    print(f"snippets: {match} match, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
