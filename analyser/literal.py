"""Literal text: a profile's strings shown exactly as text in every writer, never as commands.

A profile is data from anywhere: its model, operation, layer, variable and program names, and the
file's own name, may hold terminal escape sequences (``ESC[2J`` clears the screen, ``ESC]0;``
sets the window title, OSC 8 makes hyperlinks), Unicode bidi overrides that reorder what a reader
sees (CVE-2021-42574, "Trojan Source"), Markdown or HTML that a viewer would run, or
matplotlib mathtext (``$\\foo$`` raised a ParseFatalException in the report charts). Every
writer passes such text through one function of this module for its medium:

* :func:`terminal`: control characters, DEL, C1 controls and bidi controls shown as visible
  escapes (``\\x1b``, ``\\u202e``); newlines and tabs kept (for whole messages);
* :func:`one_line`: the same and newlines / tabs escaped too (for a name inside a line);
* :func:`markdown`: one line, with CommonMark's backslash escapes for the characters that start
  markup (emphasis, links, images, code, raw HTML, tables, headings at a line start) and ``&``
  ``<`` ``>`` as entities, so a name never becomes a link, a tag or a heading;
* :func:`html`: one line, HTML-escaped (Jinja2's autoescape does the same for templates);
* :func:`mathtext`: a ``$`` escaped so matplotlib draws it (charts also disable mathtext).

JSON outputs keep strings exact (``json`` escapes control characters itself), so programs get
the stored names unchanged. This module has no dependencies: the CLI, the reports, the exporters
and the GUI all import it.
"""

from __future__ import annotations

import html as _html
import re

#: C0 controls (except tab / newline for :func:`terminal`), DEL, C1 controls, and the Unicode
#: bidi embedding / override / isolate controls and the line / paragraph separators.
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_TERMINAL_RE = re.compile(f"[{_CONTROL}]")
_LINE_RE = re.compile(f"[{_CONTROL}\t\n]")
#: CommonMark: any ASCII punctuation may be backslash-escaped; these start inline markup
#: (emphasis, code, links and images: with both brackets escaped a ``(`` opens nothing, GFM
#: strikethrough and tables, math on GitHub) wherever they are.
_MD_RE = re.compile(r"([\\`*_\[\]|~$])")
#: ... and these only at the start of a line (headings, block quotes, lists, setext underlines).
_MD_LINE_START = re.compile(r"^(\s*)([#>+=-]|\d+[.)](?=\s|$))")


def _show(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object) -> str:
    """``text`` with every control character shown as an escape; newlines and tabs kept."""
    s = str(text)
    return _TERMINAL_RE.sub(_show, s) if _TERMINAL_RE.search(s) else s


def one_line(text: object) -> str:
    """``text`` on one line: every control character, newline and tab shown as an escape."""
    s = str(text)
    return _LINE_RE.sub(_show, s) if _LINE_RE.search(s) else s


def markdown(text: object) -> str:
    """``text`` as literal Markdown inline text (one line; renders as exactly ``text``)."""
    s = one_line(text)
    s = _html.escape(s, quote=False)  # & < > as entities: no raw HTML, no entity tricks
    s = _MD_RE.sub(r"\\\1", s)
    return _MD_LINE_START.sub(r"\1\\\2", s)


def html(text: object) -> str:
    """``text`` as literal HTML text (one line, quotes escaped for attributes too)."""
    return _html.escape(one_line(text), quote=True)


def mathtext(text: object) -> str:
    """``text`` for a matplotlib label: one line, ``$`` escaped so it is never mathtext."""
    return one_line(text).replace("$", r"\$")


__all__ = ["html", "markdown", "mathtext", "one_line", "terminal"]
