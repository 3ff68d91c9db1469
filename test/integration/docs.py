"""The documentation the tests read, wherever it lives: the entry page README.md and the
reference pages beside the code (common/, worker/, deploy/, sql/ README.md). Tests ask for
all of it, or for one section by its heading, so a section may move between the pages."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ("README.md", "common/README.md", "worker/README.md", "deploy/README.md", "sql/README.md")


def _read(rel):
    path = os.path.join(ROOT, rel)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def text():
    """Every page, one after the other."""
    return "\n".join(t for t in (_read(p) for p in PAGES) if t is not None)


def headings(t):
    """[(offset, level, title)] of the Markdown headings of t outside fenced code blocks."""
    out, fence, pos = [], None, 0
    for line in t.split("\n"):
        f = re.match(r" {0,3}(`{3,}|~{3,})(.*)", line)
        if fence is None and f and not (f.group(1)[0] == "`" and "`" in f.group(2)):
            fence = f.group(1)
        elif fence is not None:
            if f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence) and not f.group(2).strip():
                fence = None
        else:
            m = re.match(r"(#{1,6}) +(.*?)[ \t]*$", line)
            if m:
                out.append((pos, len(m.group(1)), m.group(2)))
        pos += len(line) + 1
    return out


def section(title):
    """The section headed `title` (any level) in whichever page has it: from its heading to
    the next heading of the same or a higher level. None if no page has it."""
    for p in PAGES:
        t = _read(p)
        if t is None:
            continue
        hs = headings(t)
        for k, (pos, level, name) in enumerate(hs):
            if name == title:
                end = next((q for q, lv, _n in hs[k + 1:] if lv <= level), len(t))
                return t[pos:end]
    return None
