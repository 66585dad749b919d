#!/usr/bin/env python3
"""The documentation stands alone (docs/contributing.md, "Files and build"): a reader who has
only this repository can follow every reference in it.

- Every relative link of every tracked Markdown file ([text](path), [text](path#anchor),
  [label]: path) names a file or folder inside the repository that exists, and an anchor names
  a heading (or an <a id>) of the Markdown file it points to; links inside code are not links.
- Every page under docs/ is linked from README.md or docs/architecture.md, so none is an
  orphan a reader cannot reach.
- No tracked text file refers to a design or style document kept outside the repository
  (OUTSIDE below) or names an issue or task of the work that made it (WORK below): the code,
  the docs and the tests describe the product.

Prints each problem as FILE:LINE: what, and exits 1; prints a one-line summary and exits 0
otherwise.
    check_docs.py SOURCE_ROOT"""
import os
import re
import subprocess
import sys

# References to files that live outside the repository: an upper-case Markdown name (the form
# of README.md) that no tracked file has, and a relative path whose "../" steps leave the
# repository from the file that names it.
MD_NAME = re.compile(r"\b[A-Z][A-Z_]+\.md\b")
UP_PATH = re.compile(r"(?:\.\./)+[A-Za-z_][\w.-]*")
# Issue and task numbers: a bracketed "n/m", the word issue with a number, a bare "#nn", the
# work's own phrase for an issue.
WORK = re.compile(
    r"\[\d+/\d+\]|\bissues?\s*(?:#\s*)?\d+|(?:^|[\s(])#\d{2,}\b|\bthe issue(?:'s)?\b|"
    r"\bissue\s*\[",
    re.IGNORECASE,
)

LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
ANCHOR_TAG = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def outside(root, path, line, md_names):
    """The references in line (of tracked file path) to files outside the repository."""
    found = [m.group(0) for m in MD_NAME.finditer(line) if m.group(0) not in md_names]
    top = os.path.realpath(root)
    for m in UP_PATH.finditer(line):
        target = os.path.realpath(os.path.join(top, os.path.dirname(path), m.group(0)))
        if os.path.commonpath([top, target]) != top:
            found.append(m.group(0))
    return found


def tracked(root, *patterns):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", *patterns], capture_output=True,
                         check=True).stdout.decode()
    return [p for p in out.split("\0") if p]


def prose_lines(text):
    """(line number, line) of text outside fenced code blocks, inline code spans removed."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a Markdown file: its headings' slugs (numbered when repeated) and the
    ids of its <a> tags."""
    if path not in cache:
        seen, names = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        fenced = False
        for line in text.split("\n"):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                k = seen.get(base, 0)
                seen[base] = k + 1
                names.add(base if k == 0 else "%s-%d" % (base, k))
            names.update(ANCHOR_TAG.findall(line))
        cache[path] = names
    return cache[path]


def check_link(root, md, n, target, problems):
    """Whether target, linked from md at line n, resolves; returns the repository path it
    names (None for an outside or anchor-only link)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        return None  # http:, https:, mailto: ...
    path, _, anchor = target.partition("#")
    if path.startswith("/"):
        problems.append("%s:%d: absolute link %s (a reader of the repository has no such path)"
                        % (md, n, target))
        return None
    full = os.path.normpath(os.path.join(root, os.path.dirname(md), path)) if path else \
        os.path.join(root, md)
    rel = os.path.relpath(full, root)
    if rel == ".." or rel.startswith("../"):
        problems.append("%s:%d: link %s leaves the repository" % (md, n, target))
        return None
    if not os.path.exists(full):
        problems.append("%s:%d: link %s: %s does not exist" % (md, n, target, rel))
        return None
    if anchor:
        if not full.endswith(".md"):
            problems.append("%s:%d: link %s: an anchor into a file that is not Markdown"
                            % (md, n, target))
        elif anchor not in anchors(full):
            problems.append("%s:%d: link %s: %s has no heading or <a id> '%s'"
                            % (md, n, target, rel, anchor))
    return rel


def main(root):
    problems, linked, nlinks = [], {}, 0
    for md in tracked(root, "*.md"):
        with open(os.path.join(root, md), encoding="utf-8") as f:
            text = f.read()
        targets = set()
        for n, line in prose_lines(text):
            found = LINK.findall(line)
            m = REF_DEF.match(line)
            if m:
                found.append(m.group(1))
            for target in found:
                nlinks += 1
                rel = check_link(root, md, n, target, problems)
                if rel:
                    targets.add(rel)
        linked[md] = targets

    hubs = linked.get("README.md", set()) | linked.get("docs/architecture.md", set())
    for page in tracked(root, "docs/*.md"):
        if page not in hubs and page != "docs/architecture.md":
            problems.append("%s: not linked from README.md or docs/architecture.md" % page)

    me = os.path.relpath(os.path.abspath(__file__), os.path.abspath(root))
    md_names = {os.path.basename(p) for p in tracked(root, "*.md")}
    for path in tracked(root):
        if path == me:
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary fixtures, submodules
        for n, line in enumerate(lines, 1):
            for m in outside(root, path, line, md_names):
                problems.append("%s:%d: '%s' is outside the repository; name the docs/ page "
                                "that holds the rule" % (path, n, m))
            for m in WORK.finditer(line):
                problems.append("%s:%d: '%s' names the work, not the product"
                                % (path, n, m.group(0).strip()))

    for p in problems:
        print(p)
    if problems:
        print("FAIL: %d problems (docs/contributing.md, \"Files and build\")" % len(problems))
        return 1
    print("docs: %d links in %d Markdown files resolve; every docs/ page is linked; no outside "
          "reference, no issue number" % (nlinks, len(linked)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
