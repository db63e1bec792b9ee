"""Short, distinct labels for long names (no Qt): chart axes that list variables, programs or
operations have room for a few dozen characters, and names such as
``stage0/layer3.8/conv2/weights/accl`` differ in the middle as often as at the ends."""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def elide_middle(name: str, max_chars: int, tail: int | None = None) -> str:
    """``name`` cut to ``max_chars`` characters by replacing its middle with an ellipsis,
    keeping ``tail`` characters of the end (half the room by default)."""
    if len(name) <= max_chars:
        return name
    room = max(2, max_chars - 1)
    tail = room // 2 if tail is None else max(1, min(tail, room - 1))
    return name[: room - tail] + ELLIPSIS + name[len(name) - tail :]


def distinct_labels(names: Sequence[str], max_chars: int = 30) -> list[str]:
    """Labels of at most ``max_chars`` characters (middle elided), pairwise distinct when the
    names are: where elided labels collide, the split between the kept head and tail is moved
    until they differ; names that still collide (they differ only deep in the middle) get the
    differing part itself, then a ``#k`` suffix as a last resort."""
    names = [str(n) for n in names]
    labels = [elide_middle(n, max_chars) for n in names]
    room = max(2, max_chars - 1)
    for _round in range(3):
        groups: dict[str, list[int]] = {}
        for i, label in enumerate(labels):
            groups.setdefault(label, []).append(i)
        clashes = [g for g in groups.values() if len({names[i] for i in g}) > 1]
        if not clashes:
            break
        for g in clashes:
            for i in g:
                if _round == 0:  # keep more of the end (names often differ in a suffix)
                    labels[i] = elide_middle(names[i], max_chars, tail=room - 4)
                elif _round == 1:  # more of the start
                    labels[i] = elide_middle(names[i], max_chars, tail=4)
                else:  # the part where the names of the group differ
                    labels[i] = _around_difference(names[i], [names[j] for j in g], max_chars)
    owner: dict[str, str] = {}  # label -> the name it was first given to
    out = []
    for name, label in zip(names, labels, strict=True):
        base, k = label, 1
        while owner.setdefault(label, name) != name:
            k += 1
            label = f"{base}#{k}"
        out.append(label)
    return out


def _around_difference(name: str, group: list[str], max_chars: int) -> str:
    """``…`` + the characters of ``name`` from where it first differs from the others of its
    group, + ``…``, within ``max_chars``."""
    others = [o for o in group if o != name]
    first = min(
        (next((k for k, (x, y) in enumerate(zip(name, o)) if x != y), min(len(name), len(o))))
        for o in others
    )
    start = max(0, first - 4)
    body = name[start : start + max_chars - 2]
    return (ELLIPSIS if start else "") + body + (ELLIPSIS if start + len(body) < len(name) else "")


__all__ = ["ELLIPSIS", "distinct_labels", "elide_middle"]


def nice_name(camel: str) -> str:
    """'vertexInstanceState' -> 'Vertex instance state'."""
    out: list[str] = []
    for ch in camel:
        if ch.isupper() and out:
            out.append(" ")
            out.append(ch.lower())
        else:
            out.append(ch)
    text = "".join(out)
    return text[:1].upper() + text[1:]
