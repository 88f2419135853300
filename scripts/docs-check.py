#!/usr/bin/env python3
"""Checks the README and the guide, in a second, without building anything:

- the README is a front page: at most 250 lines;
- the README and the guide hold no commit hashes and no diary phrasing (history belongs in git
  and CHANGELOG.md);
- every code block says its language (a block without one would be compiled as Rust);
- a code block under `<!-- file: PATH -->` is the text of PATH, byte for byte (the README shows
  examples/examples/scheduler.rs so, and the two cannot drift apart);
- every relative link of the README, the guide, docs/ and ops/ resolves, anchors included;
- every page of the guide is linked from its index and compiled as doc tests
  (examples/src/lib.rs includes it).

The code blocks themselves are compiled by the doc tests: the README's by the
kafka-coordination crate (kafka-coordination/src/lib.rs), the guide's by kafka-coordination-examples.

    python3 scripts/docs-check.py              check this repository
    python3 scripts/docs-check.py --self-test  show that each check catches what it is for
"""

import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 250
GUIDE = "docs/guide"

# Pages held to the no-history rule; every Markdown file under docs/ and ops/ gets the link check.
PRESENT_TENSE = ["README.md", GUIDE, "docs/compatibility.md"]

HASH = re.compile(r"(?<![0-9A-Za-z_/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
DIARY = [
    r"\bon a (later|third|second|first) day\b",
    r"\bthat day\b",
    r"\b(fast|slow|slower|good|bad) hours?\b",
    r"\bthis (2-core )?machine\b",
    r"\bused to\b",
    r"\bno longer\b",
    r"\bnot there yet\b",
    r"\(before[:,) ]",
    r"\bbefore the change\b",
    r"\bthe build before\b",
    r"\bwe (tried|measured|found)\b",
]
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
SHOWS_FILE = re.compile(r"^<!-- file: (\S+) -->$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files(paths):
    for p in paths:
        full = os.path.join(ROOT, p)
        if os.path.isdir(full):
            for d, _, files in os.walk(full):
                for f in sorted(files):
                    if f.endswith(".md"):
                        yield os.path.relpath(os.path.join(d, f), ROOT)
        elif os.path.exists(full):
            yield p


def prose_lines(text):
    """(line number, line, in a code block) for every line."""
    in_code = False
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            yield n, line, True
            in_code = not in_code
            continue
        yield n, line, in_code


def slug(heading):
    """GitHub's anchor for a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[`*_]", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    with open(os.path.join(ROOT, path)) as f:
        for _, line, code in prose_lines(f.read()):
            if code:
                continue
            m = re.match(r"^#{1,6}\s+(.*)$", line)
            if m:
                base = slug(m.group(1))
                k = seen.get(base, 0)
                out.add(base if k == 0 else f"{base}-{k}")
                seen[base] = k + 1
    return out


def check():
    errors = []

    def error(path, n, message):
        errors.append(f"{path}:{n}: {message}")

    with open(os.path.join(ROOT, "README.md")) as f:
        readme_lines = len(f.read().splitlines())
    if readme_lines > README_MAX_LINES:
        error("README.md", readme_lines, f"{readme_lines} lines; a front page has at most {README_MAX_LINES}")

    present = set(markdown_files(PRESENT_TENSE))
    all_md = sorted(set(markdown_files(["README.md", "docs", "ops"])))
    for path in all_md:
        with open(os.path.join(ROOT, path)) as f:
            text = f.read()
        opening = True
        for n, line, code in prose_lines(text):
            m = FENCE.match(line)
            if m:
                if opening and not m.group(3).strip():
                    error(path, n, "a code block without a language (```rust, ```text, ```sh, ...)")
                opening = not opening
                continue
            if code:
                continue
            if path in present:
                for h in HASH.findall(line):
                    error(path, n, f"looks like a commit hash: {h} (history belongs in git)")
                for pattern in DIARY:
                    m = re.search(pattern, line, re.IGNORECASE)
                    if m:
                        error(path, n, f"diary phrasing: {m.group(0)!r} (state what is true now)")
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:, ...
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(os.path.join(ROOT, dest)):
                    error(path, n, f"broken link: {target} ({dest} does not exist)")
                    continue
                if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    error(path, n, f"broken anchor: {target} (no heading #{anchor} in {dest})")

    # A code block that shows a file: the file's text, exactly.
    for path in all_md:
        with open(os.path.join(ROOT, path)) as f:
            lines = f.read().splitlines(keepends=True)
        for n, line in enumerate(lines, 1):
            m = SHOWS_FILE.match(line.strip())
            if not m:
                continue
            shown = m.group(1)
            full = os.path.join(ROOT, shown)
            if n >= len(lines) or not FENCE.match(lines[n]):
                error(path, n, f"<!-- file: {shown} --> is not followed by a code block")
                continue
            end = next((k for k in range(n + 1, len(lines)) if FENCE.match(lines[k])), len(lines))
            block = "".join(lines[n + 1:end])
            if not os.path.exists(full):
                error(path, n, f"shows {shown}, which does not exist")
            elif open(full).read() != block:
                error(path, n, f"the code block differs from {shown}; copy the file into it")

    # Every page of the guide: linked from its index, and compiled as doc tests.
    index = os.path.join(GUIDE, "README.md")
    with open(os.path.join(ROOT, index)) as f:
        index_text = f.read()
    with open(os.path.join(ROOT, "examples/src/lib.rs")) as f:
        lib = f.read()
    for path in markdown_files([GUIDE]):
        name = os.path.relpath(path, GUIDE)
        if path != index and f"({name})" not in index_text:
            error(index, 1, f"the guide's index does not link {name}")
        if f'include_str!("../../{path}")' not in lib:
            error("examples/src/lib.rs", 1, f"{path} is not compiled as doc tests (add it to mod guide)")

    return errors, readme_lines, len(all_md)


def self_test():
    """A small tree with one fault of each kind: every check must report its own."""
    global ROOT
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "README.md": "# T\n\nFixed in 3f2a9c1d, on a later day.\n\n```\nx\n```\n"
                         "<!-- file: shown.rs -->\n```rust\nfn a() {}\n```\n"
                         "[gone](docs/nope.md) [ok](docs/guide/README.md#the-guide) "
                         "[bad anchor](docs/guide/README.md#nowhere)\n" + "line\n" * 250,
            "docs/guide/README.md": "# The guide\n\n[a](a.md)\n",
            "docs/guide/a.md": "# A\n",
            "docs/guide/b.md": "# B\n",
            "shown.rs": "fn b() {}\n",
            "examples/src/lib.rs": 'include_str!("../../docs/guide/README.md")\n'
                                   'include_str!("../../docs/guide/a.md")\n',
        }
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, path)), exist_ok=True)
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        saved, ROOT = ROOT, tmp
        try:
            errors, _, _ = check()
        finally:
            ROOT = saved
    expected = ["lines; a front page", "commit hash: 3f2a9c1d", "diary phrasing: 'on a later day'",
                "without a language", "broken link: docs/nope.md", "broken anchor",
                "does not link b.md", "b.md is not compiled", "differs from shown.rs"]
    missed = [e for e in expected if not any(e in err for err in errors)]
    extra = [err for err in errors if not any(e in err for e in expected)]
    if missed or extra:
        print(f"docs-check --self-test: missed {missed}; unexpected {extra}", file=sys.stderr)
        sys.exit(1)
    print(f"docs-check --self-test: all {len(expected)} kinds of fault caught")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    errors, readme_lines, files = check()
    for e in errors:
        print(f"docs-check: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"docs-check: README {readme_lines} lines; {files} Markdown files, links and code blocks fine")


if __name__ == "__main__":
    main()
